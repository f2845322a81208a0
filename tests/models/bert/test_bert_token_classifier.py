"""BertTokenClassifier (BERT sec. 5.3): a tiny BERT fine-tuned on raw words
learns a synthetic NER task to entity F1 >= 0.9 on held-out sentences;
word-level predictions come from each word's first sub-token; presets,
`.keras` files and configs round-trip; bad labels fail before training.

Every test runs on the backend of the session (KERAS_BACKEND).
"""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo import (
    BertBackbone,
    BertPreprocessor,
    BertPretrainer,
    BertTokenizer,
    bert_finetuning_optimizer,
)
from kzoo.models.bert.bert_token_classifier import BertTokenClassifier, TokenAccuracy
from kzoo.models.bert.bert_token_classifier_preprocessor import BertTokenClassifierPreprocessor

# XLA compilation costs more than these few tiny steps on TensorFlow (CPU).
QUICK = {"jit_compile": False} if keras.backend.backend() == "tensorflow" else {}

# === A synthetic NER task ===
# A name is a start piece, which gives its type, and one or two "##" pieces
# shared by all types: its type shows only at its first sub-token. Entities
# are one or two names, and two entities may follow each other, so B- or I-
# depends on the word before (a name of the same type or not).
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
STARTS = {"PER": ["jo", "ma", "li"], "LOC": ["ber", "pa", "ro"], "ORG": ["ac", "ze", "un"]}
ENDINGS = ["##ra", "##mo", "##vi", "##ta", "##len", "##son"]
CONTEXT = ["mr", "in", "for", "the", "a", "man", "met", "went", "said", "today", "and", "then",
           "works", "lives", "was", "old", "city", "team", "she"]  # fmt: skip
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *CONTEXT, *sum(STARTS.values(), []), *ENDINGS]
SEQUENCE_LENGTH = 32  # sentences have at most 17 tokens


def sentence(rng):
    """Words and tags, e.g. ["mr", "jomo", "marason", "went"], ["O", "B-PER", "I-PER", "O"]."""
    words, tags = [], []

    def context(count):
        words.extend(rng.choice(CONTEXT) for _ in range(count))
        tags.extend(["O"] * count)

    context(rng.randint(0, 2))
    for kind in rng.sample(list(STARTS), rng.randint(1, 2)):  # two entities differ in type
        length = rng.randint(1, 2)
        for _ in range(length):
            endings = [rng.choice(ENDINGS)[2:] for _ in range(rng.randint(1, 2))]
            words.append(rng.choice(STARTS[kind]) + "".join(endings))
        tags.extend([f"B-{kind}"] + [f"I-{kind}"] * (length - 1))
        context(rng.randint(0, 2))
    return words, tags


def sentences(count, seed, exclude=()):
    rng = random.Random(seed)
    pairs = [sentence(rng) for _ in range(count)]
    pairs = [(w, t) for w, t in pairs if w not in exclude]
    return [w for w, _ in pairs], [t for _, t in pairs]


def label_ids(tag_sequences):
    return [[TAGS.index(tag) for tag in tags] for tags in tag_sequences]


TRAIN_WORDS, TRAIN_TAGS = sentences(768, seed=0)
TEST_WORDS, TEST_TAGS = sentences(64, seed=1, exclude=TRAIN_WORDS)  # 2 batches of 32: 1 shape to compile


def tiny_backbone():
    return BertBackbone(vocabulary_size=len(VOCABULARY), num_layers=2, num_heads=2, hidden_dim=32,
                        intermediate_dim=64, max_sequence_length=SEQUENCE_LENGTH, dropout=0.0)  # fmt: skip


def tiny_model(**overrides):
    preprocessor = BertTokenClassifierPreprocessor(BertTokenizer(VOCABULARY), SEQUENCE_LENGTH)
    return BertTokenClassifier(tiny_backbone(), len(TAGS), preprocessor=preprocessor, **overrides)


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def assert_same_predictions(model, revived, words):
    # Logits from direct calls: TensorFlow's `predict` graphs of two equal
    # models may round differently (~1e-6), eager calls do not.
    features = revived.preprocessor(words)
    logits = to_numpy(revived(features))
    assert np.max(np.abs(logits - to_numpy(model(features)))) <= 1e-6
    assert revived.predict_words(words, verbose=0) == model.predict_words(words, verbose=0)


