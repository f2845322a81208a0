"""What the encoder and decoder blocks share: the position-wise feed-forward
network (eq. 2), the residual sub-layer wrapper of "Attention Is All You
Need" sec. 3.1 and the blocks' common settings."""

import functools
import inspect

import keras
from keras import ops

from kzoo.layers.dropout import Dropout
from kzoo.layers.initializers import clone_initializer
from kzoo.layers.multi_head_attention import MultiHeadAttention


ACTIVATIONS = {
    # The Transformer paper's eq. 2: max(0, x W1 + b1).
    "relu": ops.relu,
    # BERT: exact erf GELU (Hugging Face `hidden_act="gelu"`, the released
    # google-research checkpoints).
    "gelu": functools.partial(ops.gelu, approximate=False),
    # The tanh approximation (KerasHub's BERT, HF "gelu_new"/"gelu_pytorch_tanh").
    "gelu_approximate": functools.partial(ops.gelu, approximate=True),
}


def get_activation(name):
    """Looks up one of the paper activations by name: "relu", "gelu", "gelu_approximate".

    "gelu" is the exact erf form; "gelu_approximate" the tanh approximation.
    They differ by up to ~5e-4 per element, enough to break checkpoint parity,
    so kzoo never substitutes one for the other.

    Args:
        name: str. `"relu"`, `"gelu"` or `"gelu_approximate"`.

    Returns:
        callable. The activation function.

    Example:

    >>> import numpy as np
    >>> float(ops.convert_to_numpy(get_activation("gelu")(np.float32(1.0))))  # doctest: +ELLIPSIS
    0.841...
    """
    if name not in ACTIVATIONS:
        raise ValueError(
            f"Unknown activation {name!r}. kzoo supports {sorted(ACTIVATIONS)}: "
            '"gelu" is the exact erf GELU, "gelu_approximate" the tanh approximation.'
        )
    return ACTIVATIONS[name]


