"""The pre-training pipeline (BERT sec. 3.1, A.1, A.2): masking statistics over
> 100,000 tokens, packing, reproducibility, dynamic masks, TFRecords."""

import os

import numpy as np
import pytest
import tensorflow as tf

from kzoo import BertTokenizer
from kzoo.data import (
    mask_language_model,
    pack_segments,
    pretraining_dataset,
    read_pretraining_tfrecords,
    sentence_pairs,
    tokenize_documents,
    write_pretraining_tfrecords,
)
from tests.data.pretraining_corpus import (
    SPECIAL_IDS,
    assert_masking_statistics,
    SPECIAL_TOKENS,
    VOCABULARY,
    collect,
    make_documents,
    maskable,
    original_ids,
)

pytestmark = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)

SEQUENCE_LENGTH = 128
MAX_PREDICTIONS = 20
PAD, UNK, CLS, SEP, MASK = (VOCABULARY.index(t) for t in SPECIAL_TOKENS)


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCABULARY)


@pytest.fixture(scope="module")
def corpus(tokenizer):
    return tokenize_documents(make_documents(800), tokenizer, progress=False)


def test_tokenize_documents_in_parallel_batches_keeps_the_corpus_order(corpus, tokenizer):
    """Batches tokenized on several threads come back in corpus order: 800
    documents in batches of 97 sentences give the corpus of one batch, and
    every sentence's ids are the tokenizer's."""
    documents = make_documents(800)
    small_batches = tokenize_documents(documents, tokenizer, batch_size=97, progress=False)
    for name in ("token_ids", "sentence_splits", "document_splits"):
        np.testing.assert_array_equal(getattr(small_batches, name), getattr(corpus, name))
    sentences = [s for d in documents for s in d]
    assert len(sentences) > 20 * 97  # many batches
    splits = corpus.sentence_splits
    for index in (0, 1000, len(splits) - 2):
        expected = tokenizer.tokenize(tf.constant([sentences[index]])).flat_values.numpy()
        np.testing.assert_array_equal(corpus.token_ids[splits[index] : splits[index + 1]], expected)


@pytest.fixture(scope="module")
def one_pass(corpus, tokenizer):
    dataset = pretraining_dataset(
        corpus, tokenizer, SEQUENCE_LENGTH, MAX_PREDICTIONS, batch_size=64, seed=5, progress=False
    )
    return collect(dataset)


def batch_by_batch(corpus, tokenizer, seed, sequence_length=64, max_predictions=10, **options):
    """The pipeline composed from its documented parts, one batch at a time:
    `sentence_pairs`, a seeded shuffle of the pairs, `pack_segments` and
    `mask_language_model` on each batch with the pipeline's per-batch seeds."""
    nsp, whole_words = options.get("next_sentence_prediction", True), options.get("whole_word_masking", False)
    pairs = sentence_pairs(corpus, sequence_length, next_sentence_prediction=nsp, seed=seed, progress=False)
    ragged = lambda spans: tf.RaggedTensor.from_row_lengths(  # noqa: E731
        np.concatenate(spans).astype(np.int32), [len(s) for s in spans]
    )
    examples = tf.data.Dataset.from_tensor_slices((ragged(pairs.segment_a), ragged(pairs.segment_b)))
    examples = tf.data.Dataset.zip((examples, tf.data.Dataset.from_tensor_slices(pairs.next_sentence_label)))
    examples = examples.shuffle(len(pairs.next_sentence_label), seed=seed).batch(32)
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    continuation = np.array([t.startswith("##") for t in VOCABULARY])
    random_ids = [i for i in range(len(VOCABULARY)) if i not in SPECIAL_IDS]
    batches = []
    for ((a, b), label), mask_seed in zip(examples, seeds):
        features = pack_segments([a, b] if nsp else [a], tokenizer, sequence_length)
        masked = mask_language_model(
            features["token_ids"], mask_seed, mask_token_id=MASK, special_token_ids=SPECIAL_IDS[:5],
            random_token_ids=random_ids, max_predictions_per_seq=max_predictions,
            word_start=~continuation[features["token_ids"].numpy()] if whole_words else None,
        )
        features.update(token_ids=masked["token_ids"], mask_positions=masked["mask_positions"])
        labels = {"mask_ids": masked["mask_ids"], "mask_weights": masked["mask_weights"]}
        labels.update({"next_sentence_label": label} if nsp else {})
        batches.append({name: value.numpy() for name, value in {**features, **labels}.items()})
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


