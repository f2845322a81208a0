"""The Transformer encoder-decoder of "Attention Is All You Need" (Vaswani et
al., 2017), sec. 3 (Figure 1), with the step-by-step decoding of sec. 6.1."""

import math
import types

import keras
import numpy as np
from keras import ops

from kzoo.backend_checks import check_ids_in_range, check_positions_fit
from kzoo.data import task_inputs
from kzoo.fast_paths import CompileDefaults, inference_function
from kzoo.layers import (
    Dropout,
    PositionEmbedding,
    SinusoidalPositionEncoding,
    TokenEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from kzoo.models.functional_backbone import FunctionalBackbone

INPUT_NAMES = ("encoder_token_ids", "decoder_token_ids")
POSITION_ENCODINGS = ("sinusoidal", "learned")
# Sec. 6.1: "maximum output length to input length + 50".
EXTRA_OUTPUT_LENGTH = 50


def embed(layers, token_ids, side, start_index=0, training=None):
    """`Dropout(sqrt(d_model) · E[token_ids] + PE)` for `side` "encoder" or
    "decoder" (sec. 3.4: embeddings scaled by sqrt(d_model); sec. 3.5: position
    encodings added; sec. 5.4: dropout on the sums)."""
    tokens = layers.token_embedding(token_ids)  # (B, T, d_model), the shared matrix
    tokens = tokens * math.sqrt(layers.token_embedding.output_dim)
    positions = getattr(layers, f"{side}_position_embedding")(tokens, start_index=start_index)
    return getattr(layers, f"{side}_embeddings_dropout")(tokens + positions, training=training)


def encode(layers, encoder_token_ids, padding_id, training=None):
    """The encoder stack (sec. 3.1): memory `(B, S, d_model)`."""
    padding_mask = ops.not_equal(encoder_token_ids, padding_id)
    x = embed(layers, encoder_token_ids, "encoder", training=training)
    for layer in layers.encoder_layers:
        x = layer(x, padding_mask=padding_mask, training=training)
    return x


def decode(layers, decoder_token_ids, memory, encoder_token_ids, padding_id, training=None):
    """The decoder stack (sec. 3.1) and the tied pre-softmax projection (sec.
    3.4): float32 logits `(B, T, vocabulary_size)`."""
    x = embed(layers, decoder_token_ids, "decoder", training=training)
    for layer in layers.decoder_layers:
        x = layer(
            x,
            memory,
            decoder_padding_mask=ops.not_equal(decoder_token_ids, padding_id),
            encoder_padding_mask=ops.not_equal(encoder_token_ids, padding_id),
            training=training,
        )
    return vocabulary_logits(layers, x)


def vocabulary_logits(layers, x):
    """`x W_e^T` with the embedding matrix (sec. 3.4), in float32 for the softmax."""
    return ops.cast(layers.token_embedding(x, reverse=True), "float32")


@keras.saving.register_keras_serializable(package="kzoo")
class Transformer(CompileDefaults, FunctionalBackbone, keras.Model):
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
        vocabulary_size: size of the shared source/target vocabulary (37000
            BPE tokens for WMT 2014 English-German, sec. 5.1).
        num_layers: N.
        hidden_dim: d_model.
        intermediate_dim: d_ff.
        num_heads: h.
        key_dim: d_k, or None for d_model / h.
        value_dim: d_v, or None for d_k.
        dropout: P_drop.
        label_smoothing: ε_ls of the default loss (`compile()`, sec. 5.4).
        position_encoding: "sinusoidal" (sec. 3.5) or "learned" (Table 3 row E).
        max_sequence_length: longest source or target sequence; the size of
            the learned position tables.
        activation: the feed-forward activation (ReLU, eq. 2).
        layer_norm_epsilon: LayerNorm epsilon (1e-6 as in tensor2tensor).
        padding_id: id of padding tokens (masked, ignored by the loss).
        start_id: id of the start token that begins every decoder input.
        end_id: id of the end token that ends every target.
        dtype: a dtype or `keras.DTypePolicy` (e.g. "mixed_bfloat16"); the
            logits are float32 in every policy.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: a dict with `encoder_token_ids` `(batch, source_length)` and
            `decoder_token_ids` `(batch, target_length)`, integer ids.
        training: whether dropout is active.

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

    config_fields = (
        "vocabulary_size",
        "num_layers",
        "hidden_dim",
        "intermediate_dim",
        "num_heads",
        "key_dim",
        "value_dim",
        "dropout",
        "label_smoothing",
        "position_encoding",
        "max_sequence_length",
        "activation",
        "layer_norm_epsilon",
        "padding_id",
        "start_id",
        "end_id",
    )

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
        check_config(vocabulary_size, hidden_dim, num_heads, key_dim, position_encoding,
                     padding_id=padding_id, start_id=start_id, end_id=end_id)

        # === Layers ===
        # Built before `keras.Model.__init__` (which needs the graph), so they
        # live in a namespace first and become attributes afterwards.
        layers = types.SimpleNamespace()
        layers.token_embedding = TokenEmbedding(
            vocabulary_size,
            hidden_dim,
            # N(0, d_model^-0.5): unit variance after the sqrt(d_model) scaling
            # (tensor2tensor's shared embedding and softmax weights).
            embeddings_initializer=keras.initializers.RandomNormal(stddev=hidden_dim**-0.5),
            dtype=dtype,
            name="token_embedding",
        )
        for side in ("encoder", "decoder"):
            setattr(layers, f"{side}_position_embedding", position_layer(
                position_encoding, max_sequence_length, hidden_dim, dtype, f"{side}_position_embedding"
            ))
            setattr(layers, f"{side}_embeddings_dropout", Dropout(
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
        layers.encoder_layers = [
            TransformerEncoderBlock(**block_arguments, name=f"encoder_layer_{i}")
            for i in range(num_layers)
        ]
        layers.decoder_layers = [
            TransformerDecoderBlock(**block_arguments, name=f"decoder_layer_{i}")
            for i in range(num_layers)
        ]

        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        memory = encode(layers, inputs["encoder_token_ids"], padding_id)
        logits = decode(layers, inputs["decoder_token_ids"], memory, inputs["encoder_token_ids"], padding_id)
        super().__init__(inputs=inputs, outputs=logits, dtype=dtype, **kwargs)
        self._adopt(layers, dtype, locals())

    # === Forward pass ===

    def __call__(self, inputs, *args, **kwargs):
        return super().__call__(standardize_inputs(inputs), *args, **kwargs)

    def call(self, inputs, training=None, mask=None):
        # Checked here: JAX's compiled steps reach `call` through
        # `stateless_call`, bypassing `__call__`.
        inputs = standardize_inputs(inputs)
        for name in INPUT_NAMES:
            self._check_token_ids(inputs[name], name)
        return super().call(inputs, training=training, mask=mask)

    def encode(self, encoder_token_ids, training=False):
        """The encoder stack alone (sec. 3.1): the memory the decoder attends to.

        Args:
            encoder_token_ids: `(batch, source_length)` ids, 0 for padding.
            training: whether dropout is active.

        Returns:
            `(batch, source_length, hidden_dim)`.

        Example:

        >>> import numpy as np
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> tuple(model.encode(np.array([[5, 6, 3, 0]])).shape)
        (1, 4, 8)
        """
        self._check_token_ids(encoder_token_ids, "encoder_token_ids")
        return encode(self, encoder_token_ids, self.padding_id, training)

    def decode(self, decoder_token_ids, memory, encoder_token_ids, training=False):
        """The decoder stack and output projection over a whole target prefix
        (sec. 3.1, 3.4), given the encoder's `memory`.

        Args:
            decoder_token_ids: `(batch, target_length)`, starting with `start_id`.
            memory: `(batch, source_length, hidden_dim)`, from `encode`.
            encoder_token_ids: the source ids (their padding is masked).
            training: whether dropout is active.

        Returns:
            float32 logits `(batch, target_length, vocabulary_size)`.

        Example:

        >>> import numpy as np
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> source = np.array([[5, 6, 3, 0]])
        >>> logits = model.decode(np.array([[2, 7]]), model.encode(source), source)
        >>> tuple(logits.shape)
        (1, 2, 20)
        """
        self._check_token_ids(decoder_token_ids, "decoder_token_ids")
        return decode(self, decoder_token_ids, memory, encoder_token_ids, self.padding_id, training)

    # === Step-by-step decoding (sec. 6.1) ===

    def initial_cache(self, encoder_token_ids, max_length):
        """Encodes the source once and prepares the decoder's key/value caches.

        Args:
            encoder_token_ids: `(batch, source_length)` ids.
            max_length: the number of decoder positions the cache holds (an int).

        Returns:
            A flat dict of tensors, each with leading dimension batch:
            `encoder_padding_mask` `(batch, source_length)` (int32, 1 for real
            tokens); per decoder layer `i`, the encoder-decoder attention's
            keys and values `cross_key_{i}` / `cross_value_{i}`
            `(batch, source_length, h, d_k | d_v)`, computed once, and the
            self-attention caches `self_key_{i}` / `self_value_{i}`
            `(batch, max_length, h, d_k | d_v)`, zeros.

        Example:

        >>> import numpy as np
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> cache = model.initial_cache(np.array([[5, 6, 3, 0]]), max_length=6)
        >>> sorted(cache)
        ['cross_key_0', 'cross_value_0', 'encoder_padding_mask', 'self_key_0', 'self_value_0']
        >>> tuple(cache["cross_key_0"].shape), tuple(cache["self_key_0"].shape)
        ((1, 4, 2, 4), (1, 6, 2, 4))
        """
        check_positions_fit(0, max_length, self.max_sequence_length, "decoder_token_ids")
        encoder_token_ids = ops.convert_to_tensor(encoder_token_ids, "int32")
        memory = self.encode(encoder_token_ids)
        batch_size = ops.shape(encoder_token_ids)[0]
        cache = {
            "encoder_padding_mask": ops.cast(ops.not_equal(encoder_token_ids, self.padding_id), "int32")
        }
        for i, layer in enumerate(self.decoder_layers):
            attention = layer.self_attention
            cache[f"cross_key_{i}"], cache[f"cross_value_{i}"] = (
                layer.cross_attention.compute_key_value(memory)
            )
            for part, head_dim in (("key", attention.key_dim), ("value", attention.value_dim)):
                cache[f"self_{part}_{i}"] = ops.zeros(
                    (batch_size, max_length, attention.num_heads, head_dim), self.compute_dtype
                )
        return cache

    def next_token_logits(self, token_ids, cache, index):
        """One decoder step with the key/value cache: the logits for position
        `index + 1` given the tokens at positions `0 .. index` (sec. 6.1).

        Uses only `keras.ops`, so it runs inside `ops.while_loop` and compiled
        functions on every backend (the signature `kzoo`'s beam and greedy
        search consume).

        Args:
            token_ids: `(batch,)` the tokens at position `index`.
            cache: the dict from `initial_cache` (or the previous step).
            index: the position of `token_ids`, a scalar int or tensor.

        Returns:
            `(logits, cache)`: float32 `(batch, vocabulary_size)` and the cache
            with this step's self-attention keys and values written at `index`.

        Example:

        >>> import numpy as np
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2, dropout=0.0)
        >>> source = np.array([[5, 6, 3, 0]])
        >>> cache = model.initial_cache(source, max_length=2)
        >>> _, cache = model.next_token_logits(np.array([2]), cache, 0)
        >>> step, cache = model.next_token_logits(np.array([7]), cache, 1)
        >>> full = model({"encoder_token_ids": source, "decoder_token_ids": np.array([[2, 7]])})
        >>> bool(np.allclose(ops.convert_to_numpy(step), ops.convert_to_numpy(full)[:, 1], atol=1e-5))
        True
        """
        x = embed(self, ops.expand_dims(token_ids, 1), "decoder", start_index=index)  # (B, 1, d)
        cache = dict(cache)
        for i, layer in enumerate(self.decoder_layers):
            x, (cache[f"self_key_{i}"], cache[f"self_value_{i}"]) = layer(
                x,
                encoder_padding_mask=cache["encoder_padding_mask"],
                self_attention_cache=(cache[f"self_key_{i}"], cache[f"self_value_{i}"]),
                self_attention_cache_update_index=index,
                cross_attention_cache=(cache[f"cross_key_{i}"], cache[f"cross_value_{i}"]),
            )
        return vocabulary_logits(self, x)[:, 0, :], cache

    def generate(self, encoder_token_ids, beam_size=4, length_penalty=0.6, max_length=None):
        """Translates: beam search with the GNMT length penalty (sec. 6.1: beam
        size 4, α = 0.6, at most input length + 50 tokens, early stop), or
        greedy decoding with `beam_size=1`.

        Args:
            encoder_token_ids: `(batch, source_length)` source ids, 0 for padding.
            beam_size: beams per example; 1 is greedy search.
            length_penalty: α of `((5 + |Y|) / 6)^α`.
            max_length: the most tokens generated per example. None: each
                row's number of non-padding source tokens + 50 (sec. 6.1), in a
                buffer of the padded source length + 50 (at most
                `max_sequence_length`, which is the buffer when the source
                length is unknown at trace time).

        Returns:
            int32 `(batch, max_length)`: the tokens after the start token, the
            end token included, then padding.

        Example:

        >>> import numpy as np
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> tokens = model.generate(np.array([[5, 6, 3, 0], [7, 3, 0, 0]]), beam_size=2, max_length=5)
        >>> tuple(tokens.shape)  # without max_length: (2, 54), padded source length 4 + 50
        (2, 5)
        """
        encoder_token_ids = ops.convert_to_tensor(encoder_token_ids, "int32")
        self._check_token_ids(encoder_token_ids, "encoder_token_ids")
        if beam_size < 1:
            raise ValueError(f"beam_size must be at least 1 (1 is greedy search); got {beam_size}.")
        limit_by_source = max_length is None
        if limit_by_source:
            # The output buffer needs a static size: the whole position table
            # when the source length is unknown at trace time (a TensorFlow
            # graph with a `None` length). Each row still stops at its own limit.
            source_length = encoder_token_ids.shape[1]
            buffer_length = self.max_sequence_length if source_length is None else source_length + EXTRA_OUTPUT_LENGTH
            max_length = min(buffer_length, self.max_sequence_length)
        check_positions_fit(0, max_length, self.max_sequence_length, "decoder_token_ids")
        if "_inference_search" not in self.__dict__:  # not a tracked attribute
            self.__dict__["_inference_search"] = inference_function(self._search)
        return self._inference_search(encoder_token_ids, beam_size, length_penalty, max_length, limit_by_source)

    def _search(self, encoder_token_ids, beam_size, length_penalty, max_length, limit_by_source):
        """`generate` after its checks: encode once, then search (sec. 6.1)."""
        from kzoo.models.transformer.beam_search import beam_search, greedy_search  # noqa: PLC0415

        length_limits = None
        if limit_by_source:
            source_lengths = ops.sum(ops.cast(ops.not_equal(encoder_token_ids, self.padding_id), "int32"), axis=1)
            length_limits = ops.minimum(source_lengths + EXTRA_OUTPUT_LENGTH, max_length)
        cache = self.initial_cache(encoder_token_ids, max_length)
        start_ids = ops.full((ops.shape(encoder_token_ids)[0],), self.start_id, "int32")
        search_arguments = dict(
            end_id=self.end_id, padding_id=self.padding_id, max_length=max_length, length_limits=length_limits
        )
        if beam_size == 1:
            return greedy_search(self.next_token_logits, cache, start_ids, **search_arguments)
        return beam_search(
            self.next_token_logits, cache, start_ids,
            beam_size=beam_size, length_penalty=length_penalty, **search_arguments,
        )

    def _check_token_ids(self, token_ids, name):
        check_ids_in_range(token_ids, self.vocabulary_size, name)
        shape = getattr(token_ids, "shape", np.shape(token_ids))
        length = shape[-1] if len(shape) else None
        if isinstance(length, int):  # static (eager, or compiled on JAX and torch)
            check_positions_fit(0, length, self.max_sequence_length, name)

    # === Training recipe (sec. 5.3, 5.4) ===

    def fit(self, x=None, y=None, *args, **kwargs):
        """`keras.Model.fit`; a `tf.data.Dataset` (which shuffles itself) is not
        passed Keras' default `shuffle=True`, which would only warn that it is ignored."""
        return super().fit(x, y, *args, **task_inputs.fit_keywords_for(x, args, kwargs))

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
        from kzoo.models.transformer.transformer_loss import (  # noqa: PLC0415
            LabelSmoothedCrossEntropy,
            MaskedAccuracy,
            TokenPerplexity,
        )
        from kzoo.models.transformer.transformer_optimizer import transformer_optimizer  # noqa: PLC0415

        if optimizer is None:
            optimizer = transformer_optimizer(self.hidden_dim)
        if loss == "auto":
            loss = LabelSmoothedCrossEntropy(self.label_smoothing, self.padding_id)
        if metrics == "auto":
            metrics = [MaskedAccuracy(self.padding_id), TokenPerplexity(self.padding_id)]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def compile_from_config(self, config):
        # `.keras` loading: Keras skips a custom `compile` unless asked here.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)


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


def check_config(vocabulary_size, hidden_dim, num_heads, key_dim, position_encoding, **special_ids):
    """`ValueError`s for configurations the model cannot build (sec. 3.2.2:
    d_k = d_model / h unless given)."""
    if position_encoding not in POSITION_ENCODINGS:
        raise ValueError(
            f"Unknown position_encoding {position_encoding!r}: use 'sinusoidal' (sec. 3.5) "
            "or 'learned' (Table 3 row E)."
        )
    if key_dim is None and hidden_dim % num_heads:
        raise ValueError(
            f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}, so "
            "key_dim = hidden_dim / num_heads is undefined. Choose a number of heads that "
            "divides hidden_dim, or pass key_dim (d_k) explicitly (Table 3 row B)."
        )
    for name, value in special_ids.items():
        if not 0 <= value < vocabulary_size:
            raise ValueError(
                f"{name}={value} is not a token id of the {vocabulary_size}-token vocabulary; "
                "kzoo's convention is 0 padding, 1 unknown, 2 start, 3 end."
            )


def standardize_inputs(inputs):
    """The inputs dict with lists made arrays, or a `ValueError` naming the keys."""
    if not isinstance(inputs, dict) or set(inputs) != set(INPUT_NAMES):
        got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(
            f"Transformer takes a dict with keys {list(INPUT_NAMES)} (source and target "
            f"token ids, each (batch, length)); got {got}."
        )
    return {
        name: np.asarray(value) if isinstance(value, (list, tuple)) else value
        for name, value in inputs.items()
    }
