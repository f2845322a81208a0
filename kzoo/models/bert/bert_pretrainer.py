"""BERT's pre-training models (BERT sec. 3.1, appendix A.1, A.2).

`BertPretrainer` = backbone + masked-LM head + next-sentence head, trained on
the sum of the two losses ("the training loss is the sum of the mean masked
LM likelihood and the mean next sentence prediction likelihood", A.2).
`BertMaskedLM` is the same without NSP (the "No NSP" ablation of Table 5,
RoBERTa-style pre-training).

Features (model inputs), all int32:

| key              | shape                  | meaning                                  |
|------------------|------------------------|------------------------------------------|
| `token_ids`      | (batch, seq)           | WordPiece ids after masking (A.1)        |
| `segment_ids`    | (batch, seq)           | 0 for sentence A, 1 for B                |
| `padding_mask`   | (batch, seq)           | 1 for real tokens                        |
| `mask_positions` | (batch, P)             | positions to predict (0 in unused slots) |

Labels:

| key                   | shape      | meaning                                          |
|-----------------------|------------|--------------------------------------------------|
| `mask_ids`            | (batch, P) | the original ids at `mask_positions`             |
| `mask_weights`        | (batch, P) | 1.0 for real predictions, 0.0 for padding slots  |
| `next_sentence_label` | (batch,)   | 0 = IsNext, 1 = NotNext (BertPretrainer only)    |
"""

import keras
from keras import ops

from kzoo import backend
from kzoo.distribution import replica_loss
from kzoo.models.bert.bert_fill_mask import BertFillMask
from kzoo.models.bert.bert_backbone import INPUT_NAMES, bert_initializer, bert_inputs
from kzoo.models.bert.bert_masked_lm_head import BertMaskedLMHead, check_mask_positions
from kzoo.models.bert.bert_optimizer import bert_pretraining_optimizer
from kzoo.models.task import Task

MASK_POSITIONS = "mask_positions"
MLM_LABELS = ("mask_ids", "mask_weights")
NSP_LABEL = "next_sentence_label"
_COMPILED_LOSS_ARGUMENTS = ("loss", "loss_weights", "metrics", "weighted_metrics")
_EPSILON = 1e-5  # guards an all-padding batch: sum(w) = 0 gives an MLM loss of 0


def _keys(structure):
    """The keys of a dict (or of a dict-like tf.data element spec), else None."""
    return sorted(structure) if isinstance(structure, dict) else None


