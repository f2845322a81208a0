"""Keras' one-batch entry points (`train_on_batch`, `test_on_batch`,
`predict_on_batch`) with the checks of `fit`/`evaluate`/`predict`.

A compiled step cannot always stop a bad batch before it changes the weights
(`kzoo.models.batch_checks`), so kzoo's models check the batch on the host
first, whichever entry point runs the step: a bad batch is a `ValueError` in
kzoo's words, raised before the step, on every backend. A task also takes raw
text here, packed by its preprocessor, and compiles itself with its recipe
when it was not compiled (BERT sec. 4: the fine-tuning recipe; the default
optimizer stays unscheduled, since one batch does not tell the run's length).
"""

from kzoo import backend
from kzoo.models import batch_checks


class CheckedOnBatch:
    """A mixin for kzoo's `Backbone` and `Task` (before `keras.Model` in the
    bases): each one-batch entry point takes its batch through the class's
    `_one_batch(x, y, sample_weight, with_labels)`, which checks (and for a task
    packs) it and returns Keras' `(x, y, sample_weight)`, then runs Keras' step
    with the model's weights kept if it fails (`batch_checks.reported`).

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

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
        """`keras.Model.train_on_batch`, the batch checked (and for a task,
        raw text packed) as `fit` checks it; a bad batch is a `ValueError`
        before the step, which then leaves the weights as they were."""
        x, y, sample_weight = self._one_batch(x, y, sample_weight, with_labels=True)
        backend.build_optimizer_before_fit(self)  # one trace of the step, not two (TensorFlow)
        with batch_checks.reported(self):
            return super().train_on_batch(
                x, y, sample_weight=sample_weight, class_weight=class_weight, return_dict=return_dict
            )

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """`keras.Model.test_on_batch`, the batch checked as `evaluate` checks it."""
        x, y, sample_weight = self._one_batch(x, y, sample_weight, with_labels=True)
        with batch_checks.reported(self):
            return super().test_on_batch(x, y, sample_weight=sample_weight, return_dict=return_dict)

    def predict_on_batch(self, x):
        """`keras.Model.predict_on_batch`, the batch checked as `predict` checks it."""
        x = self._one_batch(x, None, None, with_labels=False)[0]
        with batch_checks.reported(self):
            return super().predict_on_batch(x)
