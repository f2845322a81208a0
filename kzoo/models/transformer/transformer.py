"""The Transformer encoder-decoder of "Attention Is All You Need" (Vaswani et
al., 2017), sec. 3 (Figure 1), with its training recipe (sec. 5.3, 5.4).

One forward definition: `embed`, `encode`, `decode` and `vocabulary_logits`
build the functional graph in `__init__` and serve every other path, the
step-by-step decoding of `kzoo.models.transformer.transformer_generation` included.
"""

import math

import keras
import numpy as np
from keras import ops

from kzoo.backend import IdsLimit, LengthLimit, check_ids_in_range, check_positions_fit
from kzoo.layers import (
    Dropout,
    PositionEmbedding,
    SinusoidalPositionEncoding,
    TokenEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from kzoo.models.backbone import Backbone
from kzoo.models.input_checks import check_ints
from kzoo.models.transformer.transformer_generation import TransformerGeneration
from kzoo.models.transformer.transformer_inputs import INPUT_NAMES, check_config, standardize_inputs
from kzoo.models.transformer.transformer_loss import (
    LabelSmoothedCrossEntropy, MaskedAccuracy, TokenPerplexity, token_weights,
)
from kzoo.models.transformer.transformer_optimizer import transformer_optimizer



@keras.saving.register_keras_serializable(package="kzoo")
class Transformer(TransformerGeneration, Backbone):
    """The Transformer: a post-LN encoder-decoder for translation (sec. 3, Figure 1).

    Source and target share one vocabulary and one embedding matrix, which is
    also the pre-softmax projection (three-way weight tying, sec. 3.4), scaled
    by sqrt(d_model) on input. Positions are fixed sinusoids (sec. 3.5,
    interleaved sin/cos as in the paper) or learned tables (Table 3 row E: one
    table for the encoder, one for the decoder). Dropout P_drop is applied to
    the embedding + position sums and to every sub-layer output before its
    residual add (sec. 5.4). The encoder masks padding keys; the decoder masks
    padding and future positions (sec. 3.2.3).

    | argument           | paper symbol                             |
    |--------------------|------------------------------------------|
    | `num_layers`       | N (each of the encoder and decoder)      |
    | `hidden_dim`       | d_model                                  |
    | `intermediate_dim` | d_ff                                     |
    | `num_heads`        | h                                        |
    | `key_dim`          | d_k (default d_model / h)                |
    | `value_dim`        | d_v (default d_k)                        |
    | `dropout`          | P_drop                                   |
    | `label_smoothing`  | ε_ls                                     |

    Token ids follow one convention: 0 padding, 1 unknown, 2 start (BOS, the
    first decoder input), 3 end (EOS). Training pairs are
    `x = {"encoder_token_ids": source, "decoder_token_ids": [2] + target}` and
    labels `y = target + [3]`, i.e. `y[:, t] = decoder_token_ids[:, t + 1]`,
    padded with 0 (ignored by the default loss).

    Args:
        vocabulary_size: int. The shared source/target vocabulary (37000 BPE
            tokens for WMT 2014 English-German, sec. 5.1). Defaults to `37000`.
        num_layers: int. N. Defaults to `6`.
        hidden_dim: int. d_model. Defaults to `512`.
        intermediate_dim: int. d_ff. Defaults to `2048`.
        num_heads: int. h. Defaults to `8`.
        key_dim: int or None. d_k. Defaults to `None`, d_model / h.
        value_dim: int or None. d_v. Defaults to `None`, d_k.
        dropout: float. P_drop. Defaults to `0.1`.
        label_smoothing: float. ε_ls of the default loss (`compile()`, sec.
            5.4). Defaults to `0.1`.
        position_encoding: str. `"sinusoidal"` (sec. 3.5) or `"learned"`
            (Table 3 row E). Defaults to `"sinusoidal"`.
        max_sequence_length: int. The longest source or target sequence, the
            size of the learned position tables. Defaults to `1024`.
        activation: str. The feed-forward activation (ReLU, eq. 2). Defaults to `"relu"`.
        layer_norm_epsilon: float. As in tensor2tensor. Defaults to `1e-6`.
        padding_id: int. Padding tokens (masked, ignored by the loss). Defaults to `0`.
        start_id: int. The start token of every decoder input. Defaults to `2`.
        end_id: int. The end token of every target. Defaults to `3`.
        dtype: str or `keras.DTypePolicy`. The dtype policy (e.g.
            `"mixed_bfloat16"`); the logits are float32 in every policy.
            Defaults to `None`, the global policy.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `encoder_token_ids` `(batch, source_length)` and
            `decoder_token_ids` `(batch, target_length)`, integer ids.
        training: bool. Whether dropout is active. Defaults to `None`.

    Returns:
        Logits `(batch, target_length, vocabulary_size)`, float32.

    Ids outside `[0, vocabulary_size)` and sequences longer than
    `max_sequence_length` raise a `ValueError` on every backend.

    Example:

    >>> import numpy as np
    >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
    ...                     intermediate_dim=16, num_heads=2)
    >>> logits = model({"encoder_token_ids": np.array([[5, 6, 7, 3, 0]]),
    ...                 "decoder_token_ids": np.array([[2, 8, 9]])})
    >>> tuple(logits.shape), keras.backend.standardize_dtype(logits.dtype)
    ((1, 3, 20), 'float32')
    >>> tuple(model.generate(np.array([[5, 6, 7, 3, 0]]), beam_size=1, max_length=4).shape)
    (1, 4)
    """

    def __init__(
        self,
        vocabulary_size=37000,
        num_layers=6,
        hidden_dim=512,
        intermediate_dim=2048,
        num_heads=8,
        key_dim=None,
        value_dim=None,
        dropout=0.1,
        label_smoothing=0.1,
        position_encoding="sinusoidal",
        max_sequence_length=1024,
        activation="relu",
        layer_norm_epsilon=1e-6,
        padding_id=0,
        start_id=2,
        end_id=3,
        dtype=None,
        **kwargs,
    ):
        check_ints("Transformer", vocabulary_size=vocabulary_size, hidden_dim=hidden_dim,
                   intermediate_dim=intermediate_dim, num_heads=num_heads, max_sequence_length=max_sequence_length)
        check_ints("Transformer", minimum=0, num_layers=num_layers, padding_id=padding_id, start_id=start_id,
                   end_id=end_id)
        head_dims = {"key_dim": key_dim, "value_dim": value_dim}
        check_ints("Transformer", **{name: value for name, value in head_dims.items() if value is not None})
        check_config(vocabulary_size, hidden_dim, num_heads, key_dim, position_encoding,
                     padding_id=padding_id, start_id=start_id, end_id=end_id)

        # === Layers ===
        self.token_embedding = TokenEmbedding(
            vocabulary_size,
            hidden_dim,
            # N(0, d_model^-0.5): unit variance after the sqrt(d_model) scaling
            # (tensor2tensor's shared embedding and softmax weights).
            embeddings_initializer=keras.initializers.RandomNormal(stddev=hidden_dim**-0.5),
            dtype=dtype,
            name="token_embedding",
        )
        for side in ("encoder", "decoder"):
            setattr(self, f"{side}_position_embedding", position_layer(
                position_encoding, max_sequence_length, hidden_dim, dtype, f"{side}_position_embedding"
            ))
            setattr(self, f"{side}_embeddings_dropout", Dropout(
                dropout, dtype=dtype, name=f"{side}_embeddings_dropout"
            ))
        block_arguments = dict(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            key_dim=key_dim,
            value_dim=value_dim,
            dropout=dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=dtype,
        )
        self.encoder_layers = [
            TransformerEncoderBlock(**block_arguments, name=f"encoder_layer_{i}")
            for i in range(num_layers)
        ]
        self.decoder_layers = [
            TransformerDecoderBlock(**block_arguments, name=f"decoder_layer_{i}")
            for i in range(num_layers)
        ]

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.label_smoothing = label_smoothing
        self.position_encoding = position_encoding
        self.max_sequence_length = max_sequence_length
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.padding_id = padding_id
        self.start_id = start_id
        self.end_id = end_id

        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        memory = self.encode(inputs["encoder_token_ids"], training=None)
        logits = self.decode(inputs["decoder_token_ids"], memory, inputs["encoder_token_ids"], training=None)
        super().__init__(inputs, logits, dtype=dtype, **kwargs)

    # === Forward pass (sec. 3) ===

    def __call__(self, inputs, *args, **kwargs):
        return super().__call__(self.complete_inputs(inputs), *args, **kwargs)

    def complete_inputs(self, inputs):
        """The inputs dict with lists made arrays, checked (ids, not text;
        integers inside int32; batch sizes that agree): the checks of an eager
        call, which `fit`, `evaluate` and `predict` run on data in memory.

        Example:

        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> inputs = model.complete_inputs({"encoder_token_ids": [[5, 3]], "decoder_token_ids": [[2]]})
        >>> inputs["encoder_token_ids"].shape
        (1, 2)
        """
        return standardize_inputs(inputs, self.vocabulary_size)

    def call(self, inputs, training=None, mask=None):
        # Checked here: JAX's compiled steps reach `call` through
        # `stateless_call`, bypassing `__call__`.
        inputs = standardize_inputs(inputs)
        inputs = {name: self.check_token_ids(inputs[name], name) for name in INPUT_NAMES}
        return super().call(inputs, training=training, mask=mask)  # the graph of `__init__`

    def embed(self, token_ids, side, start_index=0, training=None):
        """`Dropout(sqrt(d_model) · E[token_ids] + PE)` (sec. 3.4: embeddings
        scaled by sqrt(d_model); sec. 3.5: position encodings added; sec. 5.4:
        dropout on the sums).

        Args:
            token_ids: int tensor of shape `(batch, length)`. The token ids.
            side: str. `"encoder"` or `"decoder"`: whose position encoding and dropout.
            start_index: int or scalar tensor. The position of the first token
                (a decoding step's index). Defaults to `0`.
            training: bool. Whether dropout is active. Defaults to `None`.

        Returns:
            `(batch, length, hidden_dim)`.

        Example:

        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> tuple(model.embed(np.array([[2, 7, 9]]), "decoder").shape)
        (1, 3, 8)
        """
        tokens = self.token_embedding(token_ids)  # (B, T, d_model), the shared matrix
        tokens = tokens * math.sqrt(self.token_embedding.output_dim)
        positions = getattr(self, f"{side}_position_embedding")(tokens, start_index=start_index)
        return getattr(self, f"{side}_embeddings_dropout")(tokens + positions, training=training)

    def encode(self, encoder_token_ids, training=False):
        """The encoder stack (sec. 3.1): the memory the decoder attends to.

        Args:
            encoder_token_ids: int tensor of shape `(batch, source_length)`. The source ids, `padding_id` for padding.
            training: bool. Whether dropout is active. Defaults to `False`.

        Returns:
            `(batch, source_length, hidden_dim)`.

        Example:

        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> tuple(model.encode(np.array([[5, 6, 3, 0]])).shape)
        (1, 4, 8)
        """
        encoder_token_ids = self.check_token_ids(encoder_token_ids, "encoder_token_ids")
        padding_mask = ops.not_equal(encoder_token_ids, self.padding_id)
        x = self.embed(encoder_token_ids, "encoder", training=training)
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=padding_mask, training=training)
        return x

    def decode(self, decoder_token_ids, memory, encoder_token_ids, training=False):
        """The decoder stack and the output projection over a whole target
        prefix (sec. 3.1, 3.4), given the encoder's `memory`.

        Args:
            decoder_token_ids: int tensor of shape `(batch, target_length)`. The target ids, from `start_id`.
            memory: float tensor of shape `(batch, source_length, hidden_dim)`. From `encode`.
            encoder_token_ids: int tensor of shape `(batch, source_length)`. The source ids (padding masked).
            training: bool. Whether dropout is active. Defaults to `False`.

        Returns:
            float32 logits `(batch, target_length, vocabulary_size)`.

        Example:

        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> source = np.array([[5, 6, 3, 0]])
        >>> tuple(model.decode(np.array([[2, 7]]), model.encode(source), source).shape)
        (1, 2, 20)
        """
        decoder_token_ids = self.check_token_ids(decoder_token_ids, "decoder_token_ids")
        x = self.embed(decoder_token_ids, "decoder", training=training)
        for layer in self.decoder_layers:
            x = layer(
                x,
                memory,
                decoder_padding_mask=ops.not_equal(decoder_token_ids, self.padding_id),
                encoder_padding_mask=ops.not_equal(encoder_token_ids, self.padding_id),
                training=training,
            )
        return self.vocabulary_logits(x)

    def vocabulary_logits(self, x):
        """`x W_e^T` with the shared embedding matrix (sec. 3.4), in float32 for the softmax.

        Args:
            x: float tensor of shape `(batch, length, hidden_dim)`. The decoder's output.

        Returns:
            float32 `(batch, length, vocabulary_size)`.

        Example:

        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> tuple(model.vocabulary_logits(np.zeros((1, 3, 8), "float32")).shape)
        (1, 3, 20)
        """
        return ops.cast(self.token_embedding(x, reverse=True), "float32")

    def input_limits(self):
        # What `check_token_ids` checks, for whole batches (`Backbone.input_limits`).
        return {
            name: [IdsLimit(self.vocabulary_size, name), LengthLimit(self.max_sequence_length, name)]
            for name in INPUT_NAMES
        }

    def check_token_ids(self, token_ids, name):
        """`ValueError`s, the same on every backend, for ids outside the
        vocabulary and sequences longer than `max_sequence_length`, wherever
        the values or the length are known (eager calls; static shapes);
        compiled steps fail with the same message (`kzoo.backend`).
        Returns `token_ids` (in a TensorFlow graph, a copy tied to the check).

        Args:
            token_ids: int tensor of shape `(batch, length)`. The token ids.
            name: str. The ids' name in the messages.

        Example:

        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2, max_sequence_length=4)
        >>> model.check_token_ids(np.array([[5, 6, 3, 0, 0]]), "encoder_token_ids")
        Traceback (most recent call last):
        ...
        ValueError: ...
        """
        token_ids = check_ids_in_range(token_ids, self.vocabulary_size, name)
        shape = getattr(token_ids, "shape", np.shape(token_ids))
        length = shape[-1] if len(shape) else None
        if isinstance(length, int):  # static (eager, or compiled on JAX and torch)
            check_positions_fit(0, length, self.max_sequence_length, name)
        return token_ids

    def export(self, path, format="tf_saved_model", preprocessor=None, **options):
        """Writes a translator for serving (`kzoo.export`): `"tf_saved_model"`
        is a TensorFlow SavedModel whose `serving_default` takes source strings
        (`text`) and returns `translation` strings, with the tokenizer and
        sec. 6.1's beam search inside the graph; it serves with TensorFlow and
        tensorflow-text alone. From JAX or PyTorch the export goes through
        TensorFlow in a new process, with the same weights.

        Args:
            path: str or os.PathLike. A new or empty directory, or an earlier SavedModel.
            format: str. A name in `kzoo.export.FORMATS`. Defaults to `"tf_saved_model"`.
            preprocessor: `kzoo.TransformerPreprocessor`. The one the model was
                trained with (required). Defaults to `None`.
            **options: `beam_size` (4), `length_penalty` (0.6), `max_length`
                (source length + 50), as for `generate`.

        Example:

        >>> import os, tempfile
        >>> import kzoo
        >>> tokenizer = kzoo.TransformerTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b"])
        >>> model = Transformer(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8,
        ...                     intermediate_dim=16, max_sequence_length=16)
        >>> path = os.path.join(tempfile.mkdtemp(), "translator")
        >>> model.export(path, preprocessor=kzoo.TransformerPreprocessor(tokenizer, 8, 8), beam_size=2)
        >>> sorted(os.listdir(path))
        ['assets', 'fingerprint.pb', 'saved_model.pb', 'variables']
        """
        from kzoo import export  # noqa: PLC0415 (kzoo.export serves the models: it comes after them)

        export.export(self, path, format=format, preprocessor=preprocessor, **options)

    # === Training recipe (sec. 5.3, 5.4) ===

    def compile(self, optimizer=None, loss="auto", metrics="auto", **kwargs):
        """Compiles with the paper's recipe unless told otherwise (sec. 5.3, 5.4).

        `optimizer=None` gives `transformer_optimizer(hidden_dim)`: Adam
        (β1 = 0.9, β2 = 0.98, ε = 1e-9) with eq. 3's schedule and 4000 warmup
        steps. `loss="auto"` is label-smoothed cross-entropy with ε_ls =
        `label_smoothing` that ignores `padding_id` labels; `metrics="auto"` is
        the accuracy and perplexity (sec. 6.2, Table 3's PPL) of real target tokens.

        Example:

        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> model.compile()
        >>> round(float(model.optimizer.beta_2), 2), type(model.loss).__name__
        (0.98, 'LabelSmoothedCrossEntropy')
        """
        if optimizer is None:
            optimizer = transformer_optimizer(self.hidden_dim)
        if loss == "auto":
            loss = LabelSmoothedCrossEntropy(self.label_smoothing, self.padding_id)
        if metrics == "auto":
            metrics = [MaskedAccuracy(self.padding_id), TokenPerplexity(self.padding_id)]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def loss_counts(self, y, sample_weight=None):
        """The (weighted) non-padding target tokens of each pair: the default
        loss's mean is over them (sec. 5.4); under gradient accumulation `fit`
        normalises over a whole group's (`kzoo.models.accumulation`)."""
        return {"tokens": ops.sum(token_weights(y, self.padding_id, sample_weight), axis=-1)}


def position_layer(position_encoding, max_sequence_length, hidden_dim, dtype, name):
    """Sinusoids (sec. 3.5) or a learned table (Table 3 row E), initialized as
    the token embeddings (fairseq's learned positions)."""
    if position_encoding == "sinusoidal":
        return SinusoidalPositionEncoding(dtype=dtype, name=name)
    return PositionEmbedding(
        max_sequence_length,
        initializer=keras.initializers.RandomNormal(stddev=hidden_dim**-0.5),
        dtype=dtype,
        name=name,
    )
