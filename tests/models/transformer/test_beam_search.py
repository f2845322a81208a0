"""Greedy and beam search (sec. 6.1, GNMT length penalty) on a toy step function.

The toy "model" scores the next token from a fixed random table indexed by a
hash of the whole decoder prefix, which it reads from a cache that records the
token history. A search that reordered the cache wrongly would read the wrong
prefix and miss the exhaustive optimum computed here in NumPy.
"""

import itertools

import keras
import numpy as np
import pytest
from keras import ops

from kzoo.models.transformer.beam_search import beam_search, gnmt_length_penalty, greedy_search

VOCAB, PAD, END, MAX_LENGTH, MODULUS = 6, 0, 1, 4, 1009
TABLE = np.random.default_rng(1).normal(scale=1.5, size=(MODULUS, VOCAB)).astype("float32")
TABLE[:, PAD] = -np.inf  # the toy never emits padding, as a model that masks it
WEIGHTS = 7 ** np.arange(MAX_LENGTH)
SOURCES = np.array([0, 1, 2, 3, 4, 5, 6, 7], "int32")
STARTS = np.array([2, 3, 4, 5, 2, 3, 4, 5], "int32")
# Enough beams to hold every hypothesis: 5 candidates at step 0, 4 new ones
# per alive hypothesis (padding is -inf, the end token finishes) after that.
EXHAUSTIVE_BEAM = 5 * 4 ** (MAX_LENGTH - 1)


def toy_next_logits(token_ids, cache, index):
    """`Transformer.next_token_logits`'s signature; the cache records the history."""
    history = cache["decoder"]["history"]  # (rows, slots), -1 where not yet decoded
    slots = history.shape[1]  # MAX_LENGTH, or fewer in a search that grows its cache
    history = ops.where(ops.arange(slots) == index, token_ids[:, None], history)
    key = (cache["source"] * 31 + ops.sum((history + 1) * WEIGHTS[:slots], axis=1)) % MODULUS
    logits = ops.take(ops.convert_to_tensor(TABLE), key, axis=0)
    return logits, {"source": cache["source"], "decoder": {"history": history}}


def toy_cache(sources, slots=MAX_LENGTH):
    sources = np.asarray(sources, "int32")
    return {"source": sources, "decoder": {"history": np.full((len(sources), slots), -1, "int32")}}


def grow_toy_cache(cache, length):
    """`grow_cache`'s function for the toy: the history padded with -1 (not decoded)."""
    history = cache["decoder"]["history"]
    more = ops.full((ops.shape(history)[0], length - history.shape[1]), -1, "int32")
    return {"source": cache["source"], "decoder": {"history": ops.concatenate([history, more], axis=1)}}


def numpy_log_probs(source, inputs, banned=PAD):
    """The toy's next-token log-probabilities after decoder inputs `inputs`, in
    float64; the `banned` tokens have probability 0."""
    key = (source * 31 + sum((t + 1) * w for t, w in zip(inputs, WEIGHTS))) % MODULUS
    logits = TABLE[key].astype("float64")
    logits[[banned]] = -np.inf
    return logits - np.log(np.sum(np.exp(logits[np.isfinite(logits)])))


def exhaustive_scores(source, start, limit, alpha):
    """Every hypothesis ending with the end token within `limit` tokens, scored
    log P / lp(|Y|) (GNMT): {tokens: score}."""
    scores = {}
    for length in range(1, limit + 1):
        for body in itertools.product(range(2, VOCAB), repeat=length - 1):
            tokens = list(body) + [END]
            log_p = sum(numpy_log_probs(source, [start] + tokens[:i])[t] for i, t in enumerate(tokens))
            scores[tuple(tokens)] = log_p / ((5 + length) / 6) ** alpha
    return scores


def padded(tokens, length=MAX_LENGTH):
    return list(tokens) + [PAD] * (length - len(tokens))


def numpy_greedy(source, start, limit):
    tokens = []
    while len(tokens) < limit and END not in tokens:
        tokens.append(int(np.argmax(numpy_log_probs(source, [start] + tokens))))
    return padded(tokens)


def run_beam(sources, starts, **kwargs):
    kwargs = {"end_id": END, "padding_id": PAD, "max_length": MAX_LENGTH, **kwargs}
    return ops.convert_to_numpy(beam_search(toy_next_logits, toy_cache(sources), starts, **kwargs)).tolist()


def run_greedy(sources, starts, **kwargs):
    kwargs = {"end_id": END, "padding_id": PAD, "max_length": MAX_LENGTH, **kwargs}
    return ops.convert_to_numpy(greedy_search(toy_next_logits, toy_cache(sources), starts, **kwargs)).tolist()