@keras.saving.register_keras_serializable(package="kzoo")
class BertPretrainer(BertFillMask, Task):
    """BERT pre-training: masked LM + next sentence prediction (BERT sec. 3.1, A.1, A.2).

    A `kzoo.BertBackbone`, a `BertMaskedLMHead` whose output projection is the
    transposed input embedding (tied) plus an output bias, evaluated only at
    `mask_positions`, and a 2-way NSP classifier on the pooled `[CLS]` output
    (`next_sentence_dense`). The loss is the paper's (A.2):

        loss = sum(w * CE_mlm) / sum(w) + mean(CE_nsp)

    with `w = mask_weights`, computed in float32 even under mixed precision.
    `fit`/`evaluate` report `loss`, `mlm_loss`, `nsp_loss`, `mlm_accuracy`
    (over real predictions) and `nsp_accuracy`. `compile()` with no optimizer
    uses `kzoo.bert_pretraining_optimizer()` (constant lr 1e-4); pass
    `bert_pretraining_optimizer(total_steps=...)` for warmup and decay, and see
    `kzoo.pretraining_phases` for the 128/512 split.

    The features and labels are described in this module's docstring; labels
    come as the second element of `(features, labels)` batches.

    Args:
        backbone: `kzoo.BertBackbone`. The encoder, kept as `self.backbone`.
        tokenizer: `kzoo.BertTokenizer` or None. The tokenizer the data are
            made with, kept as `self.tokenizer` and saved by `save_to_preset`,
            so that a preset directory holds everything needed to continue or
            fine-tune. Defaults to `None`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `token_ids`, `segment_ids`, `padding_mask`
            `(batch, seq)` and `mask_positions` `(batch, P)`.
        training: bool. Whether dropout is active. Defaults to `None`.

    Returns:
        `{"mlm_logits": (batch, P, vocabulary_size), "nsp_logits": (batch, 2)}`.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> model = BertPretrainer(backbone)
    >>> features = {
    ...     "token_ids": np.array([[2, 7, 4, 3, 9, 3], [2, 5, 4, 3, 8, 3]]),
    ...     "segment_ids": np.array([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 1, 1]]),
    ...     "padding_mask": np.ones((2, 6), "int32"),
    ...     "mask_positions": np.array([[2, 0], [2, 4]]),
    ... }
    >>> labels = {
    ...     "mask_ids": np.array([[11, 0], [12, 8]]),
    ...     "mask_weights": np.array([[1.0, 0.0], [1.0, 1.0]], "float32"),
    ...     "next_sentence_label": np.array([0, 1]),
    ... }
    >>> outputs = model(features)
    >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["nsp_logits"].shape)
    ((2, 2, 50), (2, 2))
    >>> model.compile()
    >>> history = model.fit(features, labels, epochs=1, verbose=0)
    >>> sorted(history.history)
    ['loss', 'mlm_accuracy', 'mlm_loss', 'nsp_accuracy', 'nsp_loss']

    `save_to_preset` writes the whole model (`task.json`, `task.weights.h5`)
    and its backbone alone, which fine-tuning starts from (sec. 3.2):

    >>> import tempfile
    >>> path = tempfile.mkdtemp()
    >>> model.save_to_preset(path)
    >>> BertPretrainer.from_preset(path).count_params() == model.count_params()
    True
    >>> BertBackbone.from_preset(path).num_layers
    1
    """

    with_next_sentence_prediction = True

    def __init__(self, backbone, tokenizer=None, **kwargs):
        # === Layers ===
        mlm_head = BertMaskedLMHead(
            token_embedding=backbone.token_embedding,  # tied: W_e^T (sec. 3.1)
            activation=backbone.activation,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            kernel_initializer=bert_initializer(),
            dtype=backbone.dtype_policy,
            name="mlm_head",
        )
        next_sentence_dense = keras.layers.Dense(
            2, kernel_initializer=bert_initializer(), dtype=backbone.dtype_policy, name="next_sentence_dense"
        ) if self.with_next_sentence_prediction else None

        # === Functional model ===
        inputs = {**bert_inputs(), MASK_POSITIONS: keras.Input(shape=(None,), dtype="int32", name=MASK_POSITIONS)}
        encoded = backbone({name: inputs[name] for name in INPUT_NAMES})
        outputs = {"mlm_logits": mlm_head(encoded["sequence_output"], inputs[MASK_POSITIONS])}
        if self.with_next_sentence_prediction:
            outputs["nsp_logits"] = next_sentence_dense(encoded["pooled_output"])
        super().__init__(inputs, outputs, backbone=backbone, **kwargs)
        self.tokenizer = tokenizer  # kept with the model: the pipeline's vocabulary
        self.dtype_policy = backbone.dtype_policy  # mixed_float16: loss scaling in compile
        self.mlm_head = mlm_head
        if self.with_next_sentence_prediction:
            self.next_sentence_dense = next_sentence_dense

        # === Metrics ===
        tasks = ("mlm", "nsp") if self.with_next_sentence_prediction else ("mlm",)
        self._task_metrics = [keras.metrics.Mean(name=f"{task}_loss") for task in tasks] + [
            keras.metrics.SparseCategoricalAccuracy(name=f"{task}_accuracy") for task in tasks
        ]

    # === Forward pass ===

    def __call__(self, inputs, *args, **kwargs):
        return super().__call__(self.complete_inputs(inputs), *args, **kwargs)

    def call(self, inputs, training=None, mask=None):
        # The functional graph of `__init__` gives the structure, shapes and
        # weights; running it would compute the last encoder layer at every
        # position. The heads read only the masked positions and [CLS], so the
        # last layer runs at those rows only (same outputs). JAX's compiled
        # steps reach `call` through `stateless_call`, bypassing `__call__`.
        inputs = self.complete_inputs(inputs)
        positions = inputs[MASK_POSITIONS]
        check_mask_positions(positions, inputs["token_ids"].shape[1])
        embeddings = self.backbone.embed(inputs, training=training)
        encoded = self.backbone.encode(
            embeddings, inputs["padding_mask"], output_positions=positions, training=training
        )
        outputs = {"mlm_logits": self.mlm_head(encoded["sequence_output"])}  # (B, P, V)
        if self.with_next_sentence_prediction:
            outputs["nsp_logits"] = self.next_sentence_dense(encoded["pooled_output"])  # (B, 2)
        return outputs

    # === Data checks ===

    def complete_inputs(self, inputs):
        """`inputs` checked (`token_ids` and `mask_positions` required) and
        completed with the backbone's defaults (`kzoo.models.Task.complete_inputs`)."""
        self._check_feature_keys(inputs)
        return super().complete_inputs(inputs)

    def _check_feature_keys(self, features):
        allowed = INPUT_NAMES + (MASK_POSITIONS,)
        keys = _keys(features)
        if keys is None or {"token_ids", MASK_POSITIONS} - set(keys) or set(keys) - set(allowed):
            raise ValueError(
                f"{type(self).__name__} takes a dict with keys {list(allowed)}; `token_ids` "
                f"and `mask_positions` (batch, max_predictions_per_seq) are required. Got "
                f"{keys if keys is not None else type(features).__name__}. Masked-LM "
                "preprocessing (kzoo.data) produces `mask_positions`."
            )

    def _check_label_keys(self, labels):
        nsp = self.with_next_sentence_prediction
        required = MLM_LABELS + ((NSP_LABEL,) if nsp else ())
        keys = _keys(labels)
        if keys is None or set(required) - set(keys) or set(keys) - set(MLM_LABELS + (NSP_LABEL,)):
            raise ValueError(
                f"{type(self).__name__} needs labels as a dict with keys {list(required)}"
                f"{'' if nsp else ' (next_sentence_label is ignored)'}; "
                f"got {keys if keys is not None else type(labels).__name__}. Train on "
                "(features, labels) pairs, e.g. a tf.data.Dataset of such tuples."
            )

    def _check_data(self, x, y):
        """Checks the structure of `fit`/`evaluate` data before any step runs."""
        spec = getattr(x, "element_spec", None)  # a tf.data.Dataset
        if spec is not None:
            spec = spec if isinstance(spec, tuple) else (spec,)
            x, y = spec[0], (spec[1] if len(spec) > 1 else None)
        elif y is None and not isinstance(x, dict):
            return  # generators and PyDatasets are checked at the first step
        self._check_feature_keys(x)
        self._check_label_keys(y)

    def fit(self, x=None, y=None, *args, **kwargs):
        self._check_data(x, y)
        return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        self._check_data(x, y)
        return super().evaluate(x, y, *args, **kwargs)

    # === Loss and metrics ===

    def task_losses(self, y, y_pred, normalisers=None):
        """`{"mlm_loss", "nsp_loss"}`: the weighted mean masked-LM cross-entropy
        over the real predictions, sum(w * CE) / sum(w), and the mean NSP
        cross-entropy (A.2), computed in float32. Under data parallelism on
        TensorFlow or torch each replica normalises by its own predictions and
        the engine averages the replicas' gradients, as the original BERT did
        on TPU pods (per-core losses, `CrossShardOptimizer`); JAX computes the
        global batch as one program. Both equal one device on the global batch
        when the replicas hold equally many predictions (`kzoo.distribution`).
        With `normalisers` (`{"mlm": ..., "nsp": ...}`, gradient accumulation's
        group counts / k, `kzoo.models.accumulation`) the sums are divided by
        them instead: k micro-batches then make the big batch's means."""
        self._check_label_keys(y)
        # Flattened to (B * P, V): on TensorFlow, rank-3 logits of unknown shape
        # add a shape assertion that XLA ignores, with a warning line per compile.
        logits = ops.cast(y_pred["mlm_logits"], "float32")
        logits = ops.reshape(logits, (-1, ops.shape(logits)[-1]))
        weights = ops.reshape(ops.cast(y["mask_weights"], "float32"), (-1,))
        mlm = backend.cross_entropy(logits, ops.reshape(y["mask_ids"], (-1,)))
        predictions = ops.maximum(ops.sum(weights), _EPSILON) if normalisers is None else normalisers["mlm"]
        losses = {"mlm_loss": ops.sum(mlm * weights) / predictions}
        if self.with_next_sentence_prediction:
            nsp = ops.sparse_categorical_crossentropy(
                y[NSP_LABEL], ops.cast(y_pred["nsp_logits"], "float32"), from_logits=True
            )
            losses["nsp_loss"] = ops.mean(nsp) if normalisers is None else ops.sum(nsp) / normalisers["nsp"]
        return losses

    def loss_counts(self, y, sample_weight=None):
        """Per example, the real masked-LM predictions (`mask_weights`) and,
        with NSP, one sentence pair: the two means of the loss (A.2)."""
        counts = {"mlm": ops.sum(ops.cast(y["mask_weights"], "float32"), axis=-1)}
        if self.with_next_sentence_prediction:
            counts["nsp"] = ops.ones_like(counts["mlm"])
        return counts

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if sample_weight is not None:
            raise ValueError(
                f"{type(self).__name__} does not take `sample_weight`/`class_weight`: "
                "weight masked-LM predictions with labels['mask_weights']."
            )
        return self._pretraining_loss(y, y_pred)

    def renormalised_loss(self, loss, y, y_pred, sample_weight, normalisers):
        """The loss with each mean over its group's count (`task_losses`)."""
        return self._pretraining_loss(y, y_pred, normalisers)

    def _pretraining_loss(self, y, y_pred, normalisers=None):
        # Under a tf.distribute strategy Keras sums the replicas' gradients: each
        # replica contributes its share of the mean (Keras' TF trainer scales
        # `self.losses` in `_aggregate_additional_loss` the same way).
        total = replica_loss(sum(self.task_losses(y, y_pred, normalisers).values()))
        return total + sum(self._aggregate_additional_loss(loss) for loss in self.losses)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        batch_size = ops.shape(y_pred["mlm_logits"])[0]
        for name, value in self.task_losses(y, y_pred).items():
            self._metric(name).update_state(value, sample_weight=batch_size)
        self._metric("mlm_accuracy").update_state(
            y["mask_ids"], y_pred["mlm_logits"], sample_weight=y["mask_weights"]
        )
        if self.with_next_sentence_prediction:
            self._metric("nsp_accuracy").update_state(y[NSP_LABEL], y_pred["nsp_logits"])
        return self.get_metrics_result()

    def _metric(self, name):
        return next(m for m in self._task_metrics if m.name == name)

    @property
    def metrics(self):
        tracker = [self._loss_tracker] if getattr(self, "_loss_tracker", None) else []
        return tracker + list(getattr(self, "_task_metrics", []))

    # === Variables no loss reaches ===

    def unused_variables(self):
        """Without NSP no loss reaches the pooler (`kzoo.models.Task.unused_variables`)."""
        if self.with_next_sentence_prediction or not hasattr(self, "backbone"):
            return []
        return self.backbone.pooled_dense.weights

    # === Compilation ===

    def compile(self, optimizer=None, **kwargs):
        """Compiles with BERT's optimizer and the pre-training loss (sec. 3.1, A.2).

        `optimizer=None` gives `kzoo.bert_pretraining_optimizer()` with a
        constant learning rate of 1e-4 (the number of steps is not known
        here). For the paper's warmup and linear decay, pass
        `optimizer=kzoo.bert_pretraining_optimizer(total_steps=...)`. The loss
        and metrics are the model's own; `loss`/`metrics` arguments are refused.

        Example:

        >>> from kzoo import BertBackbone, bert_pretraining_optimizer
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> model = BertMaskedLM(backbone)
        >>> model.compile(optimizer=bert_pretraining_optimizer(total_steps=1000))
        >>> type(model.optimizer).__name__
        'BertAdamW'
        """
        given = sorted(k for k in _COMPILED_LOSS_ARGUMENTS if kwargs.get(k) is not None)
        if given:
            raise ValueError(
                f"{type(self).__name__}.compile computes its own loss and metrics "
                f"(mlm_loss, mlm_accuracy, ...); remove {given}."
            )
        kwargs = {k: v for k, v in kwargs.items() if k not in _COMPILED_LOSS_ARGUMENTS}
        # Always an optimizer given: no schedule guessed from the first `fit`,
        # since pre-training runs in phases and resumes (`pretraining_phases`).
        super().compile(optimizer=optimizer or bert_pretraining_optimizer(), loss=None, metrics=None, **kwargs)