@pytest.mark.parametrize(
    "options", [{}, {"whole_word_masking": True}, {"next_sentence_prediction": False}]
)
def test_whole_corpus_packing_equals_packing_each_batch(tokenizer, options):
    """Packed once for the whole corpus, then gathered and masked per batch:
    the same batches, values and dtypes as packing and masking each batch of
    shuffled pairs (fixed seed)."""
    corpus = tokenize_documents(make_documents(150), tokenizer, progress=False)
    expected = batch_by_batch(corpus, tokenizer, seed=9, **options)
    dataset = pretraining_dataset(corpus, tokenizer, 64, 10, batch_size=32, seed=9, progress=False, **options)
    actual = collect(dataset)
    assert sorted(actual) == sorted(expected)
    for name in expected:
        assert actual[name].dtype == expected[name].dtype, name
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_token_choice_is_the_highest_random_scores(tokenizer):
    """The top-k choice picks exactly the tokens that ranking every score of
    the row (a full argsort, google-research/bert's shuffled candidates) picks."""
    rng = np.random.default_rng(1)
    ids = rng.integers(7, len(VOCABULARY), size=(64, 128))
    ids[np.arange(128) >= rng.integers(2, 129, size=64)[:, None]] = PAD
    ids[:, 0] = CLS
    seed = tf.constant([5, 6], tf.int64)
    out = mask_language_model(
        tf.constant(ids, tf.int32), seed, mask_token_id=MASK, special_token_ids=SPECIAL_IDS,
        random_token_ids=tf.range(7, len(VOCABULARY)), max_predictions_per_seq=MAX_PREDICTIONS,
    )
    selectable = ~np.isin(ids, SPECIAL_IDS)
    scores = tf.random.stateless_uniform(ids.shape, tf.random.experimental.stateless_fold_in(seed, 1)).numpy()
    rank = np.argsort(np.argsort(-np.where(selectable, scores, -1.0), axis=1, kind="stable"), axis=1)
    counts = np.minimum(MAX_PREDICTIONS, np.maximum(1, np.round(0.15 * selectable.sum(axis=1))))
    counts[selectable.sum(axis=1) == 0] = 0
    chosen = selectable & (rank < counts[:, None])
    for row in range(64):
        expected = np.flatnonzero(chosen[row])
        weights = out["mask_weights"].numpy()[row]
        np.testing.assert_array_equal(out["mask_positions"].numpy()[row][weights == 1], expected)
        assert weights.sum() == len(expected) == counts[row]


def test_masking_statistics_over_100k_tokens(one_pass):
    assert_masking_statistics(one_pass, MAX_PREDICTIONS)


def test_special_tokens_and_padding_are_never_chosen(one_pass):
    weights = one_pass["mask_weights"]
    rows, slots = np.nonzero(weights)
    positions = one_pass["mask_positions"][rows, slots]
    assert not np.isin(one_pass["mask_ids"][rows, slots], SPECIAL_IDS).any()
    assert (one_pass["padding_mask"][rows, positions] == 1).all()
    assert (positions > 0).all()  # never [CLS]
    # Random replacements are ordinary tokens: [MASK] is the only special id introduced.
    after = one_pass["token_ids"][rows, positions]
    assert not np.isin(after[after != MASK], SPECIAL_IDS).any()
    # Unchosen tokens are untouched: the inputs equal the originals off the chosen positions.
    untouched = one_pass["token_ids"].copy()
    untouched[rows, positions] = original_ids(one_pass)[rows, positions]
    np.testing.assert_array_equal(untouched, original_ids(one_pass))


def test_prediction_slots_are_sorted_unique_and_padded(one_pass):
    weights = one_pass["mask_weights"]
    assert weights.shape[1] == MAX_PREDICTIONS
    assert (weights.sum(axis=1) <= MAX_PREDICTIONS).all()
    for positions, w, ids in zip(one_pass["mask_positions"], weights, one_pass["mask_ids"]):
        real = positions[w == 1]
        assert np.all(np.diff(real) > 0)
        assert (positions[w == 0] == 0).all() and (ids[w == 0] == 0).all()
        assert (np.diff(w) <= 0).all()  # real slots first


