"""BertTokenClassifierPreprocessor (labels at each word's first sub-token, BERT
sec. 5.3) and the entity-level F1 of BIO tags (conlleval semantics)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo import BertTokenizer
from kzoo.models.bert.bert_token_classifier_preprocessor import BertTokenClassifierPreprocessor
from kzoo.models.bert.bert_bio_tags import bio_entities, entity_f1

VOCABULARY = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",  # 0-4
    "john", "in", "the", "u", ".", "s", "play", "##ing", "##s",  # 5-13
]
PAD, UNK, CLS, SEP = 0, 1, 2, 3
JOHN, IN, THE, U, DOT, S, PLAY, ING, PLURAL = range(5, 14)

WORDS = [["John", "plays", "in", "the", "U.S."], ["playing"]]
LABELS = [[1, 0, 0, 0, 2], [3]]

data_test = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)


def preprocessor(sequence_length=14):
    return BertTokenClassifierPreprocessor(BertTokenizer(VOCABULARY), sequence_length=sequence_length)


def as_lists(features, labels=None):
    out = {key: value.numpy().tolist() for key, value in features.items()}
    return out if labels is None else (out, labels.numpy().tolist())


@data_test
def test_label_at_the_first_sub_token_of_each_word():
    features, labels = as_lists(*preprocessor()(WORDS, LABELS))
    assert features["token_ids"] == [
        # [CLS] john play ##s in the u . s . [SEP]: "plays" and "U.S." span several tokens
        [CLS, JOHN, PLAY, PLURAL, IN, THE, U, DOT, S, DOT, SEP, PAD, PAD, PAD],
        [CLS, PLAY, ING, SEP] + [PAD] * 10,
    ]
    assert labels == [
        [-1, 1, 0, -1, 0, 0, 2, -1, -1, -1, -1, -1, -1, -1],
        [-1, 3, -1, -1] + [-1] * 10,
    ]
    assert features["segment_ids"] == [[0] * 14, [0] * 14]
    assert features["padding_mask"] == [[1] * 11 + [0] * 3, [1] * 4 + [0] * 10]
    assert preprocessor().word_positions(WORDS).to_list() == [[1, 2, 4, 5, 6], [1]]


@data_test
@pytest.mark.parametrize(
    "words",
    [
        ["John plays  in the U.S.", "playing"],  # split on white space
        np.array(["John plays in the U.S.", "playing"]),
        tf.constant(["John plays in the U.S.\t", " playing "]),
        tf.ragged.constant(WORDS),
        [tuple(WORDS[0]), np.array(WORDS[1])],
    ],
    ids=["strings", "numpy", "string_tensor", "ragged", "tuples_and_arrays"],
)
@data_test
def test_every_input_form_gives_the_same_features(words):
    expected = preprocessor()(WORDS)
    out = preprocessor()(words)
    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(out[key].numpy(), expected[key].numpy())


@data_test
def test_only_the_model_inputs_and_labels_as_int32():
    features, labels = preprocessor()(WORDS, tf.ragged.constant(LABELS, dtype=tf.int64))
    assert sorted(features) == ["padding_mask", "segment_ids", "token_ids"]
    assert all(v.dtype == tf.int32 and v.shape == (2, 14) for v in features.values())
    assert labels.dtype == tf.int32 and labels.shape == (2, 14)
    features, labels, weights = preprocessor()(WORDS, LABELS, [0.5, 1.0])
    assert weights == [0.5, 1.0]


@data_test
def test_dense_words_and_labels():
    words, labels = tf.constant([["john", "in"], ["the", "u.s."]]), tf.constant([[1, 2], [3, 4]])
    features, labels = preprocessor(6)(words, labels)
    assert features["token_ids"].numpy().tolist() == [
        [CLS, JOHN, IN, SEP, PAD, PAD],
        [CLS, THE, U, DOT, S, SEP],  # "u.s." cut after "s": 4 tokens fit
    ]
    assert labels.numpy().tolist() == [[-1, 1, 2, -1, -1, -1], [-1, 3, 4, -1, -1, -1]]


@data_test
def test_a_word_without_tokens_becomes_unk_and_keeps_its_label():
    # "\x00" and "" give no token, "zebra" is not in the vocabulary.
    features, labels = as_lists(*preprocessor(8)([["john", "\x00", "", "zebra", "in"]], [[1, 2, 3, 4, 5]]))
    assert features["token_ids"] == [[CLS, JOHN, UNK, UNK, UNK, IN, SEP, PAD]]
    assert labels == [[-1, 1, 2, 3, 4, 5, -1, -1]]


@data_test
def test_truncation_keeps_the_first_sub_tokens_that_fit():
    words, labels = [["John", "plays", "U.S.", "in"]], [[1, 0, 2, 4]]  # john play ##s u . s . in
    # 4 tokens fit: "U.S." is cut after its first sub-token, "in" is dropped.
    features, token_labels = as_lists(*preprocessor(6)(words, labels))
    assert features["token_ids"] == [[CLS, JOHN, PLAY, PLURAL, U, SEP]]
    assert token_labels == [[-1, 1, 0, -1, 2, -1]]
    assert preprocessor(6).word_positions(words).to_list() == [[1, 2, 4, -1]]
    # 2 tokens fit: "plays" is cut mid-word, keeping "play" and its label.
    features, token_labels = as_lists(*preprocessor(4)(words, labels))
    assert features["token_ids"] == [[CLS, JOHN, PLAY, SEP]]
    assert token_labels == [[-1, 1, 0, -1]]
    assert preprocessor(4).word_positions(words).to_list() == [[1, 2, -1, -1]]
    # One token fits; an empty sentence is [CLS] [SEP].
    features, token_labels = as_lists(*preprocessor(3)([["john", "in"], []], [[1, 2], []]))
    assert features["token_ids"] == [[CLS, JOHN, SEP], [CLS, SEP, PAD]]
    assert token_labels == [[-1, 1, -1], [-1, -1, -1]]
    assert preprocessor(3).word_positions([["john", "in"], []]).to_list() == [[1, -1], []]


@data_test
def test_word_positions_pick_per_word_predictions():
    prep = preprocessor()
    _, labels = prep(WORDS, LABELS)
    positions = prep.word_positions(WORDS)
    # Gathering the token labels at the positions gives back the word labels.
    gathered = tf.gather(labels, positions.to_tensor(0), batch_dims=1)
    assert tf.ragged.boolean_mask(gathered, positions.to_tensor(-1) >= 0).to_list() == LABELS
    assert positions.dtype == tf.int32


@pytest.fixture(scope="module")
def ragged_map():
    """One `dataset.map(preprocessor)` over ragged batches (each trace and first
    run of the preprocessor cost ~3 s of CPU): the words of WORDS and two more
    sentences in batches of 2, then three batches of one sentence: a word
    short of labels, a negative label, a good one. An error in a map is its
    batch's; the iterator goes on to the next."""
    prep = preprocessor()
    words = WORDS + [["the", "john"], ["u.s.", "in", "the"]]
    labels = LABELS + [[0, 1], [2, 0, 0]]
    good = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(words), tf.ragged.constant(labels)))
    bad = tf.data.Dataset.from_tensor_slices(
        (tf.ragged.constant([["john", "in"], ["the"], ["in"]]), tf.ragged.constant([[1], [-1], [0]]))
    )  # a word short, then a negative label
    batches = iter(good.ragged_batch(2).concatenate(bad.ragged_batch(1)).map(prep))
    results = []
    while True:
        try:
            results.append(next(batches))
        except StopIteration:
            return prep, words, labels, results
        except tf.errors.InvalidArgumentError as error:
            results.append(error)


