"""The embeddings: token embeddings that can also produce vocabulary logits with
the same matrix (three-way weight tying, "Attention Is All You Need" sec. 3.4;
BERT's MLM output), and position information, fixed sinusoids (Transformer
sec. 3.5) or learned position embeddings (Transformer Table 3 row E; BERT sec. 3)."""

import warnings

import keras
from keras import ops

from kzoo import backend
from kzoo.backend import VOCABULARY_ADVICE, check_ids_in_range, check_positions_fit


@keras.saving.register_keras_serializable(package="kzoo")
class TokenEmbedding(keras.layers.ReversibleEmbedding):
    """An embedding table `W_e` that also maps hidden states to logits `h W_e^T`.

    Sec. 3.4 of the Transformer paper shares one matrix between the source
    embedding, the target embedding and the pre-softmax projection; BERT's
    masked-LM output also uses the input embedding matrix transposed. This is
    `keras.layers.ReversibleEmbedding` (`reverse=True` projects back to the
    vocabulary; `quantize("int8")` keeps the table in int8 with a scale per
    row, as Keras does) plus an id check: out-of-range ids raise the same `ValueError`
    on every backend in eager calls, where Keras' JAX embedding would return
    NaN rows silently, and fail compiled steps with the same message (see
    `kzoo.backend`). `ids_advice`, the message's last sentence, says
    what to do; a model may set it for a table of other ids (BERT's segments).

    Args:
        input_dim: int. The vocabulary size.
        output_dim: int. The embedding size (d_model, or H for BERT).
        tie_weights: bool. Whether to share the embedding matrix with the
            reverse projection. Defaults to `True`.
        embeddings_initializer: str or `keras.initializers.Initializer`. The
            initializer of the table. Defaults to `"uniform"`.
        embeddings_regularizer: `keras.regularizers.Regularizer`. Applied to
            the table. Defaults to `None`.
        embeddings_constraint: `keras.constraints.Constraint`. Applied to
            the table. Defaults to `None`.
        mask_zero: bool. Whether id 0 is padding, to be masked out. Defaults
            to `False`.
        reverse_dtype: str. The dtype of the reverse projection. Defaults to
            `None`: the layer's compute dtype.
        logit_soft_cap: float. If set, `reverse=True` logits become
            `tanh(logits / logit_soft_cap) * logit_soft_cap`. Defaults to `None`.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: int tensor of shape `(batch, sequence_length)`. The ids, or
            hidden states `(batch, sequence_length, output_dim)` with
            `reverse=True`.
        reverse: bool. Project hidden states to `(batch, sequence_length,
            input_dim)` logits. Defaults to `False`.

    Example:

    >>> import numpy as np
    >>> embedding = TokenEmbedding(input_dim=100, output_dim=8)
    >>> hidden = embedding(np.array([[1, 2, 3]]))
    >>> tuple(hidden.shape), tuple(embedding(hidden, reverse=True).shape)
    ((1, 3, 8), (1, 3, 100))
    """

    ids_advice = VOCABULARY_ADVICE

    def call(self, inputs, reverse=False, training=None):
        inputs = self._checked(inputs, reverse)
        if reverse or not training:
            return super().call(inputs, reverse=reverse)
        # Keras' lookup on a table whose gradient stays dense on TensorFlow too, so
        # that Adam updates every row as on JAX and torch (`kzoo.backend.dense_gradient`).
        if keras.backend.standardize_dtype(inputs.dtype) not in ("int32", "int64"):
            inputs = keras.ops.cast(inputs, "int32")
        outputs = keras.ops.take(backend.dense_gradient(self.embeddings), inputs, axis=0)
        return keras.ops.cast(outputs, self.compute_dtype)

    def quantized_call(self, inputs, reverse=False, training=None):  # an int8 table is not trained
        # Keras calls this instead of `call` once the table is quantized.
        with warnings.catch_warnings():
            # Keras' int8 reverse projection transposes the 1-D scales, which torch warns about.
            warnings.filterwarnings("ignore", message="The use of `x.T` on tensors of dimension other than 2")
            return super().quantized_call(self._checked(inputs, reverse), reverse=reverse)

    def quantize(self, mode=None, type_check=True, config=None):
        # Keras quantizes subclasses only when told they compute as it does:
        # this one adds the id check before Keras' own lookup, int8 or not.
        super().quantize(mode, type_check=False, config=config)

    def _checked(self, inputs, reverse):
        if not reverse:
            return check_ids_in_range(inputs, self.input_dim, f"`{self.name}` ids", self.ids_advice)
        if self.reverse_dtype is None:
            # Keras leaves float32 hidden states uncast under mixed precision.
            return keras.ops.cast(inputs, self.compute_dtype)
        return inputs


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
    lengths, on every backend (see `kzoo.backend.check_positions_fit`).

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
