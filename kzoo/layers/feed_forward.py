"""Position-wise feed-forward network, "Attention Is All You Need" eq. 2."""

import keras
from keras import ops

from kzoo.layers.initializers import clone_initializer

ACTIVATIONS = {
    # The Transformer paper's eq. 2: max(0, x W1 + b1).
    "relu": ops.relu,
    # BERT: exact erf GELU (Hugging Face `hidden_act="gelu"`, the released
    # google-research checkpoints).
    "gelu": lambda x: ops.gelu(x, approximate=False),
    # The tanh approximation (KerasHub's BERT, HF "gelu_new"/"gelu_pytorch_tanh").
    "gelu_approximate": lambda x: ops.gelu(x, approximate=True),
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
