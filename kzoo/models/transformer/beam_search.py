"""Greedy and beam search, "Attention Is All You Need" sec. 6.1.

The paper decodes with "beam search with a beam size of 4 and length penalty
α = 0.6 ... We set the maximum output length during inference to input length
+ 50, but terminate early when possible" (sec. 6.1). The length penalty is
GNMT's (Wu et al. 2016, "Google's Neural Machine Translation System", sec. 7):
a hypothesis Y is ranked by `log P(Y|X) / lp(Y)` with
`lp(Y) = ((5 + |Y|) / 6)^α`, |Y| counting the end token, as in tensor2tensor.

Both searches drive a step function with the signature of
`Transformer.next_token_logits`:

    next_logits(token_ids, cache, index) -> (logits, new_cache)

`token_ids` `(rows,)` int32 are the tokens at position `index` (a scalar int
tensor, the loop counter), `logits` `(rows, vocab)` score position `index + 1`,
and `cache` is a nested dict of tensors whose leading dimension is `rows`.
The loops are `keras.ops.while_loop`s over static shapes, so a whole search
compiles (`jax.jit`, `tf.function(jit_compile=True)`) and runs eagerly on torch.
"""

import keras
from keras import ops

from kzoo.backend import take_rows

NEG_INF = float("-inf")


def gnmt_length_penalty(length, alpha):
    """GNMT's length penalty `lp(Y) = ((5 + |Y|) / 6)^α` (Wu et al. 2016, sec. 7).

    The Transformer's beam search divides a hypothesis' summed log-probability
    by it, with α = 0.6 ("Attention Is All You Need" sec. 6.1). `lp(1) = 1`;
    α = 0 disables the penalty.

    Args:
        length: |Y|, the number of output tokens including the end token
            (a number or a tensor).
        alpha: α >= 0.

    Returns:
        A float32 tensor shaped like `length`.

    Example:

    >>> round(float(gnmt_length_penalty(1, 0.6)), 4)
    1.0
    >>> round(float(gnmt_length_penalty(7, 0.6)), 4)
    1.5157
    """
    length = ops.cast(length, "float32")
    return ops.power((5.0 + length) / 6.0, alpha)


def greedy_search(
    next_logits, cache, start_ids, *, end_id, padding_id=0, max_length, length_limits=None, grow_cache=None
):
    """Greedy decoding: the arg-max token at every step (sec. 6.1 without the beam).

    Each row stops at its first `end_id`, or after `length_limits[row]` tokens
    (the paper's maximum output length, "input length + 50"); the loop ends as
    soon as every row has stopped ("terminate early when possible").

    Args:
        next_logits: `(token_ids, cache, index) -> (logits, new_cache)`, see
            the module docstring (`Transformer.next_token_logits`).
        cache: nested dict of tensors with leading dimension `batch` (may be `{}`).
        start_ids: `(batch,)` int, the first decoder input of each row.
        end_id: the end-of-sequence token id.
        padding_id: written after a row's end token.
        max_length: the number of output positions (a Python int).
        length_limits: optional `(batch,)` int, each row's maximum number of
            output tokens; values are clipped to `[1, max_length]`.
        grow_cache: optional `((cache, length) -> cache, lengths)`: the search
            runs while the cache holds `lengths[0]` positions, then grows it to
            each next length (ascending, the last `max_length`) when a step
            needs more (`Transformer`: a step's work and a beam's cache moves
            scale with the positions held). Defaults to `None`: one loop.

    Returns:
        int32 `(batch, max_length)`: the tokens after the start token, the end
        token included, then `padding_id`.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> # A bigram "model": the next token's log-probabilities given the previous one.
    >>> table = ops.convert_to_tensor(np.log([
    ...     [0.1, 0.1, 0.5, 0.3],   # after 0: mostly 2
    ...     [0.25, 0.25, 0.25, 0.25],
    ...     [0.1, 0.1, 0.2, 0.6],   # after 2: mostly 3
    ...     [0.1, 0.7, 0.1, 0.1],   # after 3: mostly the end token 1
    ... ]).astype("float32"))
    >>> def next_logits(token_ids, cache, index):
    ...     return ops.take(table, token_ids, axis=0), cache
    >>> out = greedy_search(next_logits, {}, np.array([0, 3]), end_id=1, max_length=5)
    >>> ops.convert_to_numpy(out).tolist()
    [[2, 3, 1, 0, 0], [1, 0, 0, 0, 0]]
    """
    start_ids, limits = _check_arguments(cache, start_ids, end_id, max_length, 1, 0.0, length_limits)
    positions = ops.arange(max_length, dtype="int32")

    def cond(limit):
        return lambda index, tokens, sequences, cache, done: ops.logical_and(
            index < limit, ops.logical_not(ops.all(done))
        )

    def body(index, tokens, sequences, cache, done):
        logits, cache = next_logits(tokens, cache, index)
        tokens = ops.cast(ops.argmax(logits, axis=-1), "int32")
        tokens = ops.where(done, padding_id, tokens)
        sequences = ops.where(positions == index, tokens[:, None], sequences)
        done = done | (tokens == end_id) | (index + 1 >= limits)
        return index + 1, tokens, sequences, cache, done

    state = (
        ops.convert_to_tensor(0, "int32"),
        start_ids,
        ops.full((ops.shape(start_ids)[0], max_length), padding_id, "int32"),
        cache,
        ops.zeros_like(start_ids, "bool"),
    )

    def grown(state, length):
        return (*state[:3], grow_cache[0](state[3], length), state[4])

    return _loop_in_segments(cond, body, state, max_length, grow_cache, grown)[2]


