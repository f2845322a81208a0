"""The BERT pre-training input pipeline in one call (BERT sec. 3.1, A.1, A.2):
read → tokenize → pair (NSP) → pack → mask (MLM) → batch, as a `tf.data.Dataset`
that `kzoo.BertPretrainer.fit` consumes on any Keras backend."""

import numpy as np
import tensorflow as tf

from kzoo.data.documents import read_documents
from kzoo.data.masked_lm import default_max_predictions, mask_language_model
from kzoo.data.packing import pack_segments
from kzoo.data.sentence_pairs import TokenizedCorpus, sentence_pair_spans, tokenize_documents


def _vocabulary_roles(tokenizer):
    """(special ids never masked, ids random replacements draw from, `##` flags per id)."""
    vocabulary = tokenizer.get_vocabulary()
    special = {
        tokenizer.pad_token_id,
        tokenizer.unknown_token_id,
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        tokenizer.mask_token_id,
    }
    reserved = {i for i, t in enumerate(vocabulary) if t.startswith("[") and t.endswith("]")}
    random_ids = np.array(
        [i for i in range(len(vocabulary)) if i not in special | reserved], dtype=np.int32
    )
    if random_ids.size == 0:
        raise ValueError("The vocabulary has no ordinary tokens to draw random replacements from.")
    continuation = np.array([t.startswith(tokenizer.suffix_indicator) for t in vocabulary])
    return sorted(special), random_ids, continuation


def _check_rates(masked_lm_rate, mask_token_rate, random_token_rate, max_predictions_per_seq):
    if not 0 < masked_lm_rate <= 1:
        raise ValueError(f"masked_lm_rate must be in (0, 1]; got {masked_lm_rate} (the paper uses 0.15).")
    if mask_token_rate < 0 or random_token_rate < 0 or mask_token_rate + random_token_rate > 1:
        raise ValueError(
            f"mask_token_rate ({mask_token_rate}) and random_token_rate ({random_token_rate}) "
            "must be >= 0 and sum to at most 1 (the paper uses 0.8 and 0.1)."
        )
    if int(max_predictions_per_seq) < 1:
        raise ValueError(f"max_predictions_per_seq must be >= 1; got {max_predictions_per_seq}.")


def _gather_spans(token_ids, spans):
    """The `[start, end)` spans `(examples, 2)` of `token_ids` as a ragged
    int32 `(examples, None)` tensor, in one vectorised gather.

    >>> import numpy as np
    >>> _gather_spans(np.arange(10, 20), np.array([[1, 3], [5, 5], [7, 10]])).to_list()
    [[11, 12], [], [17, 18, 19]]
    """
    lengths = spans[:, 1] - spans[:, 0]
    row_starts = np.cumsum(lengths) - lengths
    positions = np.arange(lengths.sum()) + np.repeat(spans[:, 0] - row_starts, lengths)
    return tf.RaggedTensor.from_row_lengths(np.asarray(token_ids, np.int32)[positions], lengths)


def _packed_examples(corpus, pairs, tokenizer, sequence_length, next_sentence_prediction):
    """Every example (`PairSpans` into `corpus`) packed as `[CLS] A [SEP] B
    [SEP]` (`[CLS] A [SEP]` without NSP), in one call over the whole corpus
    (BERT sec. 3, Figure 2): a dict of `(examples, sequence_length)` int32
    `token_ids`, `segment_ids`, `padding_mask`, and `(examples,)`
    `next_sentence_label`."""
    segments = [_gather_spans(corpus.token_ids, pairs.segment_a)]
    if next_sentence_prediction:
        segments.append(_gather_spans(corpus.token_ids, pairs.segment_b))
    examples = pack_segments(segments, tokenizer, sequence_length)
    examples["next_sentence_label"] = tf.constant(pairs.next_sentence_label)
    return examples