# === Fine-tuning from a pre-trained preset on raw words ===


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A preset directory with a backbone and its tokenizer, as pre-training leaves it."""
    keras.utils.set_random_seed(0)
    path = tmp_path_factory.mktemp("pretrained")
    BertPretrainer(tiny_backbone(), tokenizer=BertTokenizer(VOCABULARY)).save_to_preset(path)
    return path


@pytest.fixture(scope="module")
def fine_tuned(pretrained):
    keras.utils.set_random_seed(0)
    model = BertTokenClassifier.from_preset(pretrained, num_classes=len(TAGS), tags=TAGS)
    epochs, batch_size = 8, 16  # 384 steps: F1 >= 0.95 on 10 of 10 (backend, seed) runs
    steps = epochs * -(-len(TRAIN_WORDS) // batch_size)
    model.compile(optimizer=bert_finetuning_optimizer(steps, learning_rate=5e-3), **QUICK)
    model.fit(TRAIN_WORDS, label_ids(TRAIN_TAGS), epochs=epochs, batch_size=batch_size, verbose=0)
    return model


@pytest.fixture(scope="module")
def tagged(pretrained):
    """A token classifier with tags, compiled as `fine_tuned`, its weights moved away from the
    preset's and the head's initial ones (as fine-tuning would), without its cost: what the tests
    below check holds for any weights; learning is `fine_tuned`'s."""
    keras.utils.set_random_seed(0)
    model = BertTokenClassifier.from_preset(pretrained, num_classes=len(TAGS), tags=TAGS)
    model.compile(optimizer=bert_finetuning_optimizer(10, learning_rate=5e-3), **QUICK)
    model.optimizer.build(model.trainable_variables)  # as after a fit: its state is saved too
    rng = np.random.default_rng(0)
    model.set_weights([w + rng.normal(0.0, 0.05, w.shape).astype(w.dtype) for w in model.get_weights()])
    return model


@pytest.mark.once  # trains to a stated accuracy: one backend per run (tests/conftest.py)
def test_learns_entities_of_held_out_sentences(fine_tuned):
    assert isinstance(fine_tuned.preprocessor, BertTokenClassifierPreprocessor)
    assert fine_tuned.preprocessor.sequence_length == SEQUENCE_LENGTH  # the tokenizer, adapted
    scores = fine_tuned.evaluate_entities(TEST_WORDS, TEST_TAGS, verbose=0)
    assert scores["f1"] >= 0.9, scores
    results = fine_tuned.evaluate(TEST_WORDS, label_ids(TEST_TAGS), verbose=0, return_dict=True)
    assert results["token_accuracy"] >= 0.9, results
    # Packed inputs with token labels (-1 where ignored) give the same numbers.
    features, token_labels = fine_tuned.preprocessor(TEST_WORDS, label_ids(TEST_TAGS))
    packed = {name: value.numpy() for name, value in features.items()}
    again = fine_tuned.evaluate(packed, token_labels.numpy(), verbose=0, return_dict=True)
    np.testing.assert_allclose(list(again.values()), list(results.values()), rtol=1e-5)


@pytest.mark.once  # the data path (labels, splits, input forms) runs the same TensorFlow and NumPy code on every backend; each backend's own steps: test_task and the container-loss test
def test_words_in_every_form_give_the_same_results(fine_tuned):
    words = [["mr", "jomo", "in"], ["pavi", "rolen", "went"]]  # equally long: a dense tensor
    labels = [[0, 1, 0], [3, 4, 0]]
    expected = fine_tuned.evaluate(words, labels, verbose=0)
    for same in (["mr jomo in", "pavi rolen went"], tf.ragged.constant(words)):
        assert fine_tuned.evaluate(same, tf.ragged.constant(labels), verbose=0) == pytest.approx(expected)