def beam_search(
    next_logits,
    cache,
    start_ids,
    *,
    end_id,
    padding_id=0,
    max_length,
    beam_size=4,
    length_penalty=0.6,
    length_limits=None,
    reorder_cache=None,
    grow_cache=None,
):
    """Beam search with GNMT's length penalty (sec. 6.1; Wu et al. 2016).

    The paper uses "beam search with a beam size of 4 and length penalty
    α = 0.6", a maximum output length of "input length + 50" (`length_limits`)
    and terminates "early when possible". As in tensor2tensor, each row keeps
    `beam_size` alive hypotheses and `beam_size` finished ones. Each step
    extends the alive ones by every token and takes the `2 * beam_size` most
    probable candidates; those ending with `end_id` become finished, scored
    `log P / lp(|Y|)` with `lp = ((5 + |Y|) / 6)^α` (`gnmt_length_penalty`);
    the best `beam_size` others stay alive. A finished hypothesis is never
    extended. As in GNMT and fairseq an end candidate only counts when it
    ranks within the best `beam_size` candidates (it would have survived a
    beam of that size), so `beam_size=1` is exactly greedy search.

    A row stops when it has `beam_size` finished hypotheses, when no alive
    hypothesis can beat its best finished one even at the largest length
    penalty (tensor2tensor's bound: log-probabilities only fall as a
    hypothesis grows), or after `length_limits[row]` tokens; the loop ends as
    soon as every row has stopped. A row with no finished hypothesis returns
    its most probable alive one (truncated, without an end token). At step 0
    only one beam per row is live, so the beam does not fill with copies.

    The cache is tiled to `batch * beam_size` rows (row `b`'s copies are rows
    `b * beam_size ... b * beam_size + beam_size - 1`) and reordered by parent
    beam at every step (`reorder_cache`).

    Args:
        next_logits: `(token_ids, cache, index) -> (logits, new_cache)`, see
            the module docstring (`Transformer.next_token_logits`).
        cache: nested dict of tensors with leading dimension `batch` (may be `{}`).
        start_ids: `(batch,)` int, the first decoder input of each row.
        end_id: the end-of-sequence token id.
        padding_id: written after a hypothesis' end token.
        max_length: the number of output positions (a Python int).
        beam_size: hypotheses kept per row (the paper: 4).
        length_penalty: GNMT's α >= 0 (the paper: 0.6; 0 ranks by log-probability).
        length_limits: optional `(batch,)` int, each row's maximum number of
            output tokens; values are clipped to `[1, max_length]`.
        reorder_cache: `(cache, rows, index) -> cache`, the cache's rows in
            the order `rows` (flat `(batch * beam_size,)` indices) after step
            `index`. Defaults to `None`: every tensor's rows taken
            (`kzoo.backend.take_rows`, `ops.take`). A model can
            move less: `kzoo.Transformer` keeps the encoder's keys and values
            (alike in every beam of a row) and moves the slots written so far.
        grow_cache: optional `((cache, length) -> cache, lengths)`, as
            `greedy_search`'s: a beam step moves its whole cache, so a short
            cache while the hypotheses are short saves most of a step.
            Defaults to `None`: one loop.

    Returns:
        int32 `(batch, max_length)`: each row's best hypothesis after the
        start token, the end token included, then `padding_id`.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> # A bigram "model": the next token's log-probabilities given the previous one.
    >>> table = ops.convert_to_tensor(np.log([
    ...     [0.1, 0.1, 0.45, 0.35],  # after 0: 2 is likelier than 3
    ...     [0.25, 0.25, 0.25, 0.25],
    ...     [0.3, 0.4, 0.1, 0.2],    # after 2: the end token 1, unlikely
    ...     [0.02, 0.95, 0.02, 0.01],  # after 3: almost surely the end token 1
    ... ]).astype("float32"))
    >>> def next_logits(token_ids, cache, index):
    ...     return ops.take(table, token_ids, axis=0), cache
    >>> start = np.array([0])
    >>> ops.convert_to_numpy(greedy_search(next_logits, {}, start, end_id=1, max_length=4)).tolist()
    [[2, 1, 0, 0]]
    >>> ops.convert_to_numpy(beam_search(next_logits, {}, start, end_id=1, max_length=4)).tolist()
    [[3, 1, 0, 0]]
    """
    start_ids, limits = _check_arguments(
        cache, start_ids, end_id, max_length, beam_size, length_penalty, length_limits
    )
    reorder_cache = reorder_cache or (
        lambda cache, rows, index: keras.tree.map_structure(lambda x: take_rows(x, rows), cache)
    )
    positions = ops.arange(max_length, dtype="int32")
    best_possible_penalty = gnmt_length_penalty(limits, length_penalty)  # (batch,)

    def cond(limit):
        return lambda index, state: ops.logical_and(index < limit, ops.logical_not(ops.all(state["done"])))

    def body(index, state):
        logits, cache = next_logits(ops.reshape(state["alive_tokens"], (-1,)), state["cache"], index)
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        vocab_size = log_probs.shape[-1]
        log_probs = ops.reshape(log_probs, (-1, beam_size, vocab_size))
        # Candidates: every alive hypothesis extended by every token.
        scores = ops.reshape(state["alive_log_probs"][..., None] + log_probs, (-1, beam_size * vocab_size))
        num_candidates = min(2 * beam_size, beam_size * vocab_size)
        log_p, flat_index = ops.top_k(scores, num_candidates)  # (batch, 2k), best first
        flat_index = ops.cast(flat_index, "int32")
        parents, tokens = flat_index // vocab_size, flat_index % vocab_size
        sequences = _gather_beams(state["alive_sequences"], parents)
        sequences = ops.where(positions == index, tokens[..., None], sequences)

        ended = tokens == end_id
        rank = ops.arange(num_candidates, dtype="int32")
        finishes = ended & (rank < beam_size) & (log_p > NEG_INF)
        finished_scores = ops.where(finishes, log_p / gnmt_length_penalty(index + 1, length_penalty), NEG_INF)
        finished = _top_beams(
            {
                "sequences": ops.concatenate([state["finished_sequences"], sequences], axis=1),
                "flags": ops.concatenate([state["finished_flags"], finishes], axis=1),
            },
            ops.concatenate([state["finished_scores"], finished_scores], axis=1),
            beam_size,
        )
        alive = _top_beams(
            {"sequences": sequences, "tokens": tokens, "parents": parents},
            ops.where(ended, NEG_INF, log_p),
            beam_size,
        )
        new = {
            "alive_tokens": alive["tokens"],
            "alive_sequences": alive["sequences"],
            "alive_log_probs": alive["scores"],
            "finished_sequences": finished["sequences"],
            "finished_scores": finished["scores"],
            "finished_flags": finished["flags"],
        }
        # Rows that had already stopped keep their hypotheses unchanged.
        new = {
            key: ops.where(ops.reshape(state["done"], (-1,) + (1,) * (len(value.shape) - 1)), state[key], value)
            for key, value in new.items()
        }
        new["cache"] = reorder_cache(cache, _flat_rows(alive["parents"]), index)
        new["done"] = state["done"] | (index + 1 >= limits) | _cannot_improve(new, best_possible_penalty)
        return index + 1, new

    batch_size = ops.shape(start_ids)[0]
    copies = ops.repeat(ops.arange(batch_size, dtype="int32"), beam_size)  # row b, beam_size times
    first_beam = ops.arange(beam_size) == 0
    state = {
        "alive_tokens": ops.repeat(start_ids[:, None], beam_size, axis=1),
        "alive_sequences": ops.full((batch_size, beam_size, max_length), padding_id, "int32"),
        "alive_log_probs": ops.tile(ops.where(first_beam, 0.0, NEG_INF)[None], (batch_size, 1)),
        "cache": keras.tree.map_structure(lambda x: take_rows(x, copies), cache),
        "finished_sequences": ops.full((batch_size, beam_size, max_length), padding_id, "int32"),
        "finished_scores": ops.full((batch_size, beam_size), NEG_INF, "float32"),
        "finished_flags": ops.zeros((batch_size, beam_size), "bool"),
        "done": ops.zeros((batch_size,), "bool"),
    }

    def grown(loop_state, length):
        index, state = loop_state
        return index, {**state, "cache": grow_cache[0](state["cache"], length)}

    _, state = _loop_in_segments(cond, body, (ops.convert_to_tensor(0, "int32"), state), max_length, grow_cache, grown)
    has_finished = ops.any(state["finished_flags"], axis=1)
    return ops.where(
        has_finished[:, None], state["finished_sequences"][:, 0], state["alive_sequences"][:, 0]
    )


