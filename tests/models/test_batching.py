"""Length-aware batching on the raw-text path (`kzoo.models.batching`, `kzoo.data.padding_ladder`):
the same answers as fixed padding, fewer positions computed, compiled shapes bounded by the ladder."""

import keras
import numpy as np
import pytest

import kzoo
from kzoo.data.padding_ladder import length_ladder, text_lengths
from tests.models.bert.task_fixtures import FILLERS, VOCABULARY, choice_examples, tiny_backbone

SEQUENCE_LENGTH = 64  # ladder 16, 32, 64


def texts_of_every_length(n=45, seed=0):
    """Texts from empty to longer than SEQUENCE_LENGTH, including one at a
    rung exactly ([CLS] + 14 words + [SEP] = 16 positions); n % 32 != 0 so the
    last batch is partial."""
    rng = np.random.default_rng(seed)
    lengths = [0, 14, 15, 30, 46, 62, 90, *rng.integers(0, 70, n - 7)]
    return [" ".join(rng.choice(FILLERS, size=int(k))) for k in lengths]


def short_heavy_texts(n, seed=0):
    """Mostly short texts, a few long ones, as real messages are."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(FILLERS, size=min(int(k), 90))) for k in rng.geometric(0.1, n)]


def pair(task_class, padding, preprocessor_kwargs=None, **kwargs):
    """The same weights under both paddings."""
    keras.utils.set_random_seed(0)
    backbone = tiny_backbone(max_sequence_length=SEQUENCE_LENGTH)
    models = []
    for mode in ("longest", padding):
        preprocessor = task_class.preprocessor_class(
            kzoo.BertTokenizer(VOCABULARY), SEQUENCE_LENGTH, padding=mode, **(preprocessor_kwargs or {}))
        models.append(task_class(backbone, preprocessor=preprocessor, **kwargs))
    models[1].set_weights(models[0].get_weights())
    return models


def test_classifier_predictions_equal_fixed_padding():
    longest, fixed = pair(kzoo.BertClassifier, "max_length", num_classes=3)
    texts = texts_of_every_length()
    np.testing.assert_allclose(longest.predict(texts, verbose=0), fixed.predict(texts, verbose=0), atol=1e-5)
    np.testing.assert_allclose(longest.predict(texts[5:6], verbose=0), fixed.predict(texts[5:6], verbose=0), atol=1e-5)
    pairs = (texts[:20], texts[20:40])
    np.testing.assert_allclose(longest.predict(pairs, verbose=0), fixed.predict(pairs, verbose=0), atol=1e-5)
    assert longest.predict_labels(texts, verbose=0) == fixed.predict_labels(texts, verbose=0)


def test_sequence_outputs_equal_fixed_padding_at_real_positions():
    longest, fixed = pair(kzoo.BertFeatureExtractor, "max_length", strategy="last_hidden")
    texts = texts_of_every_length()
    a, b = longest.predict(texts, verbose=0), fixed.predict(texts, verbose=0)
    assert a.shape == b.shape == (len(texts), SEQUENCE_LENGTH, 32)
    mask = np.asarray(fixed.preprocessor(texts)["padding_mask"], bool)
    np.testing.assert_allclose(a[mask], b[mask], atol=1e-5)


def test_token_classifier_words_equal_fixed_padding():
    longest, fixed = pair(kzoo.BertTokenClassifier, "max_length", num_classes=3)
    words = [text.split() for text in texts_of_every_length()]
    assert longest.predict_words(words, verbose=0) == fixed.predict_words(words, verbose=0)


def test_multiple_choice_and_answers_equal_fixed_padding():
    keras.utils.set_random_seed(0)
    (contexts, choices), _ = choice_examples(40, seed=1)
    longest, fixed = pair(kzoo.BertMultipleChoice, "max_length", num_choices=4)
    np.testing.assert_allclose(
        longest.predict((contexts, choices), verbose=0), fixed.predict((contexts, choices), verbose=0), atol=1e-5
    )
    windows = {"max_question_length": 16, "document_stride": 16}
    longest, fixed = pair(kzoo.BertQuestionAnswerer, "max_length", preprocessor_kwargs=windows)
    questions, contexts = texts_of_every_length(30, seed=2)[:15], texts_of_every_length(30, seed=3)[15:]
    assert longest.answer(questions, contexts) == fixed.answer(questions, contexts)


def test_mixed_bfloat16_within_its_tolerance():
    keras.config.set_dtype_policy("mixed_bfloat16")
    longest, fixed = pair(kzoo.BertClassifier, "max_length", num_classes=3)
    texts = texts_of_every_length()
    np.testing.assert_allclose(longest.predict(texts, verbose=0), fixed.predict(texts, verbose=0), atol=3e-2)


def test_batches_are_grouped_by_length_and_cut_to_the_ladder():
    model = pair(kzoo.BertClassifier, "max_length", num_classes=3)[0]
    texts = short_heavy_texts(400)
    data = model._prepare(texts, np.zeros(len(texts), int), order="shuffled", seed=3)[1]
    ladder = length_ladder(SEQUENCE_LENGTH, compiled=model.jit_compile)  # any multiple of 8 without XLA
    assert data.ladder == ladder
    computed = 0
    for x, _ in data:
        length, longest = x["token_ids"].shape[1], text_lengths(x["padding_mask"]).max()
        assert length == ladder[np.searchsorted(ladder, longest)]  # the smallest rung that holds it
        computed += length * len(x["token_ids"])
    assert computed < 0.5 * len(texts) * SEQUENCE_LENGTH  # fixed padding computes every position


def test_fit_compiles_at_most_once_per_rung():
    model = pair(kzoo.BertClassifier, "max_length", num_classes=3)[0]
    traced = []
    step = model.train_step

    def counting_step(*args):
        data = args[-1]
        traced.append(tuple(data[0]["token_ids"].shape))
        return step(*args)

    model.train_step = counting_step
    texts = texts_of_every_length(300)
    model.compile(optimizer="adam", jit_compile=keras.backend.backend() == "jax")
    model.fit(texts, np.arange(len(texts)) % 3, batch_size=16, epochs=2, verbose=0)
    lengths = {shape[1] for shape in traced if shape[1] is not None}
    assert lengths <= set(length_ladder(SEQUENCE_LENGTH, compiled=model.jit_compile)), traced
    if keras.backend.backend() == "jax":  # one trace (one XLA compile) per shape
        assert len(set(traced)) == len(traced) <= 2 * len(length_ladder(SEQUENCE_LENGTH)), traced


def test_shuffled_batches_depend_on_seed_and_epoch_only():
    model = pair(kzoo.BertClassifier, "max_length", num_classes=3)[0]
    texts = texts_of_every_length(100)
    first = model._prepare(texts, np.zeros(100, int), batch_size=8, order="shuffled", seed=5)[1]
    again = model._prepare(texts, np.zeros(100, int), batch_size=8, order="shuffled", seed=5)[1]
    for epoch in (0, 3):
        first.set_epoch(epoch)
        again.set_epoch(epoch)
        assert [b.tolist() for b in first.batches] == [b.tolist() for b in again.batches]
    epoch_three = [b.tolist() for b in first.batches]
    first.set_epoch(4)
    assert [b.tolist() for b in first.batches] != epoch_three


@pytest.mark.parametrize("padding", ["longest", "max_length"])
def test_padding_is_kept_by_presets(tmp_path, padding):
    model = pair(kzoo.BertClassifier, padding, num_classes=3)[1]
    model.save_to_preset(tmp_path / "preset")
    assert kzoo.BertClassifier.from_preset(str(tmp_path / "preset")).preprocessor.padding == padding


def test_bad_padding_is_refused():
    with pytest.raises(ValueError, match="padding must be 'longest'"):
        kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16, padding="dynamic")


@pytest.mark.parametrize("pooling", ["mean", "max", "cls"])
def test_embeddings_equal_fixed_padding(pooling):
    longest, fixed = pair(kzoo.BertTextEmbedder, "max_length", pooling=pooling)
    texts = texts_of_every_length()
    np.testing.assert_allclose(longest.encode(texts, verbose=0), fixed.encode(texts, verbose=0), atol=1e-5)


@pytest.mark.backend_independent
def test_texts_alone_are_traced_after_the_eager_calls_and_pack_the_same():
    from kzoo.models import batching
    from kzoo.models.input_checks import to_tensors

    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), SEQUENCE_LENGTH)
    traces = batching._traced_call.experimental_get_tracing_count()
    texts, pairs = texts_of_every_length(9), (texts_of_every_length(9, 1), texts_of_every_length(9, 2))
    eager = [batching.packed(preprocessor, to_tensors(x))[0] for x in (texts, pairs)]
    for _ in range(preprocessor.eager_text_calls - 2):
        batching.packed(preprocessor, to_tensors(texts[:1]))
    assert batching._traced_call.experimental_get_tracing_count() == traces  # one-off calls never trace
    for rows in (9, 1, 4):  # one trace for texts, whatever the number of rows
        traced = batching.packed(preprocessor, to_tensors(texts[:rows]))[0]
        for key, value in traced.items():
            np.testing.assert_array_equal(value, eager[0][key][:rows])
    traced_pairs = batching.packed(preprocessor, to_tensors(pairs))[0]  # and one for pairs
    for key, value in traced_pairs.items():
        np.testing.assert_array_equal(value, eager[1][key])
    assert batching._traced_call.experimental_get_tracing_count() == traces + 2
