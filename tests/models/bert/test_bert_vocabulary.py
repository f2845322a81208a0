"""kzoo.learn_wordpiece_vocabulary (BERT sec. 3) on a generated corpus."""

import time

import pytest
import tensorflow as tf

import kzoo
from tests.models.bert.synthetic_corpus import make_corpus


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