def _loop_in_segments(cond, body, state, max_length, grow_cache, grown):
    """`ops.while_loop(cond(max_length), body, state)`; with `grow_cache`, one
    loop per cache length, each running while the index is below it, the
    cache grown (`grown(state, length)`) between them. A loop whose rows have
    all stopped ends at once, so short outputs never pay for the long cache."""
    lengths = (max_length,) if grow_cache is None else tuple(grow_cache[1])
    if lengths[-1] != max_length or list(lengths) != sorted(set(lengths)):
        raise ValueError(
            f"`grow_cache`'s lengths must ascend to max_length = {max_length}; got {list(lengths)}."
        )
    for i, length in enumerate(lengths):
        if i:
            state = grown(state, length)
        state = ops.while_loop(cond(length), body, state)
    return state


def _flat_rows(beam_indices):
    """`(batch, n)` beam indices within each row → `(batch * n,)` flat row indices."""
    beam_count = ops.shape(beam_indices)[1]
    offsets = ops.arange(ops.shape(beam_indices)[0], dtype="int32")[:, None] * beam_count
    return ops.reshape(beam_indices + offsets, (-1,))


def _gather_beams(tensor, beam_indices):
    """`tensor (batch, beams, ...)`, `beam_indices (batch, n)` → `(batch, n, ...)`."""
    batch, beams = ops.shape(tensor)[0], tensor.shape[1]
    flat = ops.reshape(tensor, (-1,) + tuple(tensor.shape[2:]))
    offsets = ops.arange(batch, dtype="int32")[:, None] * beams
    return ops.take(flat, beam_indices + offsets, axis=0)


