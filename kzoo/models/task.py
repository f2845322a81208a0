"""The base class of kzoo's task models: a backbone, a head, a training recipe.

With a preprocessor attached, `fit`, `evaluate` and `predict` take raw text
(lists, NumPy arrays, `tf.string` tensors, or a batched `tf.data.Dataset` of
them), packed by TensorFlow on the CPU outside the compiled model, through one
way in (`Task._prepare`). Packed inputs (a dict) skip the packing.
"""

import inspect
import warnings

import keras
import numpy as np
import tensorflow as tf

from kzoo import backend, presets
from kzoo.models import batching, datasets, input_checks, serialization
from kzoo.models.base_model import BaseModel
from kzoo.models.batching import IN_MEMORY, LengthBatches
from kzoo.models.datasets import checked
from kzoo.models.input_checks import check_examples, to_tensors

PARTS = ("backbone", "preprocessor", "tokenizer")  # constructor arguments that are objects


class Task(BaseModel):
    """A backbone with a head and its training recipe, trained on raw text.

    A subclass builds its head on the backbone in a functional graph, calls
    `super().__init__(inputs, outputs, backbone=..., preprocessor=...)` and
    stores its other constructor arguments as attributes of the same name (its
    config). It declares `preprocessor_class` and its recipe:
    `default_optimizer(total_steps)`, `default_loss()`, `default_metrics()`,
    `label_bounds(packed)`. A task not compiled compiles itself with its recipe
    at its first `fit` or `evaluate`, the default optimizer scheduled over that
    `fit`'s steps; the rest is `kzoo.models.base_model.BaseModel`'s.

    Args:
        inputs: dict of `keras.Input`s. The graph's inputs.
        outputs: a tensor or a dict of tensors. The graph's outputs.
        backbone: `kzoo.models.Backbone`. The network, kept as `self.backbone`.
        preprocessor: `kzoo.models.Preprocessor`, a tokenizer, or None. Kept,
            as a `preprocessor_class`, as `self.preprocessor`. Defaults to `None`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Example (through a subclass):

    >>> from kzoo import BertBackbone, BertClassifier, BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"])
    >>> backbone = BertBackbone(vocabulary_size=7, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> model = BertClassifier(backbone, num_classes=2, preprocessor=tokenizer)
    >>> isinstance(model, Task), sorted(model.get_config())
    (True, ['backbone', 'class_names', 'dropout', 'name', 'num_classes', 'preprocessor', 'trainable'])
    >>> model.predict(["good", "bad good"], verbose=0).shape  # raw text, packed by the preprocessor
    (2, 2)
    """

    compiles_itself = True
    preprocessor_class = None
    default_sequence_length = 512  # a tokenizer's preprocessor packs min(this, the position table)

    def __init__(self, inputs, outputs, backbone, preprocessor=None, **kwargs):
        preprocessor = self.adapt_preprocessor(preprocessor, backbone)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor

    # === The recipe (overridden by subclasses) ===

    def default_optimizer(self, total_steps=None):
        """The optimizer of `compile(optimizer=None)` (here Keras' default),
        scheduled over `total_steps` (known at the first `fit`) if not None."""
        return "rmsprop"

    def default_loss(self):
        """The loss of `compile(loss="auto")`; None: no training objective."""
        return None

    def default_metrics(self):
        """The metrics of `compile(metrics="auto")`."""
        return None

    def label_bounds(self, packed):
        """`(low, high)`: integer labels must lie in `[low, high)`; None: not
        checked. `packed`: whether they go with packed inputs or raw text."""
        return None

    head_size = "num_classes"  # the argument sizing the head: named in label errors, needed by a new head

    def unused_variables(self):
        """The variables no loss of this task reaches (e.g. BERT's pooler under
        a head on the token states), listed as non-trainable (no "Gradients do
        not exist", no weight decay on zero gradients); the layers' `trainable`
        flags unchanged. Defaults to none."""
        return []

    @property
    def trainable_weights(self):
        weights, unused = super().trainable_weights, set(map(id, self.unused_variables()))
        return [v for v in weights if id(v) not in unused] if unused else weights

    trainable_variables = trainable_weights

    @property
    def non_trainable_weights(self):  # a frozen task lists every weight already
        weights, unused = super().non_trainable_weights, set(map(id, self.unused_variables()))
        return weights + [v for v in self.weights if id(v) in unused] if unused and self.trainable else weights

    @property
    def non_trainable_variables(self):
        variables, unused = super().non_trainable_variables, set(map(id, self.unused_variables()))
        return variables + [v for v in self.weights if id(v) in unused] if unused and self.trainable else variables

    # === Preprocessor ===

    @classmethod
    def preprocessor_for(cls, tokenizer, sequence_length):
        """A `preprocessor_class` for `tokenizer`, packing `sequence_length` tokens."""
        return cls.preprocessor_class(tokenizer, sequence_length=sequence_length)

    @classmethod
    def adapt_preprocessor(cls, preprocessor, backbone):
        """`preprocessor` as a `cls.preprocessor_class` that fits `backbone`: a
        tokenizer packing `default_sequence_length` tokens (at most the position
        table), another of the family keeping its tokenizer and `sequence_length`."""
        if preprocessor is None:
            return None
        tokenizer_class = cls.preprocessor_class.tokenizer_class
        if isinstance(preprocessor, tokenizer_class):
            length = min(backbone.max_sequence_length, cls.default_sequence_length)
            preprocessor = cls.preprocessor_for(preprocessor, length)
        elif not isinstance(preprocessor, cls.preprocessor_class):
            if not isinstance(getattr(preprocessor, "tokenizer", None), tokenizer_class) or not hasattr(
                preprocessor, "sequence_length"
            ):
                raise ValueError(
                    f"{cls.__name__} takes a preprocessor=kzoo.{cls.preprocessor_class.__name__} "
                    f"(or another preprocessor with a kzoo.{tokenizer_class.__name__}, or the "
                    f"tokenizer itself); got {type(preprocessor).__name__}."
                )
            preprocessor = cls.preprocessor_for(preprocessor.tokenizer, preprocessor.sequence_length)
        preprocessor.check_fits(backbone)
        return preprocessor

    def set_sequence_length(self, sequence_length):
        """Packs text to `sequence_length` tokens from now on (a new
        `preprocessor_for` the same tokenizer), within the position table."""
        if not 3 <= sequence_length <= self.backbone.max_sequence_length:
            raise ValueError(
                f"sequence_length={sequence_length} must lie in [3, "
                f"{self.backbone.max_sequence_length}] (the backbone's position table)."
            )
        self.preprocessor = self.preprocessor_for(self._require_preprocessor().tokenizer, sequence_length)

    def _require_preprocessor(self):
        if self.preprocessor is None and self.preprocessor_class is None:  # e.g. BertPretrainer
            raise ValueError(
                f"{type(self).__name__} takes packed inputs (a dict with {list(self.input)}, and their "
                "labels), or a tf.data.Dataset of them; not raw text."
            )
        if self.preprocessor is None:
            raise ValueError(
                f"This {type(self).__name__} has no preprocessor, so it takes packed inputs only "
                f"(a dict with {list(self.input)}). For raw text, build it with "
                f"preprocessor=kzoo.{self.preprocessor_class.__name__}(tokenizer, sequence_length) "
                "or load it from a preset directory that holds a tokenizer."
            )
        return self.preprocessor

    # === Data ===

    def complete_inputs(self, inputs):
        """Packed `inputs` (a dict) with the backbone's defaults filled in by
        `backbone.complete_inputs`; the task's own inputs kept."""
        names = set(self.backbone.input)
        completed = self.backbone.complete_inputs({k: v for k, v in inputs.items() if k in names})
        return {**inputs, **completed}

    def _prepare(self, x, y=None, sample_weight=None, batch_size=None, order="by_length", seed=0, refused=None):
        """`(Keras' arguments x, y, sample_weight, batch_size, or None; LengthBatches or None)`,
        the one way in: examples checked, labels converted and text packed once, ids
        and lengths checked once, then batched by length (`order`); a
        `tf.data.Dataset` checked batch by batch, its refused batches in `refused`."""
        x, y = check_examples(x, y, type(self).__name__, batch_size)
        if not isinstance(x, (dict, *IN_MEMORY)):  # a dataset, checked batch by batch; a generator: Keras' own
            if isinstance(x, tf.data.Dataset):
                x = datasets.checked_dataset(datasets.packed(self, x, refused), self.backbone.input_limits(), refused)
            return {"x": x, "y": y, "sample_weight": sample_weight, "batch_size": batch_size}, None
        x = x if isinstance(x, dict) else to_tensors(x, "x", type(self).__name__)
        y = self._label_ids(y, packed=isinstance(x, dict))
        sample_weight = to_tensors(sample_weight, "sample_weight", type(self).__name__)
        x, y, sample_weight = self._packed(x, y, sample_weight)
        data = self._length_batches(  # without a preprocessor, packed inputs keep their length
            x, y, sample_weight, batch_size or 32, order, getattr(self.preprocessor, "padding", "max_length"),
            labels_per_token=getattr(self.preprocessor, "labels_per_token", False), seed=seed,
            compiled=bool(self.jit_compile),  # few lengths for XLA; any multiple of 8 for torch
        )
        return None, data

    _length_batches = LengthBatches  # the batches' class (the embedder's differ for tuples of texts)

    def _packed(self, x, y, sample_weight):
        """Examples in memory as packed NumPy inputs, ids and lengths checked: text packed, packed inputs completed."""
        if not isinstance(x, dict):
            preprocessor = self.preprocessor if self.preprocessor is not None else self._require_preprocessor()
            x, y, sample_weight = batching.packed(preprocessor, x, y, sample_weight)
            backend.check_batch(x, self.backbone.input_limits())
            return x, y, sample_weight
        x = {k: v.numpy() if isinstance(v, tf.Tensor) else v for k, v in x.items()}  # NumPy on every backend
        unknown = set(x) - set(self.input)
        if unknown or "token_ids" not in x:
            found = f"unknown key(s) {sorted(unknown)}" if unknown else f"keys {sorted(x)}"
            raise ValueError(
                f"{type(self).__name__} takes packed inputs with keys {list(self.input)} "
                f"(`token_ids` required); got {found}."
            )
        return self.complete_inputs(checked(x, self.backbone.input_limits())), y, sample_weight

    # === Labels ===

    label_names_argument = None  # the argument naming the labels ("class_names", "tags"), if any

    def check_label_shape(self, shape):
        """A `ValueError` for labels of a shape the task does not take (default: any)."""

    def _label_ids(self, labels, packed):
        """Labels in memory converted once: to tensors, names to ids
        (`label_names_argument`), their shape and range checked (`label_bounds`)."""
        if labels is None or isinstance(labels, dict):  # a dict: a label per output, as they are
            return labels
        owner = type(self).__name__
        labels = to_tensors(labels, "y", owner)
        first = labels[0] if isinstance(labels, tuple) else labels  # e.g. (answer_starts, answer_texts)
        self.check_label_shape(first.shape)
        if first.dtype == tf.string and self.label_names_argument:  # ids of known names: inside the bounds
            names = getattr(self, self.label_names_argument)
            first = input_checks.names_to_ids(first, names, self.label_names_argument, owner)
        else:
            self._check_labels(first, packed)
        return (first, *labels[1:]) if isinstance(labels, tuple) else first

    def _check_labels(self, labels, packed):
        """A `ValueError` for labels that are not integers inside `label_bounds`."""
        bounds = self.label_bounds(packed)
        if bounds is None:
            return
        values = np.asarray(labels.flat_values if isinstance(labels, tf.RaggedTensor) else labels)
        if values.size == 0:
            return
        if values.dtype.kind not in "iuf" or (values.dtype.kind == "f" and not np.all(np.mod(values, 1) == 0)):
            raise ValueError(
                "Labels must be integer class ids; got values such as "
                f"{values.ravel()[:3].tolist()}. Map class names to ids (0, 1, ...) first."
            )
        found = int(values.min()), int(values.max())
        if found[0] < bounds[0] or found[1] >= bounds[1]:
            raise ValueError(
                f"{type(self).__name__} labels must be integers in [{bounds[0]}, {bounds[1] - 1}] "
                f"({self.head_size}={getattr(self, self.head_size)}). Fix the labels, or build the "
                f"model for more classes. Got labels from {found[0]} to {found[1]}."
            )

    # === Compilation ===

    def compile(self, optimizer=None, loss="auto", metrics="auto", **kwargs):
        """Compiles with the task's recipe unless told otherwise.

        Args:
            optimizer: `keras.optimizers.Optimizer` or None. Defaults to `None`:
                `default_optimizer()`, scheduled by the first `fit` over its
                epochs × batches per epoch (unscheduled, with a warning, when
                the data do not tell them).
            loss: str or `keras.losses.Loss`. `"auto"` is `default_loss()`. Defaults to `"auto"`.
            metrics: list or str. Keras metrics; `"auto"` is `default_metrics()`. Defaults to `"auto"`.
            **kwargs: other `keras.Model.compile` arguments (`jit_compile`, ...).
        """
        self._default_optimizer_pending = optimizer is None
        loss = self.default_loss() if loss == "auto" else loss
        metrics = self.default_metrics() if metrics == "auto" else metrics
        super().compile(optimizer=optimizer or self.default_optimizer(), loss=loss, metrics=metrics, **kwargs)

    def _schedule_default_optimizer(self, x, epochs, steps_per_epoch):
        """Gives the default optimizer, not yet built, the schedule of
        `default_optimizer(total_steps)` over the run, without compiling again."""
        if steps_per_epoch is None and isinstance(x, tf.data.Dataset) and int(x.cardinality()) > 0:
            steps_per_epoch = int(x.cardinality())
        if steps_per_epoch is None:
            warnings.warn(
                "The number of training steps is unknown (a dataset of unknown length), so the "
                "default optimizer keeps its constant learning rate, without warmup or decay. Pass "
                "steps_per_epoch, or compile with an optimizer scheduled over the run.",
                UserWarning,
                stacklevel=3,
            )
            return
        schedule = getattr(self.default_optimizer(epochs * steps_per_epoch), "_learning_rate", None)
        if isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            self.optimizer.learning_rate = schedule

    # === Presets and export ===

    @classmethod
    def from_preset(cls, preset, /, load_weights=True, **kwargs):
        """The task from a preset directory or a built-in name.

        A directory holding this task (`save_to_preset`) gives it back; one
        holding a backbone gives it with a fresh head and its tokenizer or
        preprocessor (another checkpoint format converted); a built-in name,
        its released weights and tokenizer with a fresh head, or random
        weights and a warning for an architecture-only name.

        Args:
            preset: str or `os.PathLike`. A preset name or directory.
            load_weights: bool. `False` builds a name's architecture with
                random weights, without a warning or the network (the
                preset's tokenizer is attached only if its files are already
                on this machine). Defaults to `True`.
            **kwargs: the head's arguments (e.g. `num_classes`; label names such
                as `class_names` rename a saved head's), `dtype`, the backbone's
                config fields for a name, or `sequence_length` for the preprocessor.

        Returns:
            An instance of the class `from_preset` is called on.

        Example:

        >>> from kzoo import BertClassifier
        >>> model = BertClassifier.from_preset("bert_tiny", load_weights=False, num_classes=3)
        >>> model.num_classes, model.backbone.num_layers
        (3, 2)
        """
        parameters = inspect.signature(cls.__init__).parameters
        head = serialization.constructor_parameters(cls, skip=PARTS + input_checks.ARGUMENTS)  # shape the head
        saved = presets.saved_task_config(preset, cls)
        changed = {k: v for k, v in kwargs.items() if k in head and saved is not None and saved.get(k) != v}
        if changed:
            raise ValueError(
                f"The {cls.__name__} saved in {preset!r} has "
                + ", ".join(f"{k}={saved.get(k)!r}" for k in changed)
                + f", not {', '.join(f'{k}={v!r}' for k, v in changed.items())}. Its trained head "
                "cannot change shape. To fine-tune a new head on the same encoder, build "
                f"kzoo.{cls.__name__}(backbone=kzoo.{saved['backbone']['class_name']}.from_preset(path), "
                f"preprocessor=kzoo.{cls.preprocessor_class.__name__}.from_preset(path), ...)."
            )
        sequence_length = kwargs.pop("sequence_length", None) if "preprocessor" in parameters else None
        try:
            task = presets.load(cls, preset, load_weights, **kwargs)
        except TypeError:  # the new head's size was neither given nor found in the checkpoint
            missing = [n for n in head if parameters[n].default is inspect.Parameter.empty and n not in kwargs]
            if cls.head_size in head and not {cls.head_size, *input_checks.ARGUMENTS} & set(kwargs):
                missing.append(cls.head_size)
            if saved is not None or not missing:
                raise
            raise ValueError(
                f"{preset!r} holds no {cls.__name__}, so `from_preset` puts a new head on its "
                f"backbone, and a new head needs {' and '.join(f'`{name}`' for name in missing)}: "
                f"kzoo.{cls.__name__}.from_preset({preset!r}, {', '.join(f'{n}=...' for n in missing)})."
            ) from None
        if sequence_length is not None:
            task.set_sequence_length(sequence_length)
        return task

    def save_to_preset(self, preset_dir, format="kzoo"):
        """Writes the task, its backbone and its preprocessor (or tokenizer)
        as a preset directory (KerasHub's layout), for `from_preset` on any
        backend; `format="huggingface"`, the Hugging Face class with the same
        head (e.g. `BertForSequenceClassification` for a `kzoo.BertClassifier`).

        Args:
            preset_dir: str or `os.PathLike`. A new or empty directory, or a preset directory.
            format: str. `"kzoo"` or `"huggingface"`. Defaults to `"kzoo"`.

        Example:

        >>> import tempfile
        >>> from kzoo import BertClassifier
        >>> model = BertClassifier.from_preset("bert_tiny", load_weights=False, num_classes=2)
        >>> path = tempfile.mkdtemp()
        >>> model.save_to_preset(path)
        >>> BertClassifier.from_preset(path).num_classes
        2
        """
        presets.save_task(self, preset_dir, format=format)

    def export(self, path, format="tf_saved_model", **options):
        """Writes the task for serving (`kzoo.export`): `"tf_saved_model"`, a
        SavedModel whose `serving_default` takes strings and returns predictions,
        the tokenizer inside (TensorFlow and tensorflow-text alone serve it);
        `"onnx"`, the network with the tokenizer's vocabulary and settings beside it.

        Args:
            path: str or os.PathLike. A new or empty directory, or an earlier SavedModel.
            format: str. A name in `kzoo.export.FORMATS`. Defaults to `"tf_saved_model"`.
            **options: the task's serving options (`kzoo.export.serving`), e.g.
                `text_pairs=True` for a classifier of sentence pairs.

        Example:

        >>> import os, tempfile
        >>> import tensorflow as tf
        >>> from kzoo import BertBackbone, BertClassifier, BertTokenizer
        >>> backbone = BertBackbone(vocabulary_size=7, num_layers=1, num_heads=2, hidden_dim=8,
        ...                         intermediate_dim=16, max_sequence_length=8)
        >>> model = BertClassifier(backbone, class_names=["negative", "positive"],
        ...     preprocessor=BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]))
        >>> path = os.path.join(tempfile.mkdtemp(), "classifier")
        >>> model.export(path)
        >>> serve = tf.saved_model.load(path).signatures["serving_default"]
        >>> serve(text=tf.constant(["good", "bad"]))["class_names"].numpy().tolist() == [
        ...     name.encode() for name in model.predict_labels(["good", "bad"], verbose=0)]
        True
        """
        from kzoo import export  # noqa: PLC0415 (kzoo.export serves the models: it comes after them)

        return export.export(self, path, format=format, **options)