def test_tagged_model_round_trips_through_a_preset(tagged, tmp_path):
    tagged.save_to_preset(tmp_path)
    revived = BertTokenClassifier.from_preset(tmp_path)
    assert revived.get_config() == tagged.get_config()
    assert_same_predictions(tagged, revived, TEST_WORDS[:32])


def test_keras_file_round_trip(tagged, tmp_path):
    path = tmp_path / "token_classifier.keras"
    tagged.save(path)
    revived = keras.saving.load_model(path)
    assert isinstance(revived, BertTokenClassifier) and revived.tags == TAGS
    features = tagged.preprocessor(TEST_WORDS[:32])
    assert np.max(np.abs(to_numpy(revived(features)) - to_numpy(tagged(features)))) <= 1e-6


# === Word-level predictions and labels ===


@pytest.fixture(scope="module")
def untrained():
    keras.utils.set_random_seed(0)
    return tiny_model()


def test_word_predictions_come_from_first_sub_tokens(untrained):
    words = [["mr", "jomo", "marason"], ["pavi", "in"]]  # "marason": ma ##ra ##son
    token_labels = np.argmax(untrained.predict(words, verbose=0), axis=-1)
    positions = untrained.preprocessor.word_positions(words).to_list()
    assert positions == [[1, 2, 4], [1, 3]]
    expected = [[int(token_labels[i, p]) for p in row] for i, row in enumerate(positions)]
    assert untrained.predict_words(words, verbose=0) == expected
    # The same sentences as strings, or as a ragged tensor.
    for same in (["mr jomo marason", "pavi in"], tf.ragged.constant(words)):
        assert untrained.predict_words(same, verbose=0) == expected


def test_words_cut_off_by_truncation_get_no_prediction(untrained, tagged):
    words = [["marason"] * 12]  # ma ##ra ##son: 36 tokens, 30 fit; the last two words are cut off
    assert untrained.predict_words(words, verbose=0)[0][10:] == [-1, -1]
    assert tagged.predict_words(words, verbose=0)[0][10:] == ["O", "O"]  # with tags


@pytest.mark.parametrize("labels", [[[0, 1], [0, 7, 0]], [[0, -1], [0, 3, 0]]], ids=["too_large", "negative"])
def test_labels_out_of_range_fail_before_training(untrained, labels):
    before = [to_numpy(v).copy() for v in untrained.trainable_variables]
    with pytest.raises(ValueError, match=r"labels must be integers in \[0, 6\] \(num_classes=7\)"):
        untrained.fit([["mr", "jomo"], ["in", "pavi", "ro"]], labels, verbose=0)
    assert all(np.array_equal(to_numpy(v), b) for v, b in zip(untrained.trainable_variables, before))


def test_sentence_weights_and_token_accuracy(tagged):
    words = [["mr", "jomo"], ["in", "pavi", "ro"]]
    # A sentence of weight 0 does not count, whatever its labels.
    losses = [
        tagged.evaluate(words, [[0, 1], labels], sample_weight=np.array([1.0, 0.0]), verbose=0)[0]
        for labels in ([0, 3, 4], [6, 6, 6])
    ]
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    # Accuracy over the labelled tokens only, -1 positions left out.
    metric = TokenAccuracy()
    logits = np.eye(3, dtype="float32")[[[0, 1, 2], [2, 2, 2]]]  # predicts 0 1 2, 2 2 2
    metric.update_state(np.array([[0, 2, -1], [2, -1, -1]]), logits, sample_weight=np.array([1.0, 2.0]))
    assert float(metric.result()) == pytest.approx((1 + 0 + 2 * 1) / (1 + 1 + 2))


# === Construction, config and errors ===


def test_a_preprocessor_or_tokenizer_is_converted(untrained):
    tokenizer = BertTokenizer(VOCABULARY)
    from_preprocessor = BertTokenClassifier(untrained.backbone, 3, BertPreprocessor(tokenizer, 12))
    from_tokenizer = BertTokenClassifier(untrained.backbone, 3, tokenizer)
    for model, length in ((from_preprocessor, 12), (from_tokenizer, SEQUENCE_LENGTH)):
        assert type(model.preprocessor) is BertTokenClassifierPreprocessor
        assert model.preprocessor.sequence_length == length


