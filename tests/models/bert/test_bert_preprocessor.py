"""BertPreprocessor: packing, longest-first truncation (parity with Hugging Face),
tf.data use, and feeding BertBackbone on the current backend."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo import BertBackbone, BertPreprocessor, BertTokenizer
from kzoo.models.bert.bert_preprocessor import longest_first_budgets

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "home", "##s", "##ing"]
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [".", ","]

data_test = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)


@pytest.fixture(scope="module")
def vocabulary_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def hf_tokenizer(vocabulary_file):
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.BertTokenizerFast(vocab=vocabulary_file, do_lower_case=True)
    # The transformers 5.x trap: a tokenizer that ignores the vocabulary maps
    # everything to one id, and parity against it would pass vacuously.
    assert tokenizer("the cat sat")["input_ids"] == [2, 5, 6, 7, 3]
    return tokenizer


def random_texts(rng, count, max_words):
    words = ["the", "cat", "sat", "on", "mat", "dogs", "running", "far", "away", "home", ".", "zebra"]
    return [
        " ".join(rng.choice(words, size=rng.integers(0, max_words + 1)))
        for _ in range(count)
    ]


def hf_longest_first(a, b, budget):
    """Transcription of the Rust `tokenizers` LongestFirst rule (truncate_encodings)."""
    if a + b <= budget:
        return a, b
    n1, n2 = (b, a) if a > b else (a, b)
    n2 = n1 if n1 > budget else max(n1, budget - n1)
    if n1 + n2 > budget:
        n1, n2 = budget // 2, budget // 2 + budget % 2
    if a > b:
        n1, n2 = n2, n1
    return min(a, n1), min(b, n2)


@data_test
def test_longest_first_budgets_match_the_rule_exhaustively():
    pairs = list(itertools.product(range(16), repeat=2))
    for budget in range(1, 14):
        keep_a, keep_b = longest_first_budgets(
            tf.constant([a for a, _ in pairs]), tf.constant([b for _, b in pairs]), budget
        )
        got = list(zip(keep_a.numpy().tolist(), keep_b.numpy().tolist()))
        assert got == [hf_longest_first(a, b, budget) for a, b in pairs]


@data_test
@pytest.mark.parametrize("sequence_length", [8, 9, 16, 32])
def test_pairs_match_hugging_face(vocabulary_file, hf_tokenizer, sequence_length):
    rng = np.random.default_rng(sequence_length)
    texts_a, texts_b = random_texts(rng, 300, 20), random_texts(rng, 300, 20)
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary_file), sequence_length=sequence_length)
    ours = {k: v.numpy() for k, v in preprocessor((texts_a, texts_b)).items()}
    theirs = hf_tokenizer(
        texts_a, texts_b, truncation="longest_first", max_length=sequence_length,
        padding="max_length", return_tensors="np",
    )
    mismatches = np.flatnonzero(
        (ours["token_ids"] != theirs["input_ids"]).any(1)
        | (ours["segment_ids"] != theirs["token_type_ids"]).any(1)
        | (ours["padding_mask"] != theirs["attention_mask"]).any(1)
    )
    assert len(mismatches) == 0, f"{len(mismatches)} of 300 pairs differ, e.g. {mismatches[:5]}"
    assert (ours["padding_mask"].sum(1) == sequence_length).mean() > 0.2  # truncation happened


@data_test
def test_single_segments_match_hugging_face(vocabulary_file, hf_tokenizer):
    texts = random_texts(np.random.default_rng(0), 300, 30)
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary_file), sequence_length=16)
    ours = preprocessor(texts)
    theirs = hf_tokenizer(texts, truncation=True, max_length=16, padding="max_length", return_tensors="np")
    np.testing.assert_array_equal(ours["token_ids"].numpy(), theirs["input_ids"])
    np.testing.assert_array_equal(ours["segment_ids"].numpy(), theirs["token_type_ids"])
    np.testing.assert_array_equal(ours["padding_mask"].numpy(), theirs["attention_mask"])


@data_test
def test_layout_of_a_pair(vocabulary_file):
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary_file), sequence_length=10)
    out = {k: v.numpy().tolist() for k, v in preprocessor((["the cat"], ["sat"])).items()}
    assert out["token_ids"] == [[2, 5, 6, 3, 7, 3, 0, 0, 0, 0]]
    assert out["segment_ids"] == [[0, 0, 0, 0, 1, 1, 0, 0, 0, 0]]
    assert out["padding_mask"] == [[1, 1, 1, 1, 1, 1, 0, 0, 0, 0]]


@data_test
def test_single_string_gives_unbatched_outputs(vocabulary_file):
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary_file), sequence_length=6)
    out = preprocessor("the cat sat on the mat")
    assert out["token_ids"].numpy().tolist() == [2, 5, 6, 7, 8, 3]
    assert out["padding_mask"].shape == (6,)


def test_tf_data_map_feeds_the_backbone(vocabulary_file):
    texts = ["the cat sat", "dogs ran far away home", "the mat", "cat"]
    labels = [0, 1, 0, 1]
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary_file), sequence_length=12)
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(2).map(preprocessor)
    x, y = next(iter(dataset))
    eager = preprocessor(texts[:2])
    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(x[key].numpy(), eager[key].numpy())
    assert y.numpy().tolist() == [0, 1]

    backbone = BertBackbone(
        vocabulary_size=len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=12,
    )
    inputs = {k: v.numpy() for k, v in x.items()}
    output = backbone(inputs)["sequence_output"]
    assert tuple(output.shape) == (2, 12, 8)
    predicted = backbone.predict(dataset.map(lambda x, y: x), verbose=0)["pooled_output"]
    assert predicted.shape == (4, 8)
    np.testing.assert_allclose(
        predicted[:2], keras.ops.convert_to_numpy(backbone(inputs)["pooled_output"]), atol=1e-5
    )


@data_test
def test_errors(vocabulary_file):
    tokenizer = BertTokenizer(vocabulary_file)
    with pytest.raises(ValueError, match="sequence_length=2"):
        BertPreprocessor(tokenizer, sequence_length=2)
    with pytest.raises(ValueError, match="tuple of 3"):
        BertPreprocessor(tokenizer, sequence_length=8)((["a"], ["b"], ["c"]))


@data_test
def test_config_round_trip(vocabulary_file):
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary_file), sequence_length=12)
    revived = BertPreprocessor.from_config(preprocessor.get_config())
    assert revived.sequence_length == 12
    np.testing.assert_array_equal(
        revived(["the cat sat"])["token_ids"].numpy(), preprocessor(["the cat sat"])["token_ids"].numpy()
    )