@keras.saving.register_keras_serializable(package="kzoo")
class BertMaskedLM(BertPretrainer):
    """BERT pre-training with the masked LM only (BERT sec. 3.1; "No NSP", Table 5).

    `kzoo.BertPretrainer` without the next-sentence head: the loss is
    `sum(w * CE_mlm) / sum(w)` over the real predictions, and the logs report
    `loss`, `mlm_loss` and `mlm_accuracy`. The backbone's pooled output is
    computed but unused: no loss reaches `pooled_dense`, so this model lists its
    two variables as non-trainable (the same on every backend: no weight decay,
    no missing-gradient warning; the backbone's own flags are unchanged).
    Labels may carry a `next_sentence_label`, which is ignored, so the same
    data serve both models.

    Args:
        backbone: `kzoo.BertBackbone`. The encoder, kept as `self.backbone`.
        tokenizer: `kzoo.BertTokenizer` or None. As for `kzoo.BertPretrainer`.
            Defaults to `None`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Returns:
        `{"mlm_logits": (batch, P, vocabulary_size)}`.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> model = BertMaskedLM(backbone)
    >>> outputs = model({"token_ids": np.array([[2, 7, 4, 3]]),
    ...                  "mask_positions": np.array([[1, 2]])})
    >>> list(outputs), tuple(outputs["mlm_logits"].shape)
    (['mlm_logits'], (1, 2, 50))
    """

    with_next_sentence_prediction = False  # the only difference: a variant, not a level of code