@data_test
def test_inside_tf_data_with_ragged_words(ragged_map):
    prep, words, labels, results = ragged_map
    batches = results[:2]
    eager_features, eager_labels = prep(words, labels)
    np.testing.assert_array_equal(
        np.concatenate([x["token_ids"].numpy() for x, _ in batches]), eager_features["token_ids"].numpy()
    )
    np.testing.assert_array_equal(np.concatenate([y.numpy() for _, y in batches]), eager_labels.numpy())

    sentences = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(words))
    positions = sentences.ragged_batch(4).map(prep.word_positions)
    assert next(iter(positions)).to_list() == prep.word_positions(words).to_list()


@data_test
def test_inside_tf_data_with_sentence_strings_and_dense_batches():
    prep = preprocessor(8)
    sentences, labels = ["john in", "the u.s."], [[1, 2], [3, 4]]
    x, y = next(iter(tf.data.Dataset.from_tensor_slices((sentences, labels)).batch(2).map(prep)))
    assert x["token_ids"].numpy().tolist() == [
        [CLS, JOHN, IN, SEP, PAD, PAD, PAD, PAD],
        [CLS, THE, U, DOT, S, DOT, SEP, PAD],
    ]
    assert y.numpy().tolist() == [[-1, 1, 2, -1, -1, -1, -1, -1], [-1, 3, 4, -1, -1, -1, -1, -1]]


