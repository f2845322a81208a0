"""Keras' one-batch entry points (`train_on_batch`, `test_on_batch`,
`predict_on_batch`) with the checks of `fit`/`evaluate`/`predict`.

A compiled step cannot always stop a bad batch before it changes the weights
(`kzoo.models.batch_checks`), so kzoo's models check the batch on the host
first, whichever entry point runs the step: a bad batch is a `ValueError` in
kzoo's words, raised before the step, on every backend. A task also takes raw
text here, packed by its preprocessor, and compiles itself with its recipe
when it was not compiled (BERT sec. 4: the fine-tuning recipe; the default
optimizer stays unscheduled, since one batch does not tell the run's length).

`Backbone` and `Task` bind these functions as their methods (functions, not a
mixin: the models keep one level of base classes). Each class defines
`_one_batch(x, y, sample_weight, with_labels)`, which checks (and for a task
packs) the batch and returns Keras' `(x, y, sample_weight)`; Keras' step then
runs with the model's weights kept if it fails (`batch_checks.reported`).
"""

import keras

from kzoo import backend
from kzoo.models import batch_checks


def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
    """`keras.Model.train_on_batch`, the batch checked (and for a task, raw
    text packed) as `fit` checks it; a bad batch is a `ValueError` before the
    step, which then leaves the weights as they were.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> backbone.compile(optimizer="sgd", loss={"pooled_output": "mse"})
    >>> x = {"token_ids": np.ones((2, 4), "int32")}
    >>> loss = backbone.train_on_batch(x, {"pooled_output": np.zeros((2, 8))})
    >>> backbone.train_on_batch({"token_ids": np.full((2, 4), 50)}, {"pooled_output": np.zeros((2, 8))})
    Traceback (most recent call last):
    ...
    ValueError: `token_embedding` ids must lie in [0, 50) (the embedding table has 50 rows), but got values from 50 to 50. ...
    """
    x, y, sample_weight = self._one_batch(x, y, sample_weight, with_labels=True)
    backend.build_optimizer_before_fit(self)  # one trace of the step, not two (TensorFlow)
    with batch_checks.reported(self):
        return keras.Model.train_on_batch(
            self, x, y, sample_weight=sample_weight, class_weight=class_weight, return_dict=return_dict
        )


def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
    """`keras.Model.test_on_batch`, the batch checked as `evaluate` checks it.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> backbone.compile(loss={"pooled_output": "mse"})
    >>> x = {"token_ids": np.ones((2, 4), "int32")}
    >>> float(backbone.test_on_batch(x, {"pooled_output": np.zeros((2, 8))})) >= 0
    True
    """
    x, y, sample_weight = self._one_batch(x, y, sample_weight, with_labels=True)
    with batch_checks.reported(self):
        return keras.Model.test_on_batch(self, x, y, sample_weight=sample_weight, return_dict=return_dict)


def predict_on_batch(self, x):
    """`keras.Model.predict_on_batch`, the batch checked as `predict` checks it.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> backbone.predict_on_batch({"token_ids": np.ones((2, 4), "int32")})["sequence_output"].shape
    (2, 4, 8)
    >>> backbone.predict_on_batch({"token_ids": np.full((2, 4), 50)})
    Traceback (most recent call last):
    ...
    ValueError: `token_embedding` ids must lie in [0, 50) (the embedding table has 50 rows), but got values from 50 to 50. ...
    """
    x = self._one_batch(x, None, None, with_labels=False)[0]
    with batch_checks.reported(self):
        return keras.Model.predict_on_batch(self, x)
