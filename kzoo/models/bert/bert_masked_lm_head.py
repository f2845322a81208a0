"""BERT's masked-LM output layer (BERT sec. 3.1, "Task #1: Masked LM")."""

import keras
from keras import ops

from kzoo.backend import is_concrete
from kzoo.layers import get_activation
from kzoo.layers.initializers import clone_initializer
from kzoo.layers.transformer_encoder_block import gather_positions


def check_mask_positions(mask_positions, sequence_length):
    """Out-of-range gather indices clamp or give NaN silently on some backends:
    raise the same `ValueError` everywhere, where the values can be read."""
    if sequence_length is None or not is_concrete(mask_positions):
        return
    values = ops.convert_to_numpy(mask_positions)
    if values.size and (values.min() < 0 or values.max() >= sequence_length):
        raise ValueError(
            f"`mask_positions` must lie in [0, {sequence_length}) (the sequence "
            f"length), but got values from {values.min()} to {values.max()}. Pad "
            "unused prediction slots with position 0 and mask weight 0."
        )


@keras.saving.register_keras_serializable(package="kzoo")
class BertMaskedLMHead(keras.layers.Layer):
    """Masked-LM logits at the masked positions only (BERT sec. 3.1).

    As in google-research/bert's `get_masked_lm_output`, the final hidden
    vectors are gathered at `mask_positions` first, so the vocabulary
    projection runs on `P` vectors per sequence rather than on all `T`:

        h = T[mask_positions]                              (batch, P, H)
        h = LayerNorm(act(h W_t + b_t))                    transform
        logits = h W_e^T + b                               (batch, P, V)

    `W_e` is the backbone's input token embedding matrix (sec. 3.1: "the final
    hidden vectors corresponding to the mask tokens are fed into an output
    softmax over the vocabulary"; the original code ties it to the input
    embeddings), `b` a per-token output bias.

    | sublayer / weight                 | Hugging Face name                         |
    |-----------------------------------|-------------------------------------------|
    | `transform_dense`                 | `cls.predictions.transform.dense`         |
    | `transform_layer_norm`            | `cls.predictions.transform.LayerNorm`     |
    | `bias` (variable of this layer)   | `cls.predictions.bias`                    |
    | `token_embedding` (shared)        | `bert.embeddings.word_embeddings`         |

    The embedding is passed at construction (like KerasHub's `MaskedLMHead`)
    and is not part of `get_config`: the task models (`kzoo.BertPretrainer`,
    `kzoo.BertMaskedLM`) re-supply `backbone.token_embedding` when rebuilt.
    A head made by `from_config` alone raises a `ValueError` when called;
    pass `from_config({**config, "token_embedding": embedding})` instead.

    Args:
        token_embedding: the backbone's `TokenEmbedding` (a
            `keras.layers.ReversibleEmbedding`), `backbone.token_embedding`.
        activation: the transform's activation, the backbone's (exact "gelu").
        layer_norm_epsilon: the backbone's LayerNorm epsilon (1e-12).
        kernel_initializer: for `transform_dense` (BERT: truncated normal 0.02).
        bias_initializer: for the biases.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        sequence_output: the backbone's `(batch, sequence_length, H)` output.
        mask_positions: int `(batch, P)` positions to predict; padding slots
            may hold any valid position (0) and get weight 0 in the loss.
            `None` when `sequence_output` holds only those positions already,
            `(batch, P, H)` (as `BertPretrainer` computes them).

    Returns:
        `(batch, P, vocabulary_size)` logits in the layer's compute dtype.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32)
    >>> head = BertMaskedLMHead(token_embedding=backbone.token_embedding)
    >>> sequence_output = np.random.normal(size=(2, 6, 16)).astype("float32")
    >>> tuple(head(sequence_output, np.array([[1, 4], [2, 0]])).shape)
    (2, 2, 100)
    """

    def __init__(
        self,
        token_embedding=None,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer=None,
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self._activation_fn = get_activation(activation)
        self.transform_dense = None
        self.transform_layer_norm = None

    def build(self, sequence_output_shape, mask_positions_shape=None):
        if self.token_embedding is None:
            raise ValueError(
                "BertMaskedLMHead has no `token_embedding`: the embedding is shared with "
                "the backbone and not saved in the head's config. Pass "
                "`token_embedding=backbone.token_embedding` (kzoo.BertPretrainer and "
                "kzoo.BertMaskedLM do this for you)."
            )
        vocabulary_size = self.token_embedding.input_dim
        hidden_dim = self.token_embedding.output_dim
        self.transform_dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.transform_dense.build((None, None, sequence_output_shape[-1]))
        self.transform_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="transform_layer_norm"
        )
        self.transform_layer_norm.build((None, None, hidden_dim))
        if not self.token_embedding.built:
            self.token_embedding.build()
        self.bias = self.add_weight(
            name="bias",
            shape=(vocabulary_size,),
            initializer=clone_initializer(self.bias_initializer),
        )

    def call(self, sequence_output, mask_positions=None):
        h = sequence_output  # (B, P, H) when already gathered
        if mask_positions is not None:
            check_mask_positions(mask_positions, sequence_output.shape[1])
            h = gather_positions(sequence_output, mask_positions)  # (B, P, H)
        h = self.transform_layer_norm(self._activation_fn(self.transform_dense(h)))
        logits = self.token_embedding(h, reverse=True)  # h W_e^T: (B, P, V)
        return ops.cast(logits, self.compute_dtype) + self.bias

    def compute_output_shape(self, sequence_output_shape, mask_positions_shape=None):
        rows = sequence_output_shape[:-1] if mask_positions_shape is None else mask_positions_shape
        return tuple(rows) + (self.token_embedding.input_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