@keras.saving.register_keras_serializable(package="kzoo")
class FeedForward(keras.layers.Layer):
    """`FFN(x) = act(x W1 + b1) W2 + b2`, applied to each position (eq. 2, sec. 3.3).

    | argument           | paper symbol |
    |--------------------|--------------|
    | `intermediate_dim` | d_ff         |
    | output size        | d_model (the input's last dimension) |

    Args:
        intermediate_dim: int. The inner size d_ff (2048 in the Transformer
            base model, 4H in BERT).
        activation: str. "relu" (Transformer), "gelu" (exact, BERT) or
            "gelu_approximate" (tanh approximation). Defaults to `"relu"`.
        kernel_initializer: str or `keras.initializers.Initializer`. The
            initializer of W1 and W2. Defaults to `"glorot_uniform"`.
        bias_initializer: str or `keras.initializers.Initializer`. The
            initializer of b1 and b2. Defaults to `"zeros"`.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor of shape `(batch, sequence_length, d_model)`.
            The hidden states.

    Returns:
        `(batch, sequence_length, d_model)`.

    Example:

    >>> import numpy as np
    >>> ffn = FeedForward(intermediate_dim=64, activation="gelu")
    >>> tuple(ffn(np.ones((2, 3, 16), "float32")).shape)
    (2, 3, 16)
    """

    def __init__(
        self,
        intermediate_dim,
        activation="relu",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.activation_fn = get_activation(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def _dense(self, units, name):
        return keras.layers.Dense(
            units,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, input_shape):
        self.intermediate_dense = self._dense(self.intermediate_dim, "intermediate_dense")
        self.intermediate_dense.build(input_shape)
        self.output_dense = self._dense(input_shape[-1], "output_dense")
        self.output_dense.build(tuple(input_shape[:-1]) + (self.intermediate_dim,))
        self.built = True

    def call(self, inputs):
        return self.output_dense(self.activation_fn(self.intermediate_dense(inputs)))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


def sublayer_connection(x, sublayer, layer_norm, dropout, normalize_first, training=None):
    """One residual sub-layer: `LayerNorm(x + Dropout(Sublayer(x)))` (sec. 3.1, post-LN).

    With `normalize_first=True` it is the pre-LN variant
    `x + Dropout(Sublayer(LayerNorm(x)))` (tensor2tensor v2, most modern
    models), which needs a final LayerNorm after the stack. Dropout on each
    sub-layer output before the residual add is the paper's residual dropout
    (sec. 5.4).

    Returns:
        `(y, extras)`: the block's new hidden states and whatever the sub-layer
        returned after its output (attention scores, caches).
    """
    outputs = sublayer(layer_norm(x) if normalize_first else x)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    y = x + dropout(outputs[0], training=training)
    if not normalize_first:
        y = layer_norm(y)
    return y, outputs[1:]


class TransformerBlock(keras.layers.Layer):
    """Settings shared by `TransformerEncoderBlock` and `TransformerDecoderBlock`.

    | argument           | paper symbol                          |
    |--------------------|---------------------------------------|
    | `num_heads`        | h                                     |
    | `key_dim`          | d_k (default d_model / h)             |
    | `value_dim`        | d_v (default d_k)                     |
    | `intermediate_dim` | d_ff                                  |
    | `dropout`          | P_drop (residual dropout, sec. 5.4)   |

    Args:
        num_heads: int. The number of attention heads, h.
        intermediate_dim: int. The feed-forward inner size, d_ff.
        key_dim: int or None. The query/key size per head, d_k. Defaults to
            `None`: d_model / h.
        value_dim: int or None. The value size per head, d_v. Defaults to
            `None`: `key_dim`.
        dropout: float. P_drop, applied to every sub-layer output before the
            residual add. Defaults to `0.1`.
        attention_dropout: float. Dropout on attention probabilities; the
            Transformer paper has none, BERT uses 0.1. Defaults to `0.0`.
        activation: str. The feed-forward activation: "relu", "gelu" or
            "gelu_approximate". Defaults to `"relu"`.
        layer_norm_epsilon: float. The LayerNorm epsilon (BERT: 1e-12).
            Defaults to `1e-6`, as in tensor2tensor.
        normalize_first: bool. Pre-LN instead of the paper's post-LN.
            Defaults to `False`.
        kernel_initializer: str, `keras.initializers.Initializer` or None. The
            initializer of every kernel. Defaults to `None`: Glorot-uniform,
            at gain 1/sqrt(2) for W^Q, W^K and W^V (see `MultiHeadAttention`).
        bias_initializer: str or `keras.initializers.Initializer`. The
            initializer of every bias. Defaults to `"zeros"`.
        **kwargs: `keras.layers.Layer` arguments.

    Example (the subclasses take exactly these arguments):

    >>> from kzoo.layers import TransformerEncoderBlock
    >>> block = TransformerEncoderBlock(num_heads=8, intermediate_dim=2048, dropout=0.1)
    >>> block.get_config()["activation"], block.get_config()["normalize_first"]
    ('relu', False)
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        key_dim=None,
        value_dim=None,
        dropout=0.1,
        attention_dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-6,
        normalize_first=False,
        kernel_initializer=None,
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.normalize_first = normalize_first
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = False

    # Call arguments with which `call` returns more than the hidden states, or
    # fewer rows: set (not None or False), Keras traces `call` for the outputs.
    _OUTPUT_CHANGING_ARGUMENTS = ("return_attention_scores",)

    def compute_output_spec(self, *args, **kwargs):
        """The outputs of a symbolic call (a functional model's construction).

        Every sub-layer outputs d_model (sec. 3.1), so the hidden states keep
        the input sequence's shape, in the layer's compute dtype: no need to
        trace `call`, which took half of a BERT backbone's construction on
        TensorFlow. A call that returns more (attention scores, caches) or
        other rows is traced by Keras as for any layer.
        """
        arguments = inspect.signature(self.call).bind(*args, **kwargs).arguments
        if self._traces_call(arguments):
            return super().compute_output_spec(*args, **kwargs)
        sequence = next(iter(arguments.values()))
        return keras.KerasTensor(sequence.shape, dtype=self.compute_dtype)

    def _traces_call(self, arguments):
        return any(
            arguments.get(name) is not None and arguments.get(name) is not False
            for name in self._OUTPUT_CHANGING_ARGUMENTS
        )

    def _initializers(self, default_kernel_initializer=None):
        """Fresh initializer objects per sub-layer (sharing one seeds them alike)."""
        kernel_initializer = self.kernel_initializer or default_kernel_initializer
        if kernel_initializer is not None:
            kernel_initializer = clone_initializer(kernel_initializer)
        return {
            "kernel_initializer": kernel_initializer,
            "bias_initializer": clone_initializer(self.bias_initializer),
        }

    def _head_dims(self, hidden_dim):
        key_dim = self.key_dim
        if key_dim is None:
            if hidden_dim % self.num_heads:
                raise ValueError(
                    f"`{self.name}`: d_model={hidden_dim} is not divisible by "
                    f"num_heads={self.num_heads}. Pass `key_dim` (d_k) explicitly "
                    "or choose a number of heads that divides the hidden size."
                )
            key_dim = hidden_dim // self.num_heads
        return key_dim, self.value_dim or key_dim

    def _attention(self, hidden_dim, name):
        key_dim, value_dim = self._head_dims(hidden_dim)
        return MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=key_dim,
            value_dim=value_dim,
            output_dim=hidden_dim,
            dropout=self.attention_dropout,
            dtype=self.dtype_policy,
            name=name,
            **self._initializers(),
        )

    def _residual_parts(self, name, hidden_shape):
        """The LayerNorm and residual dropout around one sub-layer."""
        layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=f"{name}_layer_norm"
        )
        layer_norm.build(hidden_shape)
        dropout = Dropout(self.dropout, dtype=self.dtype_policy, name=f"{name}_dropout")
        return layer_norm, dropout

    def _feed_forward(self):
        return FeedForward(
            self.intermediate_dim,
            activation=self.activation,
            dtype=self.dtype_policy,
            name="feed_forward",
            **self._initializers(keras.initializers.GlorotUniform()),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "normalize_first": self.normalize_first,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