def pretraining_dataset(
    documents,
    tokenizer,
    sequence_length=128,
    max_predictions_per_seq=None,
    batch_size=32,
    seed=None,
    *,
    next_sentence_prediction=True,
    masked_lm_rate=0.15,
    mask_token_rate=0.8,
    random_token_rate=0.1,
    whole_word_masking=False,
    short_sequence_probability=0.1,
    dupe_factor=1,
    shuffle=True,
    drop_remainder=False,
    progress=True,
):
    """BERT pre-training examples as a batched `tf.data.Dataset` (BERT sec. 3.1, A.1, A.2).

    Reads and tokenizes the corpus, builds next sentence prediction pairs
    (see `kzoo.data.sentence_pairs`), packs them all at once as `[CLS] A
    [SEP] B [SEP]` (in memory: 12 bytes per position), and masks each batch
    of shuffled examples for the masked LM inside `tf.data` (see
    `kzoo.data.mask_language_model`). Masking is dynamic: every pass over the
    dataset (every epoch of `fit`) draws new masks; pairs are drawn once per
    call (`dupe_factor` passes over the corpus). With a `seed`, two calls give
    identical datasets, epoch by epoch.

    Args:
        documents: list, str, `tf.data.Dataset` or `kzoo.data.TokenizedCorpus`. A
            corpus: a list of documents (each a list of sentences), text file
            paths / glob patterns in the google-research format, a
            `tf.data.Dataset` of documents (see `kzoo.data.read_documents`),
            or a `TokenizedCorpus` already tokenized with `tokenizer`.
        tokenizer: `kzoo.BertTokenizer`. The WordPiece tokenizer.
        sequence_length: int. The packed length, special tokens included
            (128, then 512). Defaults to `128`.
        max_predictions_per_seq: int or None. The cap P on masked tokens per
            sequence. Defaults to `None`: 20 at 128, 80 at 512 (see
            `default_max_predictions`).
        batch_size: int. Examples per batch. Defaults to `32`.
        seed: int or None. A seed for reproducible pairs, order and masks.
            Defaults to `None`: fresh ones.
        next_sentence_prediction: bool. False for MLM-only single segments
            ("No NSP"). Defaults to `True`.
        masked_lm_rate: float. The fraction of tokens chosen for prediction.
            Defaults to `0.15`.
        mask_token_rate: float. The fraction of chosen tokens replaced by
            `[MASK]` (Table 8 ablates it). Defaults to `0.8`.
        random_token_rate: float. The fraction of chosen tokens replaced by a
            random token (Table 8 ablates it). Defaults to `0.1`.
        whole_word_masking: bool. Whether to mask all WordPiece pieces of a
            word together. Defaults to `False`.
        short_sequence_probability: float. The chance of a shorter target
            length. Defaults to `0.1`.
        dupe_factor: int. Passes over the corpus when drawing pairs. Defaults to `1`.
        shuffle: bool. Whether to shuffle the examples every epoch. Defaults to `True`.
        drop_remainder: bool. Whether to drop a last, smaller batch. Defaults to `False`.
        progress: bool. Whether to show tqdm bars for tokenization and
            pairing. Defaults to `True`.

    Returns:
        A `tf.data.Dataset` of `(features, labels)`: features `token_ids`,
        `segment_ids`, `padding_mask` `(batch, sequence_length)` int32 and
        `mask_positions` `(batch, P)` int32; labels `mask_ids` `(batch, P)`
        int32, `mask_weights` `(batch, P)` float32 and, with NSP,
        `next_sentence_label` `(batch,)` int32 (0 = IsNext, 1 = NotNext, as
        google-research/bert and Hugging Face). `tf.data` autotuning is off
        (one masking call per core; `with_options` can turn it back on).

    Example:

    >>> from kzoo import BertTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefgh")
    >>> tokenizer = BertTokenizer(vocab)
    >>> documents = [["a b c d", "e f g h", "a c e g"], ["b d f h", "h g f e"]]
    >>> dataset = pretraining_dataset(documents, tokenizer, sequence_length=16,
    ...     max_predictions_per_seq=4, batch_size=2, seed=0, progress=False)
    >>> features, labels = next(iter(dataset))
    >>> sorted(features), sorted(labels)
    (['mask_positions', 'padding_mask', 'segment_ids', 'token_ids'], ['mask_ids', 'mask_weights', ...
    >>> tuple(features["token_ids"].shape), tuple(labels["mask_ids"].shape)
    ((2, 16), (2, 4))
    """
    if max_predictions_per_seq is None:
        max_predictions_per_seq = default_max_predictions(sequence_length)
    _check_rates(masked_lm_rate, mask_token_rate, random_token_rate, max_predictions_per_seq)
    _vocabulary_roles(tokenizer)  # a vocabulary without ordinary tokens is refused before any work
    if isinstance(documents, TokenizedCorpus):
        corpus = documents
    else:
        corpus = tokenize_documents(read_documents(documents), tokenizer, progress=progress)
    pairs = sentence_pair_spans(
        corpus,
        sequence_length,
        next_sentence_prediction=next_sentence_prediction,
        short_sequence_probability=short_sequence_probability,
        dupe_factor=dupe_factor,
        seed=seed,
        progress=progress,
    )
    examples = _packed_examples(corpus, pairs, tokenizer, sequence_length, next_sentence_prediction)
    indices = tf.data.Dataset.range(len(pairs.next_sentence_label))
    if shuffle:
        indices = indices.shuffle(len(pairs.next_sentence_label), seed=seed, reshuffle_each_iteration=True)
    indices = indices.batch(batch_size, drop_remainder=drop_remainder)
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    return masked_batches(
        examples,
        indices,
        seeds,
        tokenizer,
        next_sentence_prediction=next_sentence_prediction,
        max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_rate=masked_lm_rate,
        mask_token_rate=mask_token_rate,
        random_token_rate=random_token_rate,
        whole_word_masking=whole_word_masking,
    )


