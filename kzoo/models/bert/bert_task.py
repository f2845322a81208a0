"""What BERT's fine-tuning models share (BERT sec. 3.2, sec. 4, Figure 4).

"For each task, we simply plug in the task-specific inputs and outputs into
BERT and fine-tune all the parameters end-to-end" (sec. 3.2). `BertTask` is
that plug: a functional `keras.Model` around a `kzoo.BertBackbone` with a small
head, and an optional preprocessor that turns raw text into the backbone's
inputs.

With a preprocessor attached, `fit`, `evaluate` and `predict` take raw text
(lists, NumPy arrays, `tf.string` tensors, or a batched `tf.data.Dataset` of
them), packed by TensorFlow ops outside the compiled model: texts in memory
eagerly, in vectorised chunks (with a progress bar for large sets), a dataset
by `dataset.map` in `tf.data`. The packed inputs then feed the model on
whatever backend Keras runs. Already-packed
inputs, a dict with `token_ids` (and `segment_ids`, `padding_mask`), go
straight to the model. Labels are checked before the first step: in-memory
labels raise a `ValueError`, labels in a `tf.data.Dataset` fail its first
batch with the same message.
"""

import inspect
import math
import types
import warnings

import keras
import numpy as np

from kzoo import presets
from kzoo.data import task_inputs
from kzoo.jax_state_recovery import keep_state_on_error
from kzoo.layers import Dropout
from kzoo.models.bert.bert_backbone import INPUT_NAMES, bert_initializer
from kzoo.models.bert.bert_optimizer import bert_finetuning_optimizer
from kzoo.models.bert.bert_preprocessor import BertPreprocessor
from kzoo.models.bert.bert_tokenizer import BertTokenizer
from kzoo.models.bert.model_parts import ModelWithParts

DEFAULT_BATCH_SIZE = 32  # sec. A.3: batch 16 or 32
DEFAULT_SEQUENCE_LENGTH = 512


def backbone_inputs(leading_shape=()):
    """`{token_ids, segment_ids, padding_mask}` int32 `keras.Input`s of shape
    `(batch, *leading_shape, sequence_length)` (BERT sec. 3, Figure 2)."""
    return {
        name: keras.Input(shape=(*leading_shape, None), dtype="int32", name=name)
        for name in INPUT_NAMES
    }


def dense_head(backbone, units, dropout, dropout_name, dense_name):
    """The new parameters of a fine-tuning head (BERT sec. 4.1: "the only new
    parameters introduced during fine-tuning are classification layer weights
    W ∈ R^{K×H}"): `(Dropout(dropout), Dense(units))` in the backbone's dtype,
    with BERT's initializer; apply them with `float32_logits(dense(drop(x)))`.

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

    Example:

    >>> tensor = keras.Input(shape=(3,), dtype="float16")
    >>> keras.backend.standardize_dtype(float32_logits(tensor).dtype)
    'float32'
    """
    return keras.layers.Activation("linear", dtype="float32", name=name)(tensor)