def test_packing_layout_and_lengths(one_pass):
    ids, segments, padding = original_ids(one_pass), one_pass["segment_ids"], one_pass["padding_mask"]
    assert ids.shape[1] == SEQUENCE_LENGTH
    assert (ids[:, 0] == CLS).all()
    assert ((ids == SEP).sum(axis=1) == 2).all()
    lengths = padding.sum(axis=1)
    assert (ids[np.arange(len(ids)), lengths - 1] == SEP).all()
    assert (ids[padding == 0] == PAD).all() and (segments[padding == 0] == 0).all()
    # Segment B (ids 1) runs from after the first [SEP] to the last, both spans non-empty.
    first_sep = np.argmax(ids == SEP, axis=1)
    assert (first_sep >= 2).all() and (lengths - first_sep >= 3).all()
    expected_segments = (np.arange(SEQUENCE_LENGTH) > first_sep[:, None]) & (padding == 1)
    np.testing.assert_array_equal(segments, expected_segments.astype(np.int32))


def test_next_sentence_labels_are_balanced(one_pass):
    labels = one_pass["next_sentence_label"]
    assert abs(np.mean(labels == 0) - 0.5) <= 0.02
    assert set(np.unique(labels)) == {0, 1}


def test_seeded_pipeline_is_reproducible_and_masks_change_every_epoch(corpus, tokenizer):
    def make(seed):
        return pretraining_dataset(corpus, tokenizer, 64, 10, batch_size=32, seed=seed, progress=False)

    dataset = make(1)
    epoch_one, epoch_two = collect(dataset), collect(dataset)
    again = collect(make(1))
    for name in epoch_one:
        np.testing.assert_array_equal(epoch_one[name], again[name])
    # Same examples (reshuffled), new masks: compare the unmasked sequences as sets.
    key = lambda batch: sorted(map(bytes, original_ids(batch)))  # noqa: E731
    assert key(epoch_one) == key(epoch_two)
    assert not np.array_equal(epoch_one["mask_positions"], epoch_two["mask_positions"])
    assert not np.array_equal(collect(make(2))["mask_positions"], epoch_one["mask_positions"])


def test_autotuning_is_off_and_the_batches_do_not_depend_on_it(corpus, tokenizer):
    def make():
        return pretraining_dataset(corpus, tokenizer, 64, 10, batch_size=32, seed=3, progress=False)

    assert make().options().autotune.enabled is False
    options = tf.data.Options()
    options.autotune.enabled = True
    tuned = make().with_options(options)
    assert tuned.options().autotune.enabled is True
    fixed, autotuned = collect(make()), collect(tuned)  # each the first pass of its dataset
    for name in fixed:
        np.testing.assert_array_equal(fixed[name], autotuned[name], err_msg=name)


def test_whole_word_masking_masks_every_piece_of_a_word(corpus, tokenizer):
    batch = collect(
        pretraining_dataset(
            corpus, tokenizer, SEQUENCE_LENGTH, MAX_PREDICTIONS, batch_size=64, seed=0,
            whole_word_masking=True, progress=False,
        )
    )
    ids = original_ids(batch)
    continuation = np.array([t.startswith("##") for t in VOCABULARY])[ids]
    chosen = np.zeros_like(ids, bool)
    rows, slots = np.nonzero(batch["mask_weights"])
    chosen[rows, batch["mask_positions"][rows, slots]] = True
    # A chosen word piece's neighbours inside the same word are chosen too.
    same_word_as_previous = continuation[:, 1:] & ~np.isin(ids[:, :-1], SPECIAL_IDS)
    assert (chosen[:, 1:][same_word_as_previous] == chosen[:, :-1][same_word_as_previous]).all()
    assert continuation[chosen].any()  # multi-piece words were masked
    n = maskable(ids, batch["padding_mask"]).sum()
    assert 0.13 <= chosen.sum() / n <= 0.15, chosen.sum() / n


