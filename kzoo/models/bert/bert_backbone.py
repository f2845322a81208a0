"""The BERT encoder, Devlin et al. 2019, sec. 3 (Figure 2 for the inputs)."""

import keras
import numpy as np
from keras import ops

from kzoo.backend import CHECKED_UPSTREAM, IdsLimit, LengthLimit
from kzoo.backend.limits import SEGMENT_ADVICE
from kzoo.layers import Dropout, PositionEmbedding, TokenEmbedding, TransformerEncoderBlock
from kzoo.layers.transformer_encoder_block import gather_positions
from kzoo.models.backbone import Backbone, arrays_from_lists, check_id_inputs, missing_token_ids
from kzoo.models.input_checks import check_ints

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")
TEXT_HINT = (
    "Pass text through the preprocessor first, backbone(kzoo.BertPreprocessor(tokenizer, "
    "sequence_length)(texts)), or use a task such as kzoo.BertClassifier, which takes text."
)


def bert_initializer():
    """BERT's truncated normal with stddev 0.02 (google-research `initializer_range`).

    Example:

    >>> bert_initializer().get_config()["stddev"]
    0.02
    """
    return keras.initializers.TruncatedNormal(stddev=0.02)


def bert_inputs(leading_shape=()):
    """BERT's inputs as `keras.Input`s (sec. 3, Figure 2): int32
    `token_ids`, `segment_ids` and `padding_mask`, each
    `(batch, *leading_shape, sequence_length)`.

    Args:
        leading_shape: tuple of int. Dimensions between the batch and the
            sequence (e.g. `(num_choices,)`). Defaults to `()`.

    Returns:
        A dict of `keras.Input`s named by their keys.

    Example:

    >>> {name: tensor.shape for name, tensor in bert_inputs().items()}["token_ids"]
    (None, None)
    """
    return {
        name: keras.Input(shape=(*leading_shape, None), dtype="int32", name=name)
        for name in INPUT_NAMES
    }