def masked_batches(
    examples,
    indices,
    seeds,
    tokenizer,
    *,
    next_sentence_prediction,
    max_predictions_per_seq,
    masked_lm_rate,
    mask_token_rate,
    random_token_rate,
    whole_word_masking,
):
    """The masking stage of `pretraining_dataset` (BERT sec. 3.1, A.1): for
    each batch of row `indices` (a dataset of int vectors), the rows of the
    packed `examples` masked with the matching stateless seed of `seeds` (a
    dataset of int `[2]` vectors), as `(features, labels)`. The other
    arguments are `pretraining_dataset`'s."""
    special_ids, random_ids, continuation = _vocabulary_roles(tokenizer)
    continuation = tf.constant(continuation)
    random_ids = tf.constant(random_ids)

    # Plain TensorFlow ops without Python control flow on tensors: autograph's
    # source conversion would only cost time.
    @tf.autograph.experimental.do_not_convert
    def mask_batch(batch_indices, mask_seed):
        features = {name: tf.gather(values, batch_indices) for name, values in examples.items()}
        next_sentence_label = features.pop("next_sentence_label")
        word_start = ~tf.gather(continuation, features["token_ids"]) if whole_word_masking else None
        masked = mask_language_model(
            features["token_ids"],
            mask_seed,
            mask_token_id=tokenizer.mask_token_id,
            special_token_ids=special_ids,
            random_token_ids=random_ids,
            max_predictions_per_seq=max_predictions_per_seq,
            masked_lm_rate=masked_lm_rate,
            mask_token_rate=mask_token_rate,
            random_token_rate=random_token_rate,
            word_start=word_start,
        )
        features["token_ids"] = masked["token_ids"]
        features["mask_positions"] = masked["mask_positions"]
        labels = {"mask_ids": masked["mask_ids"], "mask_weights": masked["mask_weights"]}
        if next_sentence_prediction:
            labels["next_sentence_label"] = next_sentence_label
        return features, labels

    dataset = tf.data.Dataset.zip((indices, seeds)).map(
        mask_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(_fixed_parallelism())


def _fixed_parallelism():
    """`tf.data` options without autotuning: `AUTOTUNE` stands for one call
    per core and a default prefetch buffer. The autotuner's own work and
    ramp-up cost more than the masking they would tune."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return options