def test_labels_work_with_a_loss_that_ignores_minus_one():
    features, labels = preprocessor()(WORDS, LABELS)
    logits = np.random.default_rng(0).normal(size=(2, 14, 4)).astype("float32")
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
    got = float(keras.ops.convert_to_numpy(loss(labels.numpy(), logits)))
    kept = labels.numpy() >= 0
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_probs, np.maximum(labels.numpy(), 0)[..., None], -1)[..., 0][kept].mean()
    np.testing.assert_allclose(got, expected, rtol=1e-5)


@data_test
@pytest.mark.parametrize(
    "labels,message",
    [
        ([[1, 0, 0, 0], [3]], "one label per word"),  # a word short
        ([[1, 0, 0, 0, 2]], "one label per word"),  # a sentence short
        ([[1, 0, 0, 0, -2], [3]], "non-negative"),
        ([[1.0, 0, 0, 0, 2], [3]], "integer label ids"),
        ([1, 3], "integer label ids"),
        ([["B-PER"] * 5, ["O"]], "integer label ids"),
    ],
)
@data_test
def test_label_errors(labels, message):
    with pytest.raises(ValueError, match=message):
        preprocessor()(WORDS, labels)


@data_test
def test_label_errors_inside_tf_data(ragged_map):
    batches = ragged_map[3][2:]
    assert len(batches) == 3
    assert isinstance(batches[0], tf.errors.InvalidArgumentError) and "one label per word" in str(batches[0])
    assert isinstance(batches[1], tf.errors.InvalidArgumentError) and "non-negative" in str(batches[1])
    assert batches[2][1].numpy().tolist()[0][:3] == [-1, 0, -1]  # good batches still flow


@data_test
@pytest.mark.parametrize(
    "x,message",
    [
        ("john plays", "single string"),
        ([1, 2], "got"),
        ([[1, 2]], "non-strings"),
        (tf.constant([[[b"a"]]]), "shape"),
        (tf.constant([1, 2]), "int32 tensor"),
    ],
)
@data_test
def test_input_errors(x, message):
    with pytest.raises(ValueError, match=message):
        preprocessor()(x)


@data_test
def test_sequence_length_error():
    with pytest.raises(ValueError, match="sequence_length=2"):
        preprocessor(2)