def test_gnmt_length_penalty_values():
    lengths = np.array([1, 2, 7, 25])
    expected = ((5 + lengths) / 6) ** 0.6  # 1, 1.0970, 1.5157, 2.5853
    np.testing.assert_allclose(ops.convert_to_numpy(gnmt_length_penalty(lengths, 0.6)), expected, rtol=1e-6)
    assert ops.convert_to_numpy(gnmt_length_penalty(lengths, 0.0)).tolist() == [1.0] * 4


def test_large_beam_finds_the_exhaustive_optimum():
    limits = [MAX_LENGTH, 3, MAX_LENGTH, 2, MAX_LENGTH, 1, MAX_LENGTH, 3]
    optima = {}
    for alpha in (0.0, 0.6, 1.0):
        expected = []
        for source, start, limit in zip(SOURCES, STARTS, limits):
            scores = sorted(exhaustive_scores(source, start, limit, alpha).items(), key=lambda kv: -kv[1])
            # A clear winner, so float32 search and float64 reference must agree.
            assert len(scores) == 1 or scores[0][1] - scores[1][1] > 1e-3
            expected.append(padded(scores[0][0]))
        got = run_beam(SOURCES, STARTS, beam_size=EXHAUSTIVE_BEAM, length_penalty=alpha, length_limits=limits)
        assert got == expected, alpha
        optima[alpha] = [padded_length(row) for row in expected]
    # The fixture has optima of every length, and α matters: 0 favours short
    # hypotheses, larger α longer ones (lengths [1, 2, 1, 2, 2, 1, 4, 2] at α = 0).
    assert set(optima[0.6]) == {1, 2, 3, 4}
    assert optima[0.0] != optima[0.6] != optima[1.0]
    assert all(a <= b <= c for a, b, c in zip(optima[0.0], optima[0.6], optima[1.0]))


def padded_length(row):
    return len(row) - row.count(PAD)


@pytest.mark.parametrize("limits", [None, [4, 3, 2, 1, 4, 3, 2, 1]])
def test_greedy_equals_numpy_argmax_and_beam_size_1(limits):
    expected = [
        numpy_greedy(s, t, MAX_LENGTH if limits is None else limit)
        for s, t, limit in zip(SOURCES, STARTS, limits or [MAX_LENGTH] * len(SOURCES))
    ]
    assert any(END in row for row in expected) and any(END not in row for row in expected)
    assert run_greedy(SOURCES, STARTS, length_limits=limits) == expected
    assert run_beam(SOURCES, STARTS, beam_size=1, length_limits=limits) == expected


@pytest.mark.parametrize("lengths", [(1, 2, 4), (3, 4)])
def test_a_search_that_grows_its_cache_finds_the_same_tokens(lengths):
    """`grow_cache`: one loop per cache length (the Transformer's 16, 32, ...
    positions on TensorFlow and JAX), the same tokens as one loop over the
    whole cache, with rows that end in every segment."""
    limits = [4, 3, 2, 1, 4, 3, 2, 1]
    for search in (beam_search, greedy_search):
        arguments = dict(end_id=END, padding_id=PAD, max_length=MAX_LENGTH, length_limits=limits)
        whole = search(toy_next_logits, toy_cache(SOURCES), STARTS, **arguments)
        grown = search(toy_next_logits, toy_cache(SOURCES, lengths[0]), STARTS,
                       grow_cache=(grow_toy_cache, lengths), **arguments)
        np.testing.assert_array_equal(ops.convert_to_numpy(grown), ops.convert_to_numpy(whole))


def test_beam_4_output_form_and_batch_rows_are_independent():
    limits = [4, 2, 3]
    batched = run_beam(SOURCES[:3], STARTS[:3], beam_size=4, length_limits=limits)
    one_by_one = [
        run_beam(SOURCES[i : i + 1], STARTS[i : i + 1], beam_size=4, length_limits=limits[i : i + 1])[0]
        for i in range(3)
    ]
    assert batched == one_by_one
    for row, limit in zip(batched, limits):
        length = padded_length(row)
        assert 1 <= length <= limit and row == padded(row[:length])
        assert END not in row[: length - 1]  # a finished hypothesis is never extended
        assert PAD not in row[:length]


def test_a_row_with_no_finished_hypothesis_returns_its_best_alive_one():
    def never_ends(token_ids, cache, index):
        logits, cache = toy_next_logits(token_ids, cache, index)
        return ops.where(ops.arange(VOCAB) == END, float("-inf"), logits), cache

    def best_full_length(source, start, limit):
        totals = {
            tokens: sum(
                numpy_log_probs(source, [start, *tokens[:i]], banned=[PAD, END])[t] for i, t in enumerate(tokens)
            )
            for tokens in itertools.product(range(2, VOCAB), repeat=limit)
        }
        return padded(max(totals, key=totals.get))

    limits = [4, 2, 3]
    got = beam_search(
        never_ends, toy_cache(SOURCES[:3]), STARTS[:3], end_id=END, max_length=MAX_LENGTH,
        beam_size=4 ** (MAX_LENGTH - 1), length_limits=limits,
    )
    expected = [best_full_length(s, t, limit) for s, t, limit in zip(SOURCES, STARTS, limits)]
    assert ops.convert_to_numpy(got).tolist() == expected