@keras.saving.register_keras_serializable(package="kzoo")
class BertBackbone(Backbone):
    """BERT: a bidirectional post-LN Transformer encoder (BERT sec. 3).

    Input representation (sec. 3, Figure 2): token (WordPiece) + segment (A/B)
    + learned position embeddings, summed, then LayerNorm and dropout. Then
    `num_layers` encoder blocks with GELU feed-forward networks of size
    `intermediate_dim` (4H in the paper) and dropout 0.1 on attention
    probabilities and sub-layer outputs. The pooled output is a tanh dense
    layer on the final `[CLS]` state (used by NSP and classification).

    | argument           | paper symbol                      |
    |--------------------|-----------------------------------|
    | `num_layers`       | L                                 |
    | `hidden_dim`       | H                                 |
    | `num_heads`        | A                                 |
    | `intermediate_dim` | 4H (the FFN size)                 |

    Args:
        vocabulary_size: int. The WordPiece vocabulary size (30522 for uncased BERT).
        num_layers: int. L, the number of encoder layers.
        num_heads: int. A, the number of attention heads.
        hidden_dim: int. H, the size of every hidden state.
        intermediate_dim: int. The feed-forward inner size, 4H in the paper.
        dropout: float. Dropout on the embeddings, attention probabilities and
            sub-layer outputs. Defaults to `0.1`.
        max_sequence_length: int. The rows of the position table, the longest
            input. Defaults to `512`.
        num_segments: int. The rows of the segment table (sentences A and B).
            Defaults to `2`.
        activation: str. The feed-forward activation: `"gelu"` (exact erf, as
            the released checkpoints) or `"gelu_approximate"` (tanh).
            Defaults to `"gelu"`.
        layer_norm_epsilon: float. The LayerNorm epsilon of google-research/bert.
            Defaults to `1e-12`.
        dtype: str or `keras.DTypePolicy`. The dtype policy (e.g.
            `"mixed_bfloat16"`). Defaults to `None`, the global policy.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `token_ids`, `segment_ids` (0 for A, 1 for B) and
            `padding_mask` (1 for real tokens), each `(batch, sequence_length)`;
            `segment_ids` defaults to zeros and `padding_mask` to ones, and a
            bare tensor is taken as `token_ids` (`complete_inputs`).
        training: bool. Whether dropout is active. Defaults to `None`.
        return_hidden_states: bool. Add `hidden_states`, the L + 1
            `(batch, sequence_length, H)` tensors (embeddings output, then
            every layer's output), for feature extraction (sec. 5.3).
            Defaults to `False`.
        return_attention_scores: bool. Add `attention_scores`, the L
            `(batch, A, sequence_length, sequence_length)` probabilities.
            Defaults to `False`.

    Returns:
        A dict with `sequence_output` `(batch, sequence_length, H)` and
        `pooled_output` `(batch, H)`, plus what was asked for.

    The forward pass is defined once, by `embed` and `encode`: `__init__`
    builds the functional graph with them, and every other path (hidden
    states, the pre-trainer's last layer at a few positions, the feature
    extractor's graph) calls them.

    Token or segment ids outside their tables, and sequences longer than
    `max_sequence_length`, raise a `ValueError` on every backend, and stop
    compiled steps with the same message (`kzoo.backend`;
    `input_limits`, checked before each step of kzoo's own `fit`).

    Example:

    >>> import numpy as np
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=64)
    >>> inputs = {
    ...     "token_ids": np.array([[2, 17, 45, 3, 0]]),
    ...     "segment_ids": np.zeros((1, 5), "int32"),
    ...     "padding_mask": np.array([[1, 1, 1, 1, 0]]),
    ... }
    >>> outputs = backbone(inputs)
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 16), (1, 16))
    >>> outputs = backbone(inputs, return_hidden_states=True)
    >>> len(outputs["hidden_states"])
    3
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        dtype=None,
        **kwargs,
    ):
        check_ints("BertBackbone", vocabulary_size=vocabulary_size, num_heads=num_heads, hidden_dim=hidden_dim,
                   intermediate_dim=intermediate_dim, max_sequence_length=max_sequence_length,
                   num_segments=num_segments)
        check_ints("BertBackbone", minimum=0, num_layers=num_layers)
        # === Layers ===
        self.token_embedding = TokenEmbedding(
            vocabulary_size,
            hidden_dim,
            embeddings_initializer=bert_initializer(),
            dtype=dtype,
            name="token_embedding",
        )
        self.segment_embedding = TokenEmbedding(
            num_segments,
            hidden_dim,
            embeddings_initializer=bert_initializer(),
            dtype=dtype,
            name="segment_embedding",
        )
        self.segment_embedding.ids_advice = SEGMENT_ADVICE
        self.position_embedding = PositionEmbedding(
            max_sequence_length,
            initializer=bert_initializer(),
            dtype=dtype,
            name="position_embedding",
        )
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm"
        )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.transformer_layers = [
            TransformerEncoderBlock(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                attention_dropout=dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=bert_initializer(),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooled_dense = keras.layers.Dense(
            hidden_dim,
            activation="tanh",
            kernel_initializer=bert_initializer(),
            dtype=dtype,
            name="pooled_dense",
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon

        # === Functional model ===
        inputs = bert_inputs()
        outputs = self.encode(self.embed(inputs), inputs["padding_mask"])
        super().__init__(inputs, outputs, dtype=dtype, **kwargs)

    # === Forward pass (sec. 3) ===

    def __call__(self, inputs, *args, **kwargs):
        # Defaults are filled before Keras checks the inputs against the graph's.
        return super().__call__(self.complete_inputs(inputs), *args, **kwargs)

    def call(self, inputs, training=None, mask=None, return_hidden_states=False, return_attention_scores=False):
        # Again here: JAX's compiled steps (`predict`, `fit`) reach `call`
        # through `stateless_call`, bypassing `__call__`.
        inputs = self.complete_inputs(inputs)
        if not (return_hidden_states or return_attention_scores):
            return super().call(inputs, training=training, mask=mask)  # the graph of `__init__`
        embeddings = self.embed(inputs, training=training)
        return self.encode(
            embeddings,
            inputs["padding_mask"],
            return_hidden_states=return_hidden_states,
            return_attention_scores=return_attention_scores,
            training=training,
        )

    def input_limits(self):
        # The checks of `embed`'s layers, for whole batches (`Backbone.input_limits`).
        return {
            "token_ids": [
                IdsLimit(self.vocabulary_size, "`token_embedding` ids"),
                LengthLimit(self.max_sequence_length, "position_embedding"),
            ],
            "segment_ids": [IdsLimit(self.num_segments, "`segment_embedding` ids", SEGMENT_ADVICE)],
        }

    def complete_inputs(self, inputs):
        """`inputs` as the dict the graph takes, with the defaults filled in.

        Args:
            inputs: dict or int tensor. A dict with `token_ids` and optionally
                `segment_ids` and `padding_mask`, or a bare `token_ids` tensor;
                lists become arrays.

        Returns:
            A dict with `token_ids`, `segment_ids` (zeros by default) and
            `padding_mask` (ones by default).

        Example:

        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> completed = backbone.complete_inputs({"token_ids": [[2, 7, 3]]})
        >>> completed["segment_ids"].tolist(), completed["padding_mask"].tolist()
        ([[0, 0, 0]], [[1, 1, 1]])
        """
        if not isinstance(inputs, dict):
            inputs = {"token_ids": inputs}
        if not CHECKED_UPSTREAM.get():  # else checked where they came in (kzoo's own steps)
            inputs = self._checked_inputs(inputs)
        token_ids = inputs["token_ids"]
        # NumPy defaults for anything not the backend's (e.g. TensorFlow
        # tensors from a preprocessor, on JAX or torch).
        native = ops.is_tensor(token_ids) or keras.backend.is_keras_tensor(token_ids)
        like = ops if native else np
        completed = {"token_ids": token_ids}
        for name, fill in (("segment_ids", like.zeros_like), ("padding_mask", like.ones_like)):
            completed[name] = inputs[name] if name in inputs else fill(token_ids)
        return completed

    def _checked_inputs(self, inputs):
        unknown = set(inputs) - set(INPUT_NAMES)
        if unknown or "token_ids" not in inputs:
            raise ValueError(
                f"BertBackbone takes a dict with keys {list(INPUT_NAMES)} (only "
                f"`token_ids` is required); got keys {sorted(inputs)}."
            )
        if inputs["token_ids"] is None:
            raise missing_token_ids("token_ids", "BertBackbone", TEXT_HINT)
        inputs = arrays_from_lists(inputs, "BertBackbone")  # None means absent: the default is filled in
        tables = {"token_ids": self.vocabulary_size, "segment_ids": self.num_segments}
        check_id_inputs(inputs, tables, "BertBackbone", TEXT_HINT)
        return inputs

    def pooled_output(self, inputs, training=None):
        """The pooled output alone, tanh(W C + b) on the final [CLS] state C
        (sec. 3, 4.1), with the last layer run at [CLS] only (every position
        still serves as key and value): the same numbers as
        `backbone(inputs)["pooled_output"]` for about 1/L less work. The
        heads that read only C (classification, multiple choice) call it.

        Args:
            inputs: dict. From `complete_inputs`, each `(batch, sequence_length)`.
            training: bool. Whether dropout is active. Defaults to `None`.

        Returns:
            `(batch, hidden_dim)`.

        Example:

        >>> import numpy as np
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=2, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> inputs = backbone.complete_inputs(np.array([[2, 7, 4, 9, 3]]))
        >>> pooled = keras.ops.convert_to_numpy(backbone.pooled_output(inputs))
        >>> full = keras.ops.convert_to_numpy(backbone(inputs)["pooled_output"])
        >>> np.allclose(pooled, full, atol=1e-6)
        True
        """
        # [CLS] as the one output position: no size-0 tensor, which exports would specialise.
        cls = ops.zeros_like(ops.cast(inputs["padding_mask"][:, :1], "int32"))
        embeddings = self.embed(inputs, training=training)
        encoded = self.encode(embeddings, inputs["padding_mask"], output_positions=cls, training=training)
        return encoded["pooled_output"]

    def embed(self, inputs, training=None):
        """The input representation (sec. 3, Figure 2): token + position +
        segment embeddings, summed, then LayerNorm and dropout.

        Args:
            inputs: dict. From `complete_inputs`, each `(batch, sequence_length)`.
            training: bool. Whether dropout is active. Defaults to `None`
                (Keras' training flag).

        Returns:
            `(batch, sequence_length, hidden_dim)`.

        Example:

        >>> import numpy as np
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> inputs = backbone.complete_inputs(np.array([[2, 7, 3]]))
        >>> tuple(backbone.embed(inputs).shape)
        (1, 3, 8)
        """
        tokens = self.token_embedding(inputs["token_ids"])  # (B, T, H)
        x = (
            tokens
            + self.position_embedding(tokens)  # (T, H), broadcast over the batch
            + self.segment_embedding(inputs["segment_ids"])
        )
        return self.embeddings_dropout(self.embeddings_layer_norm(x), training=training)

    def encode(
        self,
        embeddings,
        padding_mask,
        output_positions=None,
        return_hidden_states=False,
        return_attention_scores=False,
        training=None,
    ):
        """The L encoder layers and the pooler on [CLS] (sec. 3): the one
        definition of BERT's encoder, which `__init__`'s graph and every other
        path run.

        With `output_positions` `(batch, P)`, the last layer computes its
        outputs only at [CLS] and those positions (every position still serves
        as key and value): `sequence_output` is then `(batch, P, H)`, the
        states at `output_positions`, and `pooled_output` is unchanged. The
        pre-training heads read nothing else (sec. 3.1: the masked positions
        and [CLS]).

        Args:
            embeddings: float tensor of shape `(batch, sequence_length, H)`. From `embed`.
            padding_mask: int tensor of shape `(batch, sequence_length)`. 1 for real tokens.
            output_positions: int tensor of shape `(batch, P)` or None. Positions the last
                layer computes. Defaults to `None`, every position.
            return_hidden_states: bool. Add `hidden_states`, the L + 1
                `(batch, sequence_length, H)` tensors (embeddings, then every
                layer's output). Defaults to `False`.
            return_attention_scores: bool. Add `attention_scores`, the L
                `(batch, A, sequence_length, sequence_length)` probabilities.
                Defaults to `False`.
            training: bool. Whether dropout is active. Defaults to `None`.

        Returns:
            A dict with `sequence_output` and `pooled_output` `(batch, H)`,
            plus what was asked for.

        Example:

        >>> import numpy as np
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=2, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> inputs = backbone.complete_inputs(np.array([[2, 7, 4, 9, 3]]))
        >>> outputs = backbone.encode(backbone.embed(inputs), inputs["padding_mask"],
        ...                           output_positions=np.array([[2, 3]]))
        >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
        ((1, 2, 8), (1, 8))
        """
        if output_positions is not None and (return_hidden_states or return_attention_scores):
            raise ValueError(
                "`output_positions` computes the last layer at a few positions only; it "
                "cannot be combined with `return_hidden_states` or `return_attention_scores`."
            )
        rows = None if output_positions is None else _with_cls(output_positions)
        x, hidden_states, attention_scores = embeddings, [embeddings], []
        last = len(self.transformer_layers) - 1
        for index, layer in enumerate(self.transformer_layers):
            x = layer(
                x,
                padding_mask=padding_mask,
                output_positions=rows if index == last else None,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            if return_attention_scores:
                x, scores = x
                attention_scores.append(scores)  # (B, A, T, T)
            hidden_states.append(x)

        if rows is not None and last < 0:  # no layers: gather the embeddings
            x = gather_positions(x, rows)
        outputs = {
            "sequence_output": x if rows is None else x[:, 1:, :],
            "pooled_output": self.pooled_dense(x[:, 0, :]),  # tanh(W C + b), C = [CLS]
        }
        if return_hidden_states:
            outputs["hidden_states"] = hidden_states
        if return_attention_scores:
            outputs["attention_scores"] = attention_scores
        return outputs


def _with_cls(positions):
    """`[0] + positions` per row: the [CLS] state feeds the pooled output."""
    positions = ops.cast(positions, "int32")
    return ops.concatenate([ops.zeros_like(positions[:, :1]), positions], axis=1)