def test_config_round_trip():
    model = tiny_model(tags=TAGS, dropout=0.2)
    config = model.get_config()
    assert (config["num_classes"], config["dropout"], config["tags"]) == (7, 0.2, TAGS)
    revived = BertTokenClassifier.from_config(config)
    assert revived.get_config() == config
    revived.set_weights(model.get_weights())
    features = model.preprocessor([["mr", "jomo", "marason"]])
    np.testing.assert_array_equal(to_numpy(revived(features)), to_numpy(model(features)))


@pytest.mark.parametrize(
    "arguments,message",
    [
        (dict(num_classes=1), "num_classes must be an int >= 2"),
        (dict(num_classes=3.0), "num_classes must be an int >= 2"),
        (dict(num_classes=3, tags=["O", "B-PER"]), "tags must be 3 distinct strings"),
        (dict(num_classes=2, tags=["O", "O"]), "tags must be 2 distinct strings"),
        (dict(tags=["O"]), "num_classes must be an int >= 2"),
        (dict(tags=["O", 1]), r"tags must be 2 distinct strings.*not strings: \[1\]"),
    ],
)
def test_argument_errors(untrained, arguments, message):
    with pytest.raises(ValueError, match=message):
        BertTokenClassifier(untrained.backbone, **arguments)


# === Tags as labels, in and out ===


def test_tags_give_num_classes_and_one_of_them_is_needed(untrained):
    assert BertTokenClassifier(untrained.backbone, tags=TAGS).num_classes == len(TAGS)
    with pytest.raises(TypeError, match=r"BertTokenClassifier needs 'num_classes' .*or tags=\[...\]"):
        BertTokenClassifier(untrained.backbone)


def test_word_labels_as_tags_are_their_ids_and_unknown_tags_fail_before_training(tagged):
    words, tags = TEST_WORDS[:32], TEST_TAGS[:32]
    expected = tagged.evaluate(words, label_ids(tags), verbose=0)
    assert tagged.evaluate(words, tags, verbose=0) == pytest.approx(expected, abs=1e-6)
    assert tagged.evaluate(words, tf.ragged.constant(tags), verbose=0) == pytest.approx(expected, abs=1e-6)
    before = [to_numpy(v).copy() for v in tagged.variables]
    with pytest.raises(ValueError, match=r"none of its tags: \['B-MISC'\]. Its tags are \['O', 'B-PER'"):
        tagged.fit([["mr", "jomo"]], [["O", "B-MISC"]], verbose=0)
    assert all(np.array_equal(to_numpy(v), b) for v, b in zip(tagged.variables, before))


def test_predict_labels_is_predict_words(tagged, untrained):
    words = TEST_WORDS[:8]
    labels = tagged.predict_labels(words, verbose=0)
    assert labels == tagged.predict_words(words, verbose=0) and all(t in TAGS for s in labels for t in s)
    assert untrained.predict_labels(words, verbose=0) == untrained.predict_words(words, verbose=0)


def test_tags_are_saved_and_renamed_by_from_preset(tagged, tmp_path):
    tagged.save_to_preset(tmp_path)
    assert BertTokenClassifier.from_preset(tmp_path).tags == TAGS
    renamed = [tag.replace("PER", "PERSON") for tag in TAGS]
    assert BertTokenClassifier.from_preset(tmp_path, tags=renamed).tags == renamed
    with pytest.raises(ValueError, match=r"tags must be 7 distinct strings.*\(2 names for num_classes=7\)"):
        BertTokenClassifier.from_preset(tmp_path, tags=["O", "B-X"])


def test_entity_scores_need_tags_and_raw_text_needs_a_preprocessor(untrained):
    with pytest.raises(ValueError, match="build the model with tags="):
        untrained.evaluate_entities([["mr", "jomo"]], [["O", "B-PER"]])
    with pytest.raises(ValueError, match="has no preprocessor"):
        BertTokenClassifier(untrained.backbone, 3).predict_words([["mr"]])
