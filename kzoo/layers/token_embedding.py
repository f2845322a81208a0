"""Token embeddings that can also produce vocabulary logits with the same matrix
(three-way weight tying, "Attention Is All You Need" sec. 3.4; BERT's MLM output)."""

import warnings

import keras

from kzoo import backend
from kzoo.backend.checks import VOCABULARY_ADVICE, check_ids_in_range


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
    `kzoo.backend.checks`). `ids_advice`, the message's last sentence, says
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
