"""kzoo.BertTokenizer (BERT sec. 3) against Hugging Face BertTokenizerFast on a
generated corpus, plus offsets, graph mode, errors and config."""

import time

import numpy as np
import pytest
import tensorflow as tf

import kzoo
from tests.models.bert.synthetic_corpus import make_corpus

pytestmark = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SMALL = SPECIALS + ["the", "cafe", "café", "Café", "is", "open", "un", "##believ", "##able", "!",
                    "字", "中", "hello", "world", "##s", ",", "."]


@pytest.fixture(scope="module")
def corpus():
    sentences = make_corpus(10_000, seed=0)
    assert len(sentences) >= 10_000
    return sentences


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def learned(request, corpus, tmp_path_factory):
    lowercase = request.param
    path = tmp_path_factory.mktemp("vocab") / f"vocab_{lowercase}.txt"
    start = time.time()
    # Learned from a slice (the pure-Python learner is the slow part); the
    # parity check runs on all sentences, so unseen words exercise [UNK] too.
    vocab = kzoo.learn_wordpiece_vocabulary(
        corpus[:600], 1500, lowercase=lowercase, output_path=path, progress=False
    )
    print(f"learned {len(vocab)} tokens in {time.time() - start:.1f}s")
    return lowercase, str(path), vocab


def _first_difference(a, b):
    return next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))


def test_matches_hugging_face_on_every_sentence(learned, corpus):
    transformers = pytest.importorskip("transformers")
    lowercase, path, vocab = learned
    hf = transformers.BertTokenizerFast(vocab=path, do_lower_case=lowercase)
    # Guard against the transformers 5.x trap (vocab ignored, everything id 1).
    assert hf.vocab_size == len(vocab)
    expected = hf(corpus, add_special_tokens=False)["input_ids"]
    flat = [i for ids in expected for i in ids]
    assert len(set(flat)) > 500
    assert flat.count(1) / len(flat) < 0.05, "HF maps almost everything to [UNK]"

    tokenizer = kzoo.BertTokenizer(path, lowercase=lowercase)
    got = tokenizer(corpus).to_list()
    bad = [i for i in range(len(corpus)) if got[i] != expected[i]]
    print(f"{'uncased' if lowercase else 'cased'}: {len(bad)} mismatching sentences of {len(corpus)}")
    examples = []
    for i in bad[:5]:
        j = _first_difference(got[i], expected[i])
        examples.append(
            (corpus[i][:60], [vocab[k] for k in got[i][j : j + 3]], [vocab[k] for k in expected[i][j : j + 3]])
        )
    assert not bad, f"{len(bad)} mismatches, e.g. (text, kzoo, hf): {examples}"
    # tokenize() normalizes whole strings, tokenize_with_offsets() character
    # by character (to map offsets back): the same ids.
    assert tokenizer.tokenize_with_offsets(corpus)[0].to_list() == got


@pytest.mark.parametrize("sequence_length", [24, 256])
def test_packed_pairs_and_singles_match_hugging_face(learned, corpus, sequence_length):
    """Through BertPreprocessor: [CLS] A [SEP] B [SEP], longest-first truncation, padding."""
    transformers = pytest.importorskip("transformers")
    lowercase, path, _ = learned
    hf = transformers.BertTokenizerFast(vocab=path, do_lower_case=lowercase)
    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(path, lowercase=lowercase), sequence_length)
    half = len(corpus) // 2
    for segments in [(corpus[:half], corpus[half : 2 * half]), (corpus,)]:
        ours = preprocessor(segments if len(segments) == 2 else segments[0])
        theirs = hf(*segments, truncation="longest_first", max_length=sequence_length,
                    padding="max_length", return_tensors="np")
        differ = (
            (ours["token_ids"].numpy() != theirs["input_ids"]).any(1)
            | (ours["segment_ids"].numpy() != theirs["token_type_ids"]).any(1)
            | (ours["padding_mask"].numpy() != theirs["attention_mask"]).any(1)
        )
        print(f"{len(segments)} segment(s), length {sequence_length}: {int(differ.sum())} mismatches")
        assert int(differ.sum()) == 0
        full = (ours["padding_mask"].numpy().sum(1) == sequence_length).mean()
        # Length 24 truncates most examples, 256 almost none: both paths are exercised.
        assert full > 0.5 if sequence_length == 24 else full < 0.05


def test_special_token_ids():
    tokenizer = kzoo.BertTokenizer(SMALL)
    assert (tokenizer.pad_token_id, tokenizer.unknown_token_id, tokenizer.cls_token_id,
            tokenizer.sep_token_id, tokenizer.mask_token_id) == (0, 1, 2, 3, 4)
    assert tokenizer.vocabulary_size() == len(SMALL)
    assert tokenizer.get_vocabulary() == SMALL
    assert tokenizer.id_to_token(2) == "[CLS]" and tokenizer.token_to_id("[MASK]") == 4


def test_unknown_words_map_to_unk():
    tokenizer = kzoo.BertTokenizer(SMALL)
    assert tokenizer(["zzz the qqq"]).to_list() == [[1, 5, 1]]
    assert tokenizer(["a" * 101]).to_list() == [[1]]


