"""The new parameters of BERT's fine-tuning heads (BERT sec. 4.1), and their float32 logits."""

import keras
from keras import ops

from kzoo.layers import Dropout
from kzoo.models.bert.bert_backbone import bert_initializer


def dense_head(backbone, units, dropout, dropout_name, dense_name):
    """The new parameters of a fine-tuning head (BERT sec. 4.1: "the only new
    parameters introduced during fine-tuning are classification layer weights
    W ∈ R^{K×H}"): `(Dropout(dropout), Dense(units))` in the backbone's dtype,
    with BERT's initializer; apply them as `float32_logits(dense(drop(x)))`.

    Args:
        backbone: a `kzoo.BertBackbone`, whose dtype policy the head takes.
        units: int. K, the number of outputs.
        dropout: float. The dropout rate before W.
        dropout_name: str. The dropout layer's name.
        dense_name: str. The dense layer's name.

    Returns:
        `(dropout_layer, dense_layer)`.

    Example:

    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> drop, dense = dense_head(backbone, 3, 0.1, "classifier_dropout", "logits")
    >>> drop.rate, dense.units, dense.name
    (0.1, 3, 'logits')
    """
    return (
        Dropout(dropout, name=dropout_name),
        keras.layers.Dense(
            units, kernel_initializer=bert_initializer(), dtype=backbone.dtype_policy, name=dense_name
        ),
    )


def float32_logits(tensor, name="float32_logits"):
    """`tensor` cast to float32 by a named layer: task logits stay float32
    under mixed precision, for a stable softmax and loss (BERT sec. 4).

    Args:
        tensor: a symbolic tensor, the head's output.
        name: str. The cast layer's name. Defaults to `"float32_logits"`.

    Returns:
        The float32 tensor.

    Example:

    >>> tensor = keras.Input(shape=(3,), dtype="float16")
    >>> keras.backend.standardize_dtype(float32_logits(tensor).dtype)
    'float32'
    """
    return keras.layers.Activation("linear", dtype="float32", name=name)(tensor)


def pooled_logits(backbone, inputs, dropout, dense, training=None):
    """float32 `dense(dropout(C))`, a head on the pooled [CLS] output C (sec.
    4.1), with the backbone's last layer run at [CLS] alone
    (`BertBackbone.pooled_output`): the numbers of the task's functional
    graph for 1/L less work. The `call` of the tasks whose head reads only C.

    Args:
        backbone: a `kzoo.BertBackbone`.
        inputs: dict. The backbone's inputs, completed (`complete_inputs`).
        dropout: the head's dropout layer.
        dense: the head's dense layer.
        training: bool. Whether dropout is active. Defaults to `None`.

    Returns:
        float32 logits `(batch, units)`.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> drop, dense = dense_head(backbone, 3, 0.1, "classifier_dropout", "logits")
    >>> logits = pooled_logits(backbone, backbone.complete_inputs(np.array([[2, 7, 3]])), drop, dense)
    >>> tuple(logits.shape), keras.backend.standardize_dtype(logits.dtype)
    ((1, 3), 'float32')
    """
    pooled = backbone.pooled_output(inputs, training=training)
    return ops.cast(dense(dropout(pooled, training=training)), "float32")
