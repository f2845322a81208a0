"""The BERT pre-training input pipeline in one call (BERT sec. 3.1, A.1, A.2):
read → tokenize → pair (NSP) → pack → mask (MLM) → batch, as a `tf.data.Dataset`
that `kzoo.BertPretrainer.fit` consumes on any Keras backend."""

import numpy as np
import tensorflow as tf

from kzoo.data.documents import read_documents
from kzoo.data.masked_lm import mask_language_model
from kzoo.data.sentence_pairs import TokenizedCorpus, sentence_pairs, tokenize_documents
from kzoo.models.bert.bert_optimizer import default_max_predictions
from kzoo.models.bert.bert_preprocessor import pack_segments

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


def _ragged(spans):
    lengths = np.array([len(s) for s in spans], dtype=np.int64)
    values = np.concatenate(spans) if spans else np.zeros([0], np.int32)
    return tf.RaggedTensor.from_row_lengths(values.astype(np.int32), lengths)


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
    (see `kzoo.data.sentence_pairs`), packs them as `[CLS] A [SEP] B [SEP]`,
    and masks each batch for the masked LM inside `tf.data` (see
    `kzoo.data.mask_language_model`). Masking is dynamic: every pass over the
    dataset (every epoch of `fit`) draws new masks; pairs are drawn once per
    call (`dupe_factor` passes over the corpus). With a `seed`, two calls give
    identical datasets, epoch by epoch.

    Args:
        documents: a corpus: a list of documents (each a list of sentences),
            text file paths / glob patterns in the google-research format, a
            `tf.data.Dataset` of documents (see `kzoo.data.read_documents`),
            or a `TokenizedCorpus` already tokenized with `tokenizer`.
        tokenizer: a `kzoo.BertTokenizer`.
        sequence_length: packed length, special tokens included (128, then 512).
        max_predictions_per_seq: cap P on masked tokens per sequence; None
            gives 20 at 128, 80 at 512 (see `default_max_predictions`).
        batch_size: examples per batch.
        seed: an int for reproducible pairs, order and masks; None draws fresh ones.
        next_sentence_prediction: False for MLM-only single segments ("No NSP").
        masked_lm_rate, mask_token_rate, random_token_rate: 15% / 80% / 10%
            (Table 8 ablates the last two).
        whole_word_masking: mask all WordPiece pieces of a word together.
        short_sequence_probability: chance of a shorter target length (0.1).
        dupe_factor: passes over the corpus when drawing pairs.
        shuffle: shuffle the examples every epoch.
        drop_remainder: drop a last, smaller batch.
        progress: tqdm bars for tokenization and pairing.

    Returns:
        A `tf.data.Dataset` of `(features, labels)`: features `token_ids`,
        `segment_ids`, `padding_mask` `(batch, sequence_length)` int32 and
        `mask_positions` `(batch, P)` int32; labels `mask_ids` `(batch, P)`
        int32, `mask_weights` `(batch, P)` float32 and, with NSP,
        `next_sentence_label` `(batch,)` int32 (0 = IsNext, 1 = NotNext, as
        google-research/bert and Hugging Face).

    Example:

    >>> from kzoo import BertTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefgh")
    >>> tokenizer = BertTokenizer(vocab)
    >>> documents = [["a b c d", "e f g h", "a c e g"], ["b d f h", "h g f e"]]
    >>> dataset = pretraining_dataset(documents, tokenizer, sequence_length=16,
    ...     max_predictions_per_seq=4, batch_size=2, seed=0, progress=False)
    >>> features, labels = next(iter(dataset))
    >>> sorted(features), sorted(labels)
    (['mask_positions', 'padding_mask', 'segment_ids', 'token_ids'], ['mask_ids', 'mask_weights', 'next_sentence_label'])
    >>> tuple(features["token_ids"].shape), tuple(labels["mask_ids"].shape)
    ((2, 16), (2, 4))
    """
    if max_predictions_per_seq is None:
        max_predictions_per_seq = default_max_predictions(sequence_length)
    _check_rates(masked_lm_rate, mask_token_rate, random_token_rate, max_predictions_per_seq)
    special_ids, random_ids, continuation = _vocabulary_roles(tokenizer)
    if isinstance(documents, TokenizedCorpus):
        corpus = documents
    else:
        corpus = tokenize_documents(read_documents(documents), tokenizer, progress=progress)
    pairs = sentence_pairs(
        corpus,
        sequence_length,
        next_sentence_prediction=next_sentence_prediction,
        short_sequence_probability=short_sequence_probability,
        dupe_factor=dupe_factor,
        seed=seed,
        progress=progress,
    )
    dataset = tf.data.Dataset.from_tensor_slices(
        (_ragged(pairs.segment_a), _ragged(pairs.segment_b), pairs.next_sentence_label)
    )
    if shuffle:
        dataset = dataset.shuffle(len(pairs.next_sentence_label), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    continuation = tf.constant(continuation)
    random_ids = tf.constant(random_ids)

    # Plain TensorFlow ops without Python control flow on tensors: autograph's
    # source conversion would only cost time (1.2 s of a 2.4 s run over 4,077 examples).
    @tf.autograph.experimental.do_not_convert
    def pack_and_mask(batch, mask_seed):
        segment_a, segment_b, next_sentence_label = batch
        segments = [segment_a, segment_b] if next_sentence_prediction else [segment_a]
        features = pack_segments(segments, tokenizer, sequence_length)
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

    dataset = tf.data.Dataset.zip((dataset, seeds)).map(
        pack_and_mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    return dataset.prefetch(tf.data.AUTOTUNE)