def _top_beams(tensors, scores, k):
    """The `k` best-scoring entries of each row: `tensors` gathered, plus `"scores"`."""
    top_scores, index = ops.top_k(scores, k)
    index = ops.cast(index, "int32")
    return {"scores": top_scores, **{key: _gather_beams(value, index) for key, value in tensors.items()}}


def _cannot_improve(state, best_possible_penalty):
    """Per row: `beam_size` hypotheses have finished, or no alive one can beat
    the best finished one. Log-probabilities only fall as a hypothesis grows,
    so an alive hypothesis can at best score its log-probability over the
    largest length penalty (tensor2tensor's bound; tensor2tensor compares with
    its worst finished hypothesis to keep an exact n-best list, the best one
    suffices for the single hypothesis returned here and stops sooner)."""
    flags = state["finished_flags"]
    best_alive = state["alive_log_probs"][:, 0] / best_possible_penalty
    best_finished = state["finished_scores"][:, 0]  # -inf when none has finished
    return ops.all(flags, axis=1) | (best_finished > best_alive)


def _check_arguments(cache, start_ids, end_id, max_length, beam_size, length_penalty, length_limits):
    """Validates the search arguments before any work; returns int32
    `start_ids` and the `(batch,)` length limits clipped to `[1, max_length]`."""
    for name, value, minimum in (
        ("max_length", max_length, 1),
        ("beam_size", beam_size, 1),
        ("end_id", end_id, 0),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"`{name}` must be a Python int >= {minimum}, got {value!r}.")
    if not isinstance(length_penalty, (int, float)) or length_penalty < 0:
        raise ValueError(
            f"`length_penalty` (GNMT's α) must be a number >= 0, got {length_penalty!r}; "
            "the paper uses 0.6, and 0 ranks hypotheses by log-probability alone."
        )
    start_ids = ops.convert_to_tensor(start_ids, "int32")
    if len(start_ids.shape) != 1:
        raise ValueError(
            f"`start_ids` must have shape (batch,), got {tuple(start_ids.shape)}: "
            "pass one start token per row."
        )
    batch_size = start_ids.shape[0]
    for leaf in keras.tree.flatten(cache):
        if len(leaf.shape) == 0 or (None not in (batch_size, leaf.shape[0]) and leaf.shape[0] != batch_size):
            raise ValueError(
                f"Every cache tensor needs leading dimension batch = {batch_size}, got one of shape "
                f"{tuple(leaf.shape)}; build the cache for the same rows as `start_ids`."
            )
    if length_limits is None:
        return start_ids, ops.full(ops.shape(start_ids), max_length, "int32")
    length_limits = ops.convert_to_tensor(length_limits, "int32")
    if tuple(length_limits.shape) != tuple(start_ids.shape):
        raise ValueError(
            f"`length_limits` must have shape (batch,) = {tuple(start_ids.shape)}, got "
            f"{tuple(length_limits.shape)}: give one maximum output length per row."
        )
    return start_ids, ops.clip(length_limits, 1, max_length)