class BertTask(ModelWithParts, keras.Model):
    """Base class of kzoo's BERT fine-tuning models (BERT sec. 3.2, Figure 4).

    Subclasses build their head on `backbone_inputs()`, then call
    `super().__init__(inputs=..., outputs=..., backbone=..., preprocessor=...)`.
    They set `preprocessor_class` (the preprocessor a plain
    `kzoo.BertPreprocessor` or `kzoo.BertTokenizer` is turned into),
    `head_arguments` (their constructor arguments, for `get_config`), and
    override `default_loss`, `default_metrics` and `label_bounds`. A task that
    was not compiled compiles itself with the fine-tuning recipe (see
    `compile`) at its first `fit` or `evaluate`, so `from_preset(...)` then
    `fit(...)` works.

    The checks made here, before any training, for every task: the tokenizer's
    vocabulary has as many tokens as the backbone's embedding table, and the
    preprocessor's `sequence_length` fits the backbone's position table.

    Example (through a subclass):

    >>> from kzoo import BertBackbone, BertClassifier
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> isinstance(BertClassifier(backbone, num_classes=2), BertTask)
    True
    """

    preprocessor_class = BertPreprocessor
    head_arguments = ()
    config_parts = ("backbone", "preprocessor")

    @property
    def config_fields(self):
        return self.head_arguments

    def __init__(self, inputs, outputs, backbone, preprocessor=None, **kwargs):
        preprocessor = self.adapt_preprocessor(preprocessor, backbone)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor

    # === Preprocessor ===

    @classmethod
    def adapt_preprocessor(cls, preprocessor, backbone):
        """`preprocessor` as a `cls.preprocessor_class`, checked against `backbone`.

        A `kzoo.BertTokenizer` gets a preprocessor of the backbone's maximum
        length (512 at most); a `kzoo.BertPreprocessor` of another class (e.g.
        one saved with a classifier) keeps its tokenizer and `sequence_length`.
        """
        if preprocessor is None:
            return None
        if isinstance(preprocessor, BertTokenizer):
            length = min(backbone.max_sequence_length, DEFAULT_SEQUENCE_LENGTH)
            preprocessor = cls.preprocessor_class(preprocessor, sequence_length=length)
        elif not isinstance(preprocessor, cls.preprocessor_class):
            if not isinstance(preprocessor, BertPreprocessor):
                raise ValueError(
                    f"{cls.__name__} takes a preprocessor=kzoo.{cls.preprocessor_class.__name__} "
                    f"(or a kzoo.BertPreprocessor / BertTokenizer); got {type(preprocessor).__name__}."
                )
            preprocessor = cls.preprocessor_class(
                preprocessor.tokenizer, sequence_length=preprocessor.sequence_length
            )
        vocabulary_size = preprocessor.tokenizer.vocabulary_size()
        if vocabulary_size != backbone.vocabulary_size:
            raise ValueError(
                f"The tokenizer's vocabulary has {vocabulary_size} tokens but the backbone's "
                f"embedding table has {backbone.vocabulary_size} rows: they belong to different "
                "models (was the vocabulary file replaced?). Use the tokenizer the backbone was "
                "pre-trained with, e.g. both from the same preset directory."
            )
        if preprocessor.sequence_length > backbone.max_sequence_length:
            raise ValueError(
                f"The preprocessor packs {preprocessor.sequence_length} tokens but the backbone's "
                f"position table has {backbone.max_sequence_length} rows. Pass "
                f"sequence_length <= {backbone.max_sequence_length} to the preprocessor."
            )
        return preprocessor

    # === Data ===

    def label_bounds(self, packed):
        """`(low, high)`: integer labels must lie in `[low, high)`; None: not checked.
        `packed` tells whether the labels go with packed inputs (after the
        preprocessor) or with raw text (before it)."""
        return None

    def _check_labels(self, labels, packed):
        """A `ValueError` for in-memory labels outside `label_bounds`."""
        bounds = self.label_bounds(packed)
        found = None if bounds is None else task_inputs.label_range(labels)
        if found is not None and (found[0] < bounds[0] or found[1] >= bounds[1]):
            raise ValueError(self._bounds_message(bounds) + f" Got labels from {found[0]} to {found[1]}.")

    def _bounds_message(self, bounds):
        return (
            f"{type(self).__name__} labels must be integers in [{bounds[0]}, {bounds[1] - 1}] "
            f"({self._label_meaning()}). Fix the labels, or build the model for more classes."
        )

    def _label_meaning(self):
        return f"num_classes={getattr(self, 'num_classes', '?')}"

    def _assert_labels(self, labels, packed):
        """`labels` checked inside a tf.data pipeline (same message as `_check_labels`)."""
        bounds = self.label_bounds(packed)
        if bounds is None or labels is None:
            return labels
        return task_inputs.assert_labels_in(labels, bounds, self._bounds_message(bounds))

    def _check_packed(self, x):
        """Packed inputs in memory: keys and token ids checked (compiled JAX
        steps would give NaN for ids outside the embedding table)."""
        unknown = set(x) - set(INPUT_NAMES)
        if unknown:
            raise ValueError(
                f"{type(self).__name__} takes packed inputs with keys {list(INPUT_NAMES)}; got "
                f"unknown key(s) {sorted(unknown)}."
            )
        ids = np.asarray(x["token_ids"])
        if ids.size and (ids.min() < 0 or ids.max() >= self.backbone.vocabulary_size):
            raise ValueError(
                f"token_ids must lie in [0, {self.backbone.vocabulary_size - 1}] (the backbone's "
                f"vocabulary); got ids from {ids.min()} to {ids.max()}. Were they made with "
                "another vocabulary?"
            )
        defaults = {"segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
        return {**defaults, **x}

    def _prepare(self, x, y, sample_weight, batch_size):
        """Keras `fit`/`evaluate`/`predict` arguments, raw text packed."""
        arguments = {"x": x, "y": y, "sample_weight": sample_weight, "batch_size": batch_size}
        if task_inputs.is_dataset(x):
            return {**arguments, "x": self._preprocess_dataset(x)}
        if isinstance(x, dict) and "token_ids" in x:
            self._check_labels(task_inputs.to_tensors(y), packed=True)
            return {**arguments, "x": self._check_packed(x)}
        if x is None:
            return arguments
        self._require_preprocessor()
        x, y = task_inputs.to_tensors(x), task_inputs.to_tensors(y)
        self._check_labels(y, packed=False)
        packed = task_inputs.pack_in_memory(self.preprocessor, x, y, task_inputs.to_tensors(sample_weight))
        return {**arguments, **dict(zip(("x", "y", "sample_weight"), packed))}

    def _preprocess_dataset(self, dataset):
        spec = dataset.element_spec
        x_spec = spec[0] if isinstance(spec, tuple) else spec
        if isinstance(x_spec, dict) and "token_ids" in x_spec:
            if not isinstance(spec, tuple) or len(spec) < 2:
                return dataset
            return dataset.map(lambda x, y, *w: (x, self._assert_labels(y, packed=True), *w))
        self._require_preprocessor()
        if not task_inputs.is_batched_text(spec):
            raise ValueError(
                f"{type(self).__name__} takes batched datasets: call `dataset.batch(32)` first "
                "(BERT fine-tunes with batches of 16 or 32)."
            )
        return task_inputs.map_dataset(
            dataset, lambda x, y, w: self.preprocessor(x, self._assert_labels(y, packed=False), w)
        )

    def _require_preprocessor(self):
        if self.preprocessor is None:
            raise ValueError(
                f"This {type(self).__name__} has no preprocessor, so it takes packed inputs only "
                f"(a dict with {list(INPUT_NAMES)}). For raw text, build it with "
                f"preprocessor=kzoo.{self.preprocessor_class.__name__}(tokenizer, sequence_length) "
                "or load it from a preset directory that holds a tokenizer."
            )

    # === Keras entry points ===

    def fit(self, x=None, y=None, batch_size=None, epochs=1, *, validation_split=0.0,
            validation_data=None, shuffle=True, sample_weight=None, **kwargs):
        """`keras.Model.fit`, also on raw text (see the module docstring);
        `validation_split` works for raw text in memory too (the last fraction)."""
        raw = x is not None and not isinstance(x, dict) and not task_inputs.is_dataset(x)
        if validation_split and raw and validation_data is None:
            (x, x_val), (y, y_val) = (task_inputs.split_rows(task_inputs.to_tensors(v), validation_split) for v in (x, y))
            validation_data, validation_split = (x_val, y_val), 0.0
        if not self.compiled:
            self.compile()
        train = self._prepare(x, y, sample_weight, batch_size)
        if validation_data is not None:
            validation = keras.utils.unpack_x_y_sample_weight(validation_data) if isinstance(validation_data, tuple) else (validation_data, None, None)
            prepared = self._prepare(*validation, batch_size)
            validation_data = prepared["x"] if prepared["y"] is None else (prepared["x"], prepared["y"])
        self._schedule_default_optimizer(train, epochs, kwargs.get("steps_per_epoch"))
        shuffle = shuffle and not task_inputs.is_dataset(train["x"])  # a dataset shuffles itself
        with keep_state_on_error(self):
            return super().fit(
                **train, epochs=epochs, validation_split=validation_split,
                validation_data=validation_data, shuffle=shuffle, **kwargs,
            )

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`, also on raw text (see the module docstring)."""
        if not self.compiled:
            self.compile()
        prepared = self._prepare(x, y, sample_weight, batch_size)
        with keep_state_on_error(self):
            return super().evaluate(**prepared, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """`keras.Model.predict`, also on raw text (see the module docstring)."""
        prepared = self._prepare(x, None, None, batch_size)
        with keep_state_on_error(self):
            return super().predict(prepared["x"], batch_size=prepared["batch_size"], **kwargs)

    # === Compilation ===

    def default_loss(self):
        return None  # e.g. a feature extractor: no training objective

    def default_metrics(self):
        return None

    def compile(self, optimizer=None, loss="auto", metrics="auto", **kwargs):
        """Compiles with BERT's fine-tuning recipe unless told otherwise (sec. 3.2, A.3).

        `optimizer=None` gives `kzoo.bert_finetuning_optimizer`: Adam with
        decoupled weight decay, peak lr 5e-5, warmup over the first 10% of the
        steps and linear decay to 0; the first `fit` fills in the number of
        steps (epochs × batches per epoch; a constant 5e-5 if the data do not
        tell it). `loss="auto"` and `metrics="auto"` are the task's own.
        """
        # A read-only mapping: Keras would track a dict and count its metrics twice.
        self._compile_arguments = types.MappingProxyType({
            "loss": self.default_loss() if loss == "auto" else loss,
            "metrics": self.default_metrics() if metrics == "auto" else metrics,
            **kwargs,
        })
        self._scheduled_optimizer_pending = optimizer is None
        super().compile(optimizer=optimizer or bert_finetuning_optimizer(), **self._compile_arguments)

    def _schedule_default_optimizer(self, train, epochs, steps_per_epoch):
        """Replaces the default optimizer's constant rate by warmup + decay over the run."""
        if not getattr(self, "_scheduled_optimizer_pending", False) or self.optimizer.built:
            return
        self._scheduled_optimizer_pending = False
        if steps_per_epoch is None:
            data = train["x"]
            if task_inputs.is_dataset(data):
                steps_per_epoch = task_inputs.known_length(data)
            elif isinstance(data, dict):
                steps_per_epoch = math.ceil(len(data["token_ids"]) / (train["batch_size"] or DEFAULT_BATCH_SIZE))
        if steps_per_epoch is None:
            warnings.warn(
                "The number of fine-tuning steps is unknown (a dataset of unknown length), so "
                "the default optimizer keeps a constant learning rate of 5e-5 without warmup. "
                "Pass steps_per_epoch, or compile with "
                "optimizer=kzoo.bert_finetuning_optimizer(total_steps=...).",
                UserWarning,
                stacklevel=3,
            )
            return
        optimizer = bert_finetuning_optimizer(total_steps=epochs * steps_per_epoch)
        super().compile(optimizer=optimizer, **self._compile_arguments)

    # === Presets ===

    @classmethod
    def from_preset(cls, preset, /, **kwargs):
        """The task from a preset directory or a built-in name (sec. 3.2).

        A directory holding this task (saved by `save_to_preset`) gives it
        back with its weights; one holding a backbone (e.g. from
        `kzoo.BertPretrainer.save_to_preset`) gives its pre-trained backbone
        with a freshly initialised head, and its tokenizer or preprocessor.
        A built-in name gives random weights and a warning. `kwargs` are the
        head's arguments (`num_classes`, ...), `dtype`, backbone config
        fields for a name, or `sequence_length` for the preprocessor.
        """
        saved = presets.saved_task_config(preset, cls)
        changed = {k: v for k, v in kwargs.items() if k in cls.head_arguments and saved is not None and saved.get(k) != v}
        if changed:
            raise ValueError(
                f"The {cls.__name__} saved in {preset!r} has "
                + ", ".join(f"{k}={saved.get(k)!r}" for k in changed)
                + f", not {', '.join(f'{k}={v!r}' for k, v in changed.items())}. Its trained head "
                "cannot change shape. To fine-tune a new head on the same encoder, build "
                f"kzoo.{cls.__name__}(backbone=kzoo.BertBackbone.from_preset(path), "
                "preprocessor=kzoo.BertPreprocessor.from_preset(path), ...)."
            )
        if saved is None:
            cls._require_head_arguments(preset, kwargs)
        sequence_length = kwargs.pop("sequence_length", None)
        task = presets.from_preset_for(cls, preset, **kwargs)
        if sequence_length is not None:
            task.set_sequence_length(sequence_length)
        return task

    @classmethod
    def _require_head_arguments(cls, preset, kwargs):
        """A new head needs its shape (e.g. `num_classes`): say so before building."""
        parameters = inspect.signature(cls.__init__).parameters
        missing = [
            name for name in cls.head_arguments
            if name in parameters and parameters[name].default is inspect.Parameter.empty and name not in kwargs
        ]
        if missing:
            example = ", ".join(f"{name}=..." for name in missing)
            raise ValueError(
                f"{preset!r} holds no {cls.__name__}, so `from_preset` puts a new head on its "
                f"backbone, and a new head needs {' and '.join(f'`{name}`' for name in missing)}: "
                f"kzoo.{cls.__name__}.from_preset({preset!r}, {example})."
            )

    def set_sequence_length(self, sequence_length):
        """Packs text to `sequence_length` tokens from now on (128 or 512 in the
        paper's fine-tuning, sec. A.3), within the backbone's position table."""
        self._require_preprocessor()
        if not 3 <= sequence_length <= self.backbone.max_sequence_length:
            raise ValueError(
                f"sequence_length={sequence_length} must lie in [3, "
                f"{self.backbone.max_sequence_length}] (the backbone's position table)."
            )
        self.preprocessor.sequence_length = int(sequence_length)

    def save_to_preset(self, preset_dir, format="kzoo"):
        """Writes the task, its backbone and its preprocessor as a preset
        directory (KerasHub's layout), for `from_preset` on any backend (sec. 3.2);
        `format="huggingface"` writes the Hugging Face class with the same head
        (`BertForSequenceClassification` for a `kzoo.BertClassifier`, ...)."""
        presets.save_task(self, preset_dir, format=format)
