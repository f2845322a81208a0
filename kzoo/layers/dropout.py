"""Dropout with half the random numbers ("Attention Is All You Need" sec. 5.4,
BERT sec. 3 / A.2: dropout 0.1 on every sub-layer and attention probability)."""

import keras
import numpy as np
from keras import ops

from kzoo import backend

# A float32 uniform number carries 23 random mantissa bits (24 on torch):
# `floor(2048 u)` (11 bits) and `frac(2048 u)` (12 or more bits) are two
# independent uniform draws, exact on a grid of 2048 steps.
_STEPS = 2048
# The name of the random state in weights files (`save_own_variables`).
SEED_STATE = "seed_generator_state"


@keras.saving.register_keras_serializable(package="kzoo")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` that draws one uniform number per two elements.

    Dropout (Srivastava et al. 2014) is the Transformer's only regulariser
    besides label smoothing (sec. 5.4: residual dropout, P_drop = 0.1) and
    BERT's (0.1 on embeddings, attention probabilities and every sub-layer).
    Its masks need one random number per element, 38 million per BERT-Base
    training step at batch 8 x 128, and drawing them is a noticeable part of
    a step on JAX and TensorFlow CPUs, where a uniform draw is cheaper than a
    Bernoulli draw of twice the size (the documentation's benchmarks page has the
    measurements). On JAX and inside TensorFlow's XLA steps the numbers come
    from XLA's own ThreeFry op, faster there than each engine's default draw
    (`kzoo.backend.dropout_uniform`).

    Here each float32 uniform `u` serves two elements: element one is dropped
    when `floor(2048 u) < 2048 r`, element two when `frac(2048 u) < r`, with
    `r = round(2048 rate) / 2048`: two disjoint bit fields of the same random
    word, so the two elements are dropped independently, each with
    probability exactly `r`. The rate is thus taken to the nearest
    1/2048 (0.1 is applied as 0.10010, 205/2048); kept values are scaled by
    `1 / (1 - applied rate)`, so the expected output still equals the input.
    The same on every backend, seeds included (a seeded
    `keras.layers.Dropout` on torch draws a Bernoulli tensor, unseeded it
    calls `torch.nn.functional.dropout`; this layer is as fast as the latter).

    The random state (the `SeedGenerator`'s, which Keras leaves out of
    weights files) is saved with the weights, as `seed_generator_state`, and
    loaded back when a file holds it: a `fit` resumed from a checkpoint
    (`keras.callbacks.BackupAndRestore`, `ModelCheckpoint`) draws the masks
    the uninterrupted run would have drawn.

    Args:
        rate: float. The fraction of the inputs to drop, in [0, 1).
        noise_shape: tuple of ints. As `keras.layers.Dropout`. Defaults to
            `None`: with a `noise_shape` the layer is `keras.layers.Dropout`.
        seed: int. The random seed. Defaults to `None`.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: tensor of any shape. The values to drop.
        training: bool. Dropout is active only when true. Defaults to `False`.

    Example:

    >>> import numpy as np
    >>> layer = Dropout(0.1, seed=0)
    >>> x = np.ones((64, 512), "float32")
    >>> y = ops.convert_to_numpy(layer(x, training=True))
    >>> bool(abs((y == 0).mean() - 0.1) < 0.01), bool(np.allclose(y[y > 0], 2048 / 1843))
    (True, True)
    >>> bool((ops.convert_to_numpy(layer(x)) == x).all())  # inference: identity
    True
    """

    def call(self, inputs, training=False):
        if not training or self.rate == 0 or self.noise_shape is not None:
            return super().call(inputs, training=training)
        return paired_dropout(inputs, self.rate, self.seed_generator)

    def save_own_variables(self, store):
        super().save_own_variables(store)
        if self.rate > 0:  # Keras makes a SeedGenerator only then
            store[SEED_STATE] = self.seed_generator.state

    def load_own_variables(self, store):
        if SEED_STATE in store.keys() and self.rate > 0:  # files saved before it was saved lack it
            state = self.seed_generator.state
            state.assign(np.asarray(store[SEED_STATE]).astype(np.int64).astype(state.dtype))
        super().load_own_variables({key: store[key] for key in store.keys() if key != SEED_STATE})


def paired_dropout(inputs, rate, seed):
    """Dropout with one float32 uniform draw per two elements (see `Dropout`).

    Example:

    >>> import numpy as np
    >>> y = paired_dropout(np.ones((2, 1000), "float32"), 0.5, keras.random.SeedGenerator(0))
    >>> tuple(y.shape), bool(0.4 < (ops.convert_to_numpy(y) == 0).mean() < 0.6)
    ((2, 1000), True)
    """
    # `ops.shape` holds tensors for dimensions unknown at trace time
    # (TensorFlow graphs), so the half width is computed with `//`, which
    # works on ints and tensors alike.
    shape = ops.shape(inputs)
    width = shape[-1]
    draws = backend.dropout_uniform(tuple(shape[:-1]) + ((width + 1) // 2,), seed)
    rate = round(rate * _STEPS) / _STEPS
    scaled = draws * _STEPS
    high = ops.floor(scaled)
    keep = ops.concatenate([high >= rate * _STEPS, scaled - high >= rate], axis=-1)
    keep = keep[..., :width]
    return ops.where(keep, inputs / ops.cast(1.0 - rate, inputs.dtype), 0)
