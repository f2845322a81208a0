"""Masked LM input masking (BERT sec. 3.1 "Task #1", A.1), vectorised over a
batch in TensorFlow so it runs inside `tf.data` for every Keras backend.

The selection rule is google-research/bert's: each sequence gets exactly
`min(max_predictions_per_seq, max(1, round(rate * n)))` predictions, with `n`
its number of maskable (non-special, non-padding) tokens, chosen uniformly
without replacement; Python's and TensorFlow's `round` both round half to even.
Of the chosen tokens, 80% become `[MASK]`, 10% a uniformly random
non-special token and 10% stay unchanged.

tensorflow-text's `RandomItemSelector` / `MaskValuesChooser` are not used:
they draw from TensorFlow's global random state (so a seeded `tf.data`
pipeline repeats the same masks every epoch, or is not reproducible at all),
select `ceil(rate * n)` tokens, and draw "random" tokens from the whole
vocabulary, special tokens included. Here every random draw is a stateless
op keyed by a per-batch seed, so a seeded pipeline is reproducible and still
draws new masks every epoch.
"""

import math

import tensorflow as tf

# google-research/bert's README and `create_pretraining_data.py` runs:
# max_predictions_per_seq 20 at sequence length 128 and 80 at 512 (about 15%).
MAX_PREDICTIONS_PER_SEQ = {128: 20, 512: 80}


def default_max_predictions(sequence_length):
    """google-research/bert's cap on masked-LM predictions per sequence (BERT
    sec. 3.1, A.2): 20 at length 128, 80 at 512, otherwise 15% of the length
    (halves rounded up).

    Args:
        sequence_length: int. The packed sequence length.

    Returns:
        An int, the `max_predictions_per_seq` of `mask_language_model`.

    Example:

    >>> default_max_predictions(128), default_max_predictions(512), default_max_predictions(64)
    (20, 80, 10)
    """
    if sequence_length in MAX_PREDICTIONS_PER_SEQ:
        return MAX_PREDICTIONS_PER_SEQ[sequence_length]
    return int(math.floor(0.15 * sequence_length + 0.5))


def _uniform(shape, seed, salt):
    return tf.random.stateless_uniform(shape, tf.random.experimental.stateless_fold_in(seed, salt))


def _selectable(token_ids, special_token_ids):
    special = tf.constant(sorted(special_token_ids), dtype=token_ids.dtype)
    return tf.reduce_all(token_ids[..., None] != special, axis=-1)


def _prediction_counts(selectable, rate, max_predictions_per_seq):
    n = tf.reduce_sum(tf.cast(selectable, tf.float32), axis=1)
    count = tf.maximum(1.0, tf.round(n * rate))
    count = tf.minimum(count, float(max_predictions_per_seq))
    return tf.cast(tf.where(n > 0, count, 0.0), tf.int32)  # (B,)


def _choose_tokens(selectable, counts, seed):
    """`counts` tokens per row, uniformly among the selectable ones: those
    with the row's `counts` highest random scores, found by a top-k for the
    largest count (no full sort). Returns `(chosen, positions)`: (B, L) bool
    and (B, k) their positions in increasing order, padded with L."""
    length = tf.shape(selectable)[1]
    scores = tf.where(selectable, _uniform(tf.shape(selectable), seed, 1), -1.0)
    top_scores, top_positions = tf.math.top_k(scores, k=tf.maximum(tf.reduce_max(counts), 1))
    taken = tf.range(tf.shape(top_positions)[1])[None, :] < counts[:, None]
    lowest_chosen = tf.reduce_min(tf.where(taken, top_scores, 2.0), axis=1)  # 2: none chosen
    chosen = selectable & (scores >= lowest_chosen[:, None])
    return chosen, tf.sort(tf.where(taken, top_positions, length), axis=1)


def _choose_whole_words(selectable, word_start, counts, seed):
    """(B, L) bool: whole words in random order while the running total of
    their tokens stays within `counts` (google-research/bert's whole word
    masking: all pieces of a word are masked together)."""
    length = tf.shape(selectable)[1]
    after_special = tf.pad(~selectable[:, :-1], [[0, 0], [1, 0]], constant_values=True)
    word_start = (word_start | after_special) & selectable  # a span never starts mid-word
    word = tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1  # word index of each token
    in_word = selectable & (word >= 0)
    word = tf.where(in_word, word, length)  # out-of-word tokens go to a spare slot
    word_length = tf.reduce_sum(tf.one_hot(word, length + 1, dtype=tf.int32), axis=1)[:, :-1]
    scores = tf.where(word_length > 0, _uniform(tf.shape(word_length), seed, 2), -1.0)
    order = tf.argsort(scores, axis=1, direction="DESCENDING")  # words in random order
    running = tf.cumsum(tf.gather(word_length, order, batch_dims=1), axis=1)
    chosen_in_order = (running <= counts[:, None]) & (tf.gather(scores, order, batch_dims=1) >= 0)
    chosen_word = tf.gather(chosen_in_order, tf.argsort(order, axis=1), batch_dims=1)
    chosen_word = tf.concat([chosen_word, tf.zeros_like(chosen_word[:, :1])], axis=1)
    return in_word & tf.gather(chosen_word, word, batch_dims=1)


