"""Position information: fixed sinusoids (Transformer sec. 3.5) and learned
position embeddings (Transformer Table 3 row E; BERT sec. 3)."""

import keras
from keras import ops

from kzoo.backend.checks import check_positions_fit


@keras.saving.register_keras_serializable(package="kzoo")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Fixed sinusoidal position encodings, "Attention Is All You Need" sec. 3.5.

    `PE(pos, 2i) = sin(pos / 10000^(2i / d_model))` and
    `PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))`: sines on even and
    cosines on odd dimensions, interleaved as in the paper (fairseq and
    tensor2tensor concatenate `[sin, cos]` instead, so their weights do not
    carry over).

    The table is computed in float32 and cast to the compute dtype at the end,
    so positions stay distinct under `mixed_bfloat16` (computing it in bfloat16
    makes positions above 256 collide).

    Args:
        max_wavelength: float. The base of the geometric progression.
            Defaults to `10000`, as in the paper.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor of shape `(batch, sequence_length, d_model)`.
            The embeddings; only the shape is read.
        start_index: int or scalar tensor. The position of the first token
            (for step-by-step decoding). Defaults to `0`.

    Returns:
        `(sequence_length, d_model)` encodings to add to the embeddings.

    Example:

    >>> import numpy as np
    >>> encoding = SinusoidalPositionEncoding()(np.zeros((2, 4, 6), "float32"))
    >>> tuple(encoding.shape)
    (4, 6)
    >>> [round(float(v), 4) for v in ops.convert_to_numpy(encoding)[1, :2]]  # sin(1), cos(1)
    [0.8415, 0.5403]
    """

    def __init__(self, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] % 2:
            raise ValueError(
                "SinusoidalPositionEncoding needs an even embedding size "
                f"(sin/cos pairs); got d_model={input_shape[-1]}."
            )
        self.built = True

    def call(self, inputs, start_index=0):
        sequence_length, d_model = ops.shape(inputs)[-2], ops.shape(inputs)[-1]
        positions = ops.cast(ops.arange(sequence_length) + start_index, "float32")
        # 1 / 10000^(2i / d_model) for i = 0 .. d_model/2 - 1
        two_i = ops.cast(ops.arange(0, d_model, 2), "float32")
        inverse_frequencies = ops.power(
            float(self.max_wavelength), -two_i / ops.cast(d_model, "float32")
        )
        angles = ops.expand_dims(positions, 1) * ops.expand_dims(inverse_frequencies, 0)
        # (T, d/2, 2) -> (T, d): sin at 2i, cos at 2i + 1
        encoding = ops.reshape(
            ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1),
            (sequence_length, d_model),
        )
        return ops.cast(encoding, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[-2:])

    def get_config(self):
        config = super().get_config()
        config["max_wavelength"] = self.max_wavelength
        return config


@keras.saving.register_keras_serializable(package="kzoo")
class PositionEmbedding(keras.layers.Layer):
    """Learned absolute position embeddings (BERT sec. 3; Transformer Table 3 row E).

    A trainable `(max_sequence_length, hidden_dim)` table; position `p` reads
    row `p`. Positions past the table raise a `ValueError` naming both
    lengths, on every backend (see `kzoo.backend.checks.check_positions_fit`).

    Args:
        max_sequence_length: int. The number of rows (512 for BERT).
        initializer: str or `keras.initializers.Initializer`. The initializer
            of the table (BERT: truncated normal, stddev 0.02). Defaults to
            `"glorot_uniform"`.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor of shape `(batch, sequence_length, hidden_dim)`.
            The embeddings; only the shape is read.
        start_index: int or scalar tensor. The position of the first token.
            Defaults to `0`.

    Returns:
        `(sequence_length, hidden_dim)` position embeddings to add to the inputs.

    Example:

    >>> import numpy as np
    >>> layer = PositionEmbedding(max_sequence_length=16)
    >>> tuple(layer(np.zeros((2, 10, 8), "float32")).shape)
    (10, 8)
    """

    def __init__(self, max_sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.max_sequence_length = int(max_sequence_length)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_sequence_length, input_shape[-1]),
            initializer=self.initializer,
            trainable=True,
        )
        self.built = True

    def call(self, inputs, start_index=0):
        sequence_length = ops.shape(inputs)[-2]
        sequence_length = check_positions_fit(
            start_index, sequence_length, self.max_sequence_length, self.name
        )
        table = ops.convert_to_tensor(self.position_embeddings)
        return ops.slice(table, (start_index, 0), (sequence_length, table.shape[-1]))

    def compute_output_shape(self, input_shape):
        if input_shape[-2] is not None:  # a functional model on a static, too long input
            check_positions_fit(0, input_shape[-2], self.max_sequence_length, self.name)
        return tuple(input_shape[-2:])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_sequence_length": self.max_sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