@data_test
def test_config_and_preset_round_trip(tmp_path):
    prep = preprocessor(9)
    revived = BertTokenClassifierPreprocessor.from_config(prep.get_config())
    assert revived.sequence_length == 9 and revived.tokenizer.get_vocabulary() == VOCABULARY
    prep.save_to_preset(tmp_path)
    loaded = BertTokenClassifierPreprocessor.from_preset(tmp_path)
    for other in (revived, loaded):
        np.testing.assert_array_equal(other(WORDS, LABELS)[1].numpy(), prep(WORDS, LABELS)[1].numpy())
        np.testing.assert_array_equal(
            other(WORDS)["token_ids"].numpy(), prep(WORDS)["token_ids"].numpy()
        )


# === Entity-level F1 (conlleval) ===


@data_test
def test_bio_entities():
    assert bio_entities(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 2), ("LOC", 3, 4)]
    assert bio_entities(["O", "I-PER", "I-PER"]) == [("PER", 1, 3)]  # I- after O starts one
    assert bio_entities(["B-PER", "I-LOC"]) == [("PER", 0, 1), ("LOC", 1, 2)]  # type change
    assert bio_entities(["I-PER", "B-PER", "I-PER"]) == [("PER", 0, 1), ("PER", 1, 3)]  # IOB1
    assert bio_entities(["S-PER", "B-LOC", "I-LOC", "E-LOC", "I-LOC"]) == [
        ("PER", 0, 1), ("LOC", 1, 4), ("LOC", 4, 5)  # IOBES: after E- an I- starts anew
    ]
    assert bio_entities([b"B-MISC", b"I-MISC"]) == [("MISC", 0, 2)]
    assert bio_entities(["O", "O"]) == [] and bio_entities([]) == []


@data_test
def test_entity_f1_exact_match_only():
    true = [["B-PER", "I-PER", "O"]]
    assert entity_f1(true, true) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    zero = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert entity_f1(true, [["B-PER", "O", "O"]]) == zero  # partial overlap is wrong
    assert entity_f1(true, [["B-PER", "I-PER", "I-PER"]]) == zero  # too long is wrong
    assert entity_f1(true, [["B-ORG", "I-ORG", "O"]]) == zero  # wrong type
    assert entity_f1(true, [["I-PER", "I-PER", "O"]])["f1"] == 1.0  # IOB1 spelling, same entity


@data_test
def test_entity_f1_precision_differs_from_recall():
    true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-MISC"]]  # 4 entities
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O", "O"]]  # 3, of which 2 correct
    scores = entity_f1(true, predicted)
    assert scores["precision"] == pytest.approx(2 / 3)
    assert scores["recall"] == pytest.approx(2 / 4)
    assert scores["f1"] == pytest.approx(2 * (2 / 3) * (1 / 2) / (2 / 3 + 1 / 2))  # 4/7
    assert scores["f1"] == pytest.approx(4 / 7)


@data_test
def test_entity_f1_without_entities_is_zero():
    zero = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert entity_f1([["B-PER", "O"]], [["O", "O"]]) == zero  # empty predictions
    assert entity_f1([["O", "O"]], [["B-PER", "O"]]) == zero  # no true entities
    assert entity_f1([["O"]], [["O"]]) == zero and entity_f1([], []) == zero


@data_test
def test_entities_do_not_cross_sentences():
    true = [["O", "B-PER"], ["I-PER", "O"]]
    assert entity_f1(true, [["O", "B-PER"], ["B-PER", "O"]])["f1"] == 1.0


@data_test
@pytest.mark.parametrize(
    "true,predicted,message",
    [
        ([["PER"]], [["O"]], "Bad tag 'PER'"),
        ([["O"]], [["B-"]], "Bad tag 'B-'"),
        (["B-PER", "O"], ["B-PER", "O"], "list of tag sequences"),
        ([["O", "O"]], [["O"]], "Sentence 0 has 2 true tags but 1"),
        ([["O"], ["O"]], [["O"]], "2 true tag sequences but 1"),
    ],
)
@data_test
def test_entity_f1_errors(true, predicted, message):
    with pytest.raises(ValueError, match=message):
        entity_f1(true, predicted)