def test_mlm_only_has_one_segment_and_no_nsp_label(corpus, tokenizer):
    batch = collect(
        pretraining_dataset(
            corpus, tokenizer, 64, 10, batch_size=32, seed=0, next_sentence_prediction=False, progress=False
        )
    )
    assert "next_sentence_label" not in batch
    assert (batch["segment_ids"] == 0).all()
    ids = original_ids(batch)
    assert ((ids == SEP).sum(axis=1) == 1).all()
    assert (batch["padding_mask"].sum(axis=1) <= 64).all()


@pytest.mark.parametrize("mask_rate,random_rate", [(1.0, 0.0), (0.0, 1.0), (0.0, 0.0)])
def test_table_8_rates_are_configurable(mask_rate, random_rate):
    ids = tf.constant(np.random.default_rng(0).integers(10, 400, size=(64, 100)), tf.int32)
    out = mask_language_model(
        ids, tf.constant([3, 4]), mask_token_id=MASK, special_token_ids=SPECIAL_IDS,
        random_token_ids=tf.range(10, 400), max_predictions_per_seq=15,
        mask_token_rate=mask_rate, random_token_rate=random_rate,
    )
    rows = np.repeat(np.arange(64), 15)
    after = out["token_ids"].numpy()[rows, out["mask_positions"].numpy().reshape(-1)]
    before = out["mask_ids"].numpy().reshape(-1)
    assert np.mean(after == MASK) == mask_rate
    assert abs(np.mean(after != before) - max(mask_rate, random_rate)) < 0.01


def test_tfrecords_round_trip(tmp_path, corpus, tokenizer):
    dataset = pretraining_dataset(corpus, tokenizer, 64, 10, batch_size=16, seed=0, progress=False)
    dataset = dataset.take(5).cache()  # masks are drawn anew each pass: fix one pass
    written = collect(dataset)
    files = write_pretraining_tfrecords(dataset, tmp_path / "shards" / "train", num_shards=3, progress=False)
    assert [os.path.basename(f) for f in files] == [f"train-0000{i}-of-00003.tfrecord" for i in range(3)]
    read = collect(read_pretraining_tfrecords(str(tmp_path / "shards" / "train-*"), batch_size=8, shuffle=False))
    # Shards are dealt round-robin and read interleaved: compare as sorted rows.
    assert set(read) == set(written)
    for name in written:
        assert read[name].dtype == written[name].dtype, name
        order_w = np.lexsort(written["token_ids"].T[::-1])
        order_r = np.lexsort(read["token_ids"].T[::-1])
        np.testing.assert_array_equal(read[name][order_r], written[name][order_w], err_msg=name)
    # Reading is seeded and shuffles.
    first = collect(read_pretraining_tfrecords(files, batch_size=8, seed=3))
    second = collect(read_pretraining_tfrecords(files, batch_size=8, seed=3))
    np.testing.assert_array_equal(first["token_ids"], second["token_ids"])


def test_tfrecord_errors(tmp_path):
    with pytest.raises(ValueError, match="No TFRecord file matches"):
        read_pretraining_tfrecords(str(tmp_path / "missing-*"))
    path = str(tmp_path / "other.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        example = tf.train.Example(features=tf.train.Features(feature={
            "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"hi"]))}))
        writer.write(example.SerializeToString())
    with pytest.raises(ValueError, match="not a BERT pre-training TFRecord: feature 'input_ids' is missing"):
        read_pretraining_tfrecords(path)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"masked_lm_rate": 0.0}, "masked_lm_rate must be in"),
        ({"mask_token_rate": 0.8, "random_token_rate": 0.3}, "sum to at most 1"),
        ({"max_predictions_per_seq": 0}, "max_predictions_per_seq must be >= 1"),
    ],
)
def test_bad_options_are_refused_before_any_work(tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        pretraining_dataset("/no/such/file-*", tokenizer, progress=False, **kwargs)


def test_default_prediction_cap_follows_google_research(tokenizer):
    documents = make_documents(20)
    for length, cap in [(128, 20), (512, 80)]:
        features, labels = next(iter(pretraining_dataset(documents, tokenizer, length, batch_size=4, progress=False)))
        assert features["mask_positions"].shape == (4, cap)