def _chosen_positions(chosen):
    """(B, L): positions of the chosen tokens in increasing order, padded with L."""
    length = tf.shape(chosen)[1]
    return tf.sort(tf.where(chosen, tf.range(length)[None, :], length), axis=1)


def _prediction_slots(positions, length, max_predictions_per_seq):
    """The first `max_predictions_per_seq` of increasing `positions` (padded
    with `length`), padded with 0, and their weights."""
    positions = positions[:, :max_predictions_per_seq]
    padding = [[0, 0], [0, max_predictions_per_seq - tf.shape(positions)[1]]]
    positions = tf.pad(positions, padding, constant_values=length)
    weights = positions < length
    return tf.where(weights, positions, 0), tf.cast(weights, tf.float32)


def mask_language_model(
    token_ids,
    seed,
    *,
    mask_token_id,
    special_token_ids,
    random_token_ids,
    max_predictions_per_seq,
    masked_lm_rate=0.15,
    mask_token_rate=0.8,
    random_token_rate=0.1,
    word_start=None,
):
    """Masks a batch of packed sequences for the masked LM task (BERT sec. 3.1, A.1).

    Args:
        token_ids: int tensor of shape `(batch, sequence_length)`. The packed ids.
        seed: int tensor of shape `[2]`. A stateless random seed; the same
            seed gives the same masks.
        mask_token_id: int. The `[MASK]` id.
        special_token_ids: list of int. Ids never chosen (`[PAD]`, `[CLS]`,
            `[SEP]`, ...).
        random_token_ids: int tensor of shape `(n,)`. The ids that the random
            replacement draws from, uniformly (the vocabulary without special
            tokens).
        max_predictions_per_seq: int. The cap P on predictions per sequence
            (20 at length 128, 80 at 512 in google-research/bert: see
            `default_max_predictions`).
        masked_lm_rate: float. The fraction of maskable tokens chosen.
            Defaults to `0.15`.
        mask_token_rate: float. The fraction of chosen tokens replaced by
            `[MASK]`. Defaults to `0.8`.
        random_token_rate: float. The fraction replaced by a random token;
            the rest stay unchanged. Table 8 of the paper varies these two
            rates. Defaults to `0.1`.
        word_start: bool tensor of shape `(batch, sequence_length)`. True
            where a token starts a word (not a `##` piece): whole word
            masking. Defaults to `None`.

    Returns:
        A dict with `token_ids` (the masked inputs), `mask_positions` `(batch,
        P)` int32 (increasing, padded with 0), `mask_ids` `(batch, P)` (the
        original tokens, 0 in padding slots) and `mask_weights` `(batch, P)`
        float32 (1 for real predictions).

    Example:

    >>> import tensorflow as tf
    >>> ids = tf.constant([[2, 11, 12, 13, 14, 15, 16, 17, 18, 3, 0, 0]])
    >>> out = mask_language_model(ids, tf.constant([1, 2]), mask_token_id=4,
    ...     special_token_ids=[0, 1, 2, 3, 4], random_token_ids=tf.range(5, 20),
    ...     max_predictions_per_seq=3)
    >>> out["mask_weights"].numpy().tolist()  # round(0.15 * 8) = 1 prediction
    [[1.0, 0.0, 0.0]]
    >>> position = int(out["mask_positions"][0, 0])
    >>> 1 <= position <= 8, int(out["mask_ids"][0, 0]) == int(ids[0, position])
    (True, True)
    """
    token_ids = tf.convert_to_tensor(token_ids)
    seed = tf.cast(seed, tf.int64)
    selectable = _selectable(token_ids, special_token_ids)
    counts = _prediction_counts(selectable, masked_lm_rate, max_predictions_per_seq)
    if word_start is None:
        chosen, positions = _choose_tokens(selectable, counts, seed)
    else:
        chosen = _choose_whole_words(selectable, word_start, counts, seed)
        positions = _chosen_positions(chosen)
    positions, weights = _prediction_slots(positions, tf.shape(token_ids)[1], max_predictions_per_seq)

    # 80% [MASK], 10% random token, 10% unchanged: one draw per token.
    draw = _uniform(tf.shape(token_ids), seed, 3)
    random_ids = tf.gather(
        tf.cast(random_token_ids, token_ids.dtype),
        tf.random.stateless_uniform(
            tf.shape(token_ids),
            tf.random.experimental.stateless_fold_in(seed, 4),
            maxval=tf.size(random_token_ids, out_type=tf.int32),
            dtype=tf.int32,
        ),
    )
    replacement = tf.where(draw < mask_token_rate, tf.cast(mask_token_id, token_ids.dtype), token_ids)
    replacement = tf.where(
        (draw >= mask_token_rate) & (draw < mask_token_rate + random_token_rate), random_ids, replacement
    )
    masked = tf.where(chosen, replacement, token_ids)
    mask_ids = tf.gather(token_ids, positions, batch_dims=1)
    return {
        "token_ids": masked,
        "mask_positions": tf.cast(positions, tf.int32),
        "mask_ids": mask_ids * tf.cast(weights, mask_ids.dtype),
        "mask_weights": weights,
    }