def test_search_stops_when_every_row_has_ended():
    """The step function runs until the last row ends, not `max_length` times
    (counted per loop iteration; under JAX from inside the compiled loop)."""
    chain = np.full((VOCAB, VOCAB), -9.0, "float32")
    chain[2, 3] = chain[3, 4] = chain[4, END] = chain[5, END] = 9.0  # 2 → 3 → 4 → end; 5 → end
    calls = []

    def markov(token_ids, cache, index):
        if keras.backend.backend() == "jax":
            import jax

            jax.debug.callback(calls.append, index)
        else:
            calls.append(index)
        return ops.take(ops.convert_to_tensor(chain), token_ids, axis=0), cache

    def count_calls(search, starts, **kwargs):
        calls.clear()
        out = search(markov, {}, np.array(starts), end_id=END, max_length=8, **kwargs)
        return ops.convert_to_numpy(out).tolist(), len(calls)

    assert count_calls(greedy_search, [5, 5]) == ([[END] + [PAD] * 7] * 2, 1)
    assert count_calls(greedy_search, [5, 2]) == ([[END] + [PAD] * 7, [3, 4, END] + [PAD] * 5], 3)
    assert count_calls(beam_search, [5, 5], beam_size=4) == ([[END] + [PAD] * 7] * 2, 1)
    assert count_calls(beam_search, [5, 2], beam_size=4) == ([[END] + [PAD] * 7, [3, 4, END] + [PAD] * 5], 3)


def test_compiled_search_equals_eager():
    """Static shapes and `ops.while_loop`: the search compiles whole
    (`jax.jit`, `tf.function(jit_compile=True)`); torch runs it eagerly."""
    limits = np.array([4, 2, 3, 4, 1, 4, 2, 3], "int32")
    cache = toy_cache(SOURCES)

    def search(cache, starts, limits):
        kwargs = {"end_id": END, "max_length": MAX_LENGTH, "length_limits": limits}
        return beam_search(toy_next_logits, cache, starts, beam_size=3, **kwargs), greedy_search(
            toy_next_logits, cache, starts, **kwargs
        )

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        compiled = jax.jit(search)
    elif backend == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(search, jit_compile=True)
    else:
        pytest.skip("torch runs the search eagerly (no graph compiler involved)")
    eager = [ops.convert_to_numpy(x).tolist() for x in search(cache, STARTS, limits)]
    assert [ops.convert_to_numpy(x).tolist() for x in compiled(cache, STARTS, limits)] == eager


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"beam_size": 0}, "`beam_size` must be a Python int >= 1"),
        ({"beam_size": 2.0}, "`beam_size` must be a Python int >= 1"),
        ({"max_length": 0}, "`max_length` must be a Python int >= 1"),
        ({"end_id": -1}, "`end_id` must be a Python int >= 0"),
        ({"length_penalty": -0.5}, "`length_penalty` \\(GNMT's α\\) must be a number >= 0"),
        ({"start_ids": np.zeros((2, 1), "int32")}, "`start_ids` must have shape \\(batch,\\)"),
        ({"length_limits": [3]}, "`length_limits` must have shape \\(batch,\\) = \\(2,\\)"),
        ({"cache": toy_cache([0, 1, 2])}, "Every cache tensor needs leading dimension batch = 2"),
        ({"grow_cache": (grow_toy_cache, (2, 3))}, "`grow_cache`'s lengths must ascend to max_length = 4"),
        ({"grow_cache": (grow_toy_cache, (2, 2, 4))}, "`grow_cache`'s lengths must ascend to max_length = 4"),
    ],
)
def test_bad_arguments_raise_before_any_step(kwargs, message):
    def never_called(*args):
        raise AssertionError("the search started")

    arguments = {"cache": toy_cache([0, 1]), "start_ids": STARTS[:2], "end_id": END, "max_length": 4, **kwargs}
    cache, start_ids = arguments.pop("cache"), arguments.pop("start_ids")
    with pytest.raises(ValueError, match=message):
        beam_search(never_called, cache, start_ids, **arguments)
    if "beam_size" not in kwargs and "length_penalty" not in kwargs:
        with pytest.raises(ValueError, match=message):
            greedy_search(never_called, cache, start_ids, **arguments)