def test_accents_stripped_only_when_uncased():
    uncased = kzoo.BertTokenizer(SMALL, lowercase=True)
    cased = kzoo.BertTokenizer(SMALL, lowercase=False)
    assert uncased("Café").numpy().tolist() == [SMALL.index("cafe")]
    assert cased("Café").numpy().tolist() == [SMALL.index("Café")]
    assert cased("café").numpy().tolist() == [SMALL.index("café")]
    keep = kzoo.BertTokenizer(SMALL, lowercase=True, strip_accents=False)
    assert keep("Café").numpy().tolist() == [SMALL.index("café")]


def test_cjk_split_per_character():
    tokenizer = kzoo.BertTokenizer(SMALL)
    assert tokenizer(["字中字"]).to_list() == [[15, 16, 15]]


def test_offsets_point_at_substrings():
    tokenizer = kzoo.BertTokenizer(SMALL)
    text = "Héllo,\u00a0WORLDs 字\u200bthe Café!"
    ids, starts, ends = tokenizer.tokenize_with_offsets([text])
    raw = text.encode("utf-8")
    pieces = [raw[s:e].decode("utf-8") for s, e in zip(starts.to_list()[0], ends.to_list()[0])]
    assert [SMALL[i] for i in ids.to_list()[0]] == ["hello", ",", "world", "##s", "字", "the", "cafe", "!"]
    assert pieces == ["Héllo", ",", "WORLD", "s", "字", "the", "Café", "!"]
    # A scalar string gives 1-D results.
    ids, starts, ends = tokenizer.tokenize_with_offsets("the Café")
    assert starts.numpy().tolist() == [0, 4] and ends.numpy().tolist() == [3, 9]


def test_input_types_and_dense_output():
    tokenizer = kzoo.BertTokenizer(SMALL)
    for inputs in (["the cafe", "is open un"], np.array(["the cafe", "is open un"]),
                   np.array([b"the cafe", b"is open un"]), tf.constant(["the cafe", "is open un"])):
        out = tokenizer(inputs)
        assert isinstance(out, tf.RaggedTensor) and out.dtype == tf.int32
        assert out.to_list() == [[5, 6], [9, 10, 11]]
    single = tokenizer("the cafe")
    assert isinstance(single, tf.Tensor) and single.numpy().tolist() == [5, 6]
    dense = tokenizer(["the cafe", "is open un the"], sequence_length=3)
    assert dense.dtype == tf.int32 and dense.numpy().tolist() == [[5, 6, 0], [9, 10, 11]]
    assert tokenizer("the", sequence_length=3).numpy().tolist() == [5, 0, 0]


def test_detokenize_round_trip():
    tokenizer = kzoo.BertTokenizer(SMALL)
    ids = tokenizer(["the cafe is unbelievable !", "hello worlds"])
    assert tokenizer.detokenize(ids).numpy().tolist() == [b"the cafe is unbelievable !", b"hello worlds"]


def test_tf_data_graph_mode():
    tokenizer = kzoo.BertTokenizer(SMALL)
    dataset = tf.data.Dataset.from_tensor_slices(["the cafe", "hello world", "字 !"]).batch(2).map(tokenizer)
    batches = [b.to_list() for b in dataset]
    assert batches == [[[5, 6], [17, 18]], [[15, 14]]]
    dense = tf.data.Dataset.from_tensor_slices(["the cafe", "is"]).batch(2).map(
        lambda x: tokenizer(x, sequence_length=4)
    )
    assert next(iter(dense)).numpy().tolist() == [[5, 6, 0, 0], [9, 0, 0, 0]]
    scalar = tf.data.Dataset.from_tensor_slices(["the cafe"]).map(tokenizer.tokenize)
    assert next(iter(scalar)).numpy().tolist() == [5, 6]


def test_errors(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises((ValueError, FileNotFoundError), match="nope.txt"):
        kzoo.BertTokenizer(str(missing))
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        kzoo.BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
    with pytest.raises(ValueError, match=r"\[CLS\].*\[SEP\]"):
        kzoo.BertTokenizer(["[PAD]", "[UNK]", "[MASK]", "a"])
    tokenizer = kzoo.BertTokenizer(SMALL)
    for bad in ([1, 2, 3], np.array([1, 2]), tf.constant([1, 2]), 3):
        with pytest.raises(ValueError, match="expected strings"):
            tokenizer(bad)


def test_vocabulary_file_keeps_unicode_line_separators(tmp_path):
    path = tmp_path / "vocab.txt"
    tokens = SPECIALS + ["a\u2028b", "c"]
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    assert kzoo.BertTokenizer(str(path)).get_vocabulary() == tokens


def test_config_round_trip():
    import keras

    tokenizer = kzoo.BertTokenizer(SMALL, lowercase=False)
    config = tokenizer.get_config()
    assert config["vocabulary"] == SMALL
    restored = kzoo.BertTokenizer.from_config(config)
    assert restored.get_config() == config
    assert restored(["Café is"]).to_list() == tokenizer(["Café is"]).to_list()
    serialized = keras.saving.serialize_keras_object(tokenizer)
    again = keras.saving.deserialize_keras_object(serialized)
    assert again.get_config() == config
