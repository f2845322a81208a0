"""kzoo.learn_wordpiece_vocabulary (BERT sec. 3) on a generated corpus."""

import time

import pytest
import tensorflow as tf

import kzoo
from tests.models.bert.synthetic_corpus import make_corpus

pytestmark = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(1_000, seed=1)


def test_learns_vocabulary_with_specials_first(corpus, tmp_path):
    path = tmp_path / "vocab.txt"
    start = time.time()
    vocab = kzoo.learn_wordpiece_vocabulary(corpus, 1500, output_path=path, progress=False)
    print(f"learned {len(vocab)} tokens in {time.time() - start:.1f}s")
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(vocab) <= 1500 and len(set(vocab)) == len(vocab)
    assert any(t.startswith("##") for t in vocab)
    assert "cafe" in vocab and "café" not in vocab  # uncased strips accents
    # No token holds white space (tensorflow-text's BasicTokenizer would leave "\u3000" in words).
    assert not [t for t in vocab if any(c.isspace() for c in t)]
    assert path.read_text(encoding="utf-8").split("\n")[:-1] == vocab
    tokenizer = kzoo.BertTokenizer(str(path))
    ids = tokenizer(corpus[:200]).flat_values.numpy()
    assert (ids == tokenizer.unknown_token_id).mean() < 0.05


def test_cased_and_dataset_input(corpus):
    dataset = tf.data.Dataset.from_tensor_slices(corpus[:300])
    vocab = kzoo.learn_wordpiece_vocabulary(dataset, 800, lowercase=False, progress=False)
    assert vocab[0] == "[PAD]" and len(vocab) <= 800
    assert "Café" in vocab or "Caf" in vocab or "##é" in vocab


def test_rejects_non_text():
    with pytest.raises(ValueError, match="expected strings"):
        kzoo.learn_wordpiece_vocabulary([1, 2, 3], 100)


def test_moderate_corpus_reaches_target_size():
    # 20k generated sentences (~2.4 MB): the learner was minutes on this
    # (library learn_with_thresh re-run for every threshold); now seconds.
    corpus = make_corpus(20_000, seed=2)
    vocab = kzoo.learn_wordpiece_vocabulary(corpus, 2000, progress=False)
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(vocab)) == len(vocab)
    assert 0.95 * 2000 <= len(vocab) <= 2000
    assert not [t for t in vocab if any(c.isspace() for c in t)]


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_fast_learner_equals_tensorflow_text_learner(lowercase):
    """kzoo's `_learn_with_thresh` is a faster rewrite of tensorflow-text's
    `learn_with_thresh`; it must give the same vocabulary token for token."""
    from kzoo.tokenizers import wordpiece_vocabulary as bv

    library = bv.learner
    texts = make_corpus(400, seed=3)
    dataset = bv._dataset(texts).map(
        lambda x: bv.split_words(tf.reshape(x, [-1]), lowercase, None).flat_values
    )
    counts = library.count_words(dataset)
    params = library.Params(
        int(1e7), 2, 4, int(5e6), 50, 1000, 500, 0.05, True, "##", list(bv.RESERVED_TOKENS)
    )
    words = library.get_input_words(list(counts.items()), params.reserved_tokens, 50)
    words = library.filter_input_words(words, library.get_allowed_chars(words, 1000), params.max_input_tokens)
    char_tokens = library.extract_char_tokens(words)
    first_counts = bv._suffix_counts(words, "##")
    for threshold in (2, 5, 40):
        expected = library.learn_with_thresh(words, threshold, params)
        assert len(expected) > 50
        assert bv._learn_with_thresh(words, threshold, params, char_tokens, first_counts) == expected
