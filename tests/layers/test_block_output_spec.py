"""The encoder and decoder blocks' symbolic outputs (a functional model's
construction) come without tracing `call` when the call returns only the
hidden states, and equal what Keras' traced path gives (shape and dtype) for
every call the models make, at float32 and mixed precision."""

import functools

import keras
import numpy as np
import pytest

from kzoo.layers import TransformerDecoderBlock, TransformerEncoderBlock

HIDDEN = 8


def symbolic(*shape, dtype="float32"):
    return keras.KerasTensor(shape, dtype=dtype)


def traced(block, *args, **kwargs):
    """Keras' own symbolic outputs: `call` traced by the backend."""
    return keras.Operation.compute_output_spec(block, *args, **kwargs)


def specs(outputs):
    return keras.tree.map_structure(lambda t: (tuple(t.shape), str(t.dtype)), outputs)


def counted(function, calls):
    """`function`, with its signature, appending to `calls` when called."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        calls.append(1)
        return function(*args, **kwargs)

    return wrapper


def built(block_class, policy, *shapes):
    block = block_class(num_heads=2, intermediate_dim=16, dtype=policy)
    block.build(*shapes)
    return block


ENCODER_CALLS = {
    "plain": lambda: ((symbolic(None, None, HIDDEN),), {}),
    "padding": lambda: ((symbolic(None, None, HIDDEN),), {"padding_mask": symbolic(None, None, dtype="int32")}),
    "static_length": lambda: ((symbolic(3, 5, HIDDEN),), {"attention_mask": symbolic(3, 5, 5, dtype="int32")}),
    "training": lambda: ((symbolic(None, 5, HIDDEN),), {"training": True}),
    "positions": lambda: ((symbolic(None, 6, HIDDEN),), {"output_positions": symbolic(None, 2, dtype="int32")}),
    "scores": lambda: ((symbolic(None, 6, HIDDEN),), {"return_attention_scores": True}),
}

DECODER_CALLS = {
    "plain": lambda: ((symbolic(None, None, HIDDEN), symbolic(None, None, HIDDEN)), {}),
    "masks": lambda: ((symbolic(None, 4, HIDDEN),), {
        "encoder_sequence": symbolic(None, 7, HIDDEN),
        "decoder_padding_mask": symbolic(None, 4, dtype="int32"),
        "encoder_padding_mask": symbolic(None, 7, dtype="int32"),
        "use_causal_mask": False,
    }),
    "scores": lambda: ((symbolic(None, 4, HIDDEN), symbolic(None, 7, HIDDEN)), {"return_attention_scores": True}),
    "cache": lambda: ((symbolic(2, 1, HIDDEN), symbolic(2, 7, HIDDEN)), {
        "self_attention_cache": (symbolic(2, 5, 2, 4), symbolic(2, 5, 2, 4)),
        "self_attention_cache_update_index": 0,
    }),
}

TRACED_CALLS = {"positions", "scores", "cache"}


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize(
    "block_class, case",
    [(TransformerEncoderBlock, case) for case in ENCODER_CALLS] + [(TransformerDecoderBlock, case) for case in DECODER_CALLS],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_symbolic_outputs_equal_the_traced_ones(block_class, case, policy, monkeypatch):
    args, kwargs = (ENCODER_CALLS if block_class is TransformerEncoderBlock else DECODER_CALLS)[case]()
    inputs = 1 if block_class is TransformerEncoderBlock else 2
    block = built(block_class, policy, *[(None, None, HIDDEN)] * inputs)
    # As `__call__` passes them: float inputs in the compute dtype.
    args, kwargs = keras.tree.map_structure(
        lambda t: symbolic(*t.shape, dtype=block.compute_dtype) if getattr(t, "dtype", None) == "float32" else t, (args, kwargs)
    )
    expected = specs(traced(block, *args, **kwargs))
    calls = []
    monkeypatch.setattr(block, "call", counted(block.call, calls))
    assert specs(block.compute_output_spec(*args, **kwargs)) == expected
    assert bool(calls) == (case in TRACED_CALLS)  # only calls that return more are traced


def test_a_functional_model_is_built_without_tracing_the_blocks(monkeypatch):
    traced_calls = []
    for block_class in (TransformerEncoderBlock, TransformerDecoderBlock):
        monkeypatch.setattr(block_class, "call", counted(block_class.call, traced_calls))
    source, target = keras.Input((None, HIDDEN)), keras.Input((None, HIDDEN))
    memory = TransformerEncoderBlock(num_heads=2, intermediate_dim=16)(source)
    outputs = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)(target, memory)
    model = keras.Model([source, target], outputs)
    assert traced_calls == []
    x = np.random.default_rng(0).normal(size=(2, 5, HIDDEN)).astype("float32")
    assert tuple(model([x, x[:, :3]]).shape) == (2, 3, HIDDEN)  # and the model runs
    assert len(traced_calls) == 2


def test_symbolic_decoder_call_without_the_encoder_output_raises():
    block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    with pytest.raises(ValueError, match="needs the encoder output"):
        block(keras.Input((None, HIDDEN)))
