"""The base class of kzoo's task models: a backbone, a head, a training recipe.

With a preprocessor attached, `fit`, `evaluate` and `predict` take raw text
(lists, NumPy arrays, `tf.string` tensors, or a batched `tf.data.Dataset` of
them), packed by TensorFlow on the CPU outside the compiled model. Text in
memory takes one way in (`Task._prepare`): examples checked, packed
(`Preprocessor.preprocess_in_memory`), ids and lengths checked once
(`kzoo.models.batch_checks`), then grouped by length into batches each
padded only as far as its longest text needs (`kzoo.models.batching`); a
dataset is mapped by the preprocessor batch by batch, with the same checks
as assertions that fail its first bad batch with the same message. Packed
inputs (a dict) skip the packing.
"""

import types
import warnings

import keras
import numpy as np
import tensorflow as tf

from kzoo import backend
from kzoo.models import batch_checks, on_batch, quantization, serialization, task_export, task_presets
from kzoo.models.batching import FollowEpochs, LengthBatches, padded_to, resumed_stream, split_off
from kzoo.models.input_checks import check_examples, check_int
from kzoo.models.preprocessor import assert_in, label_range, split_rows, to_tensors

IN_MEMORY = (str, bytes, list, tuple, np.ndarray, tf.Tensor, tf.RaggedTensor)


class Task(keras.Model):
    """A backbone with a head and its training recipe, trained on raw text.

    A subclass builds its head on the backbone in a functional graph and calls
    `super().__init__(inputs, outputs, backbone=..., preprocessor=...)`; it
    stores its other constructor arguments as attributes of the same name
    (they are its config, with the backbone and preprocessor serialized). It
    declares `preprocessor_class`, the preprocessor a tokenizer (or another
    preprocessor of the family) is turned into, and its recipe:
    `default_optimizer(total_steps)`, `default_loss()`, `default_metrics()`,
    and `label_bounds(packed)` for the label checks.

    A task not compiled compiles itself with its recipe at its first `fit` or
    `evaluate`, so `from_preset(...)` then `fit(...)` works, and the default
    optimizer's schedule follows the number of steps of that `fit`. Packed
    ids and lengths are checked before the compiled step
    (`kzoo.models.batch_checks`). On JAX, a `fit`/`evaluate`/`predict` that
    raises leaves the model usable (`kzoo.backend.keep_state_on_error`);
    `jit_compile="auto"` means XLA on TensorFlow as on JAX
    (`kzoo.backend.auto_jit_compile`). `save`, `save_weights` and
    `save_to_preset` are atomic (`serialization.save`).

    Args:
        inputs: dict of `keras.Input`s. The graph's inputs.
        outputs: a tensor or a dict of tensors. The graph's outputs.
        backbone: `kzoo.models.Backbone`. The network, kept as `self.backbone`.
        preprocessor: `kzoo.models.Preprocessor`, a tokenizer, or None. Kept,
            as a `preprocessor_class`, as `self.preprocessor`. Defaults to `None`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Example (through a subclass):

    >>> import tempfile
    >>> from kzoo import BertBackbone, BertClassifier, BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"])
    >>> backbone = BertBackbone(vocabulary_size=7, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> model = BertClassifier(backbone, num_classes=2, preprocessor=tokenizer)
    >>> isinstance(model, Task), sorted(model.get_config())
    (True, ['backbone', 'class_names', 'dropout', 'name', 'num_classes', 'preprocessor', 'trainable'])
    >>> model.predict(["good", "bad good"], verbose=0).shape  # raw text, packed by the preprocessor
    (2, 2)
    >>> path = tempfile.mkdtemp()
    >>> model.save_to_preset(path)
    >>> BertClassifier.from_preset(path, sequence_length=6).preprocessor.sequence_length
    6
    """

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

    def _label_meaning(self):
        return f"num_classes={getattr(self, 'num_classes', '?')}"

    def unused_variables(self):
        """The variables no loss of this task reaches (e.g. BERT's pooler
        under a head on the token states), which this model lists as
        non-trainable: the same on every backend (TensorFlow and torch would
        warn "Gradients do not exist", JAX would apply weight decay to their
        zero gradients). The layers' own `trainable` flags are unchanged.
        Defaults to none."""
        return []

    def _unused_ids(self):
        return {id(v) for v in self.unused_variables()} if self.trainable else set()

    @property
    def trainable_weights(self):
        return [v for v in super().trainable_weights if id(v) not in self._unused_ids()]

    @property
    def trainable_variables(self):
        return self.trainable_weights

    @property
    def non_trainable_weights(self):
        unused = self._unused_ids()
        return super().non_trainable_weights + [v for v in self.weights if id(v) in unused]

    @property
    def non_trainable_variables(self):
        unused = self._unused_ids()
        return super().non_trainable_variables + [v for v in self.weights if id(v) in unused]

    # === Preprocessor ===

    @classmethod
    def preprocessor_for(cls, tokenizer, sequence_length):
        """A `preprocessor_class` for `tokenizer`, packing `sequence_length` tokens."""
        return cls.preprocessor_class(tokenizer, sequence_length=sequence_length)

    @classmethod
    def adapt_preprocessor(cls, preprocessor, backbone):
        """`preprocessor` as a `cls.preprocessor_class`, checked against `backbone`.

        A tokenizer gets a preprocessor of `default_sequence_length` tokens
        (at most the backbone's position table); another preprocessor of the
        family (e.g. one saved with another task) keeps its tokenizer and
        `sequence_length`. Both must fit the backbone (`Preprocessor.check_fits`).
        """
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

    def _prepare(self, x, y=None, sample_weight=None, batch_size=None, order="by_length", seed=0):
        """`(keras arguments x, y, sample_weight, batch_size; LengthBatches or None)`:
        examples checked → packed → ids and lengths checked once → batched by
        length (`order`); a `tf.data.Dataset` mapped batch by batch."""
        x, y = check_examples(x, y, type(self).__name__, batch_size)
        arguments = {"x": x, "y": y, "sample_weight": sample_weight, "batch_size": batch_size}
        if isinstance(x, tf.data.Dataset):
            return {**arguments, "x": self._map_dataset(x)}, None
        if isinstance(x, dict):
            self._check_labels(y, packed=True)
            x = self._check_packed(x)
        elif isinstance(x, IN_MEMORY):
            preprocessor = self._require_preprocessor()
            owner = type(self).__name__
            x, y, sample_weight = (
                to_tensors(value, name, owner) for value, name in ((x, "x"), (y, "y"), (sample_weight, "sample_weight"))
            )
            self._check_labels(y, packed=False)
            x, y, sample_weight = preprocessor.preprocess_in_memory(x, y, sample_weight)
            # Packed by a tokenizer that may not be the backbone's (one replaced since).
            x = batch_checks.checked(x, self.backbone.input_limits())
        else:  # a generator, a PyDataset, None: Keras' own
            return arguments, None
        data = LengthBatches(  # without a preprocessor, packed inputs keep their length
            x, y, sample_weight, batch_size or 32, order, getattr(self.preprocessor, "padding", "max_length"),
            labels_per_token=getattr(self.preprocessor, "labels_per_token", False), seed=seed,
            compiled=bool(self.jit_compile),  # few lengths for XLA; any multiple of 8 for torch
        )
        return data.for_keras(), data

    def _map_dataset(self, dataset):
        """A `tf.data.Dataset` of raw text packed by the preprocessor (labels
        asserted in the pipeline); one of packed inputs with its labels
        asserted; either with its ids and lengths asserted batch by batch."""
        return batch_checks.checked_dataset(self._packed_dataset(dataset), self.backbone.input_limits())

    def _packed_dataset(self, dataset):
        spec = dataset.element_spec
        features = spec[0] if isinstance(spec, tuple) else spec
        if isinstance(features, dict):
            if self.label_bounds(packed=True) is None or not isinstance(spec, tuple) or len(spec) < 2:
                return dataset
            return dataset.map(lambda x, y, *w: (x, self._assert_labels(y, packed=True), *w))
        preprocessor = self._require_preprocessor()
        first = features[0] if isinstance(features, tuple) else features
        if first.shape.rank == 0:
            raise ValueError(
                f"{type(self).__name__} takes batched datasets: call `dataset.batch(32)` first "
                "(fine-tuning runs on batches, e.g. of 16 or 32)."
            )

        def preprocess(*element):
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(element)
            return preprocessor(x, self._assert_labels(y, packed=False), sample_weight)

        return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def _check_packed(self, x):
        """Packed inputs in memory, checked (`kzoo.models.batch_checks`: ids
        inside their tables, lengths inside the position table) and completed."""
        # TensorFlow tensors (a preprocessor's output) as NumPy, for every backend.
        x = {k: v.numpy() if isinstance(v, tf.Tensor) else v for k, v in x.items()}
        unknown = set(x) - set(self.input)
        if unknown or "token_ids" not in x:
            found = f"unknown key(s) {sorted(unknown)}" if unknown else f"keys {sorted(x)}"
            raise ValueError(
                f"{type(self).__name__} takes packed inputs with keys {list(self.input)} "
                f"(`token_ids` required); got {found}."
            )
        return self.complete_inputs(batch_checks.checked(x, self.backbone.input_limits()))

    def _check_labels(self, labels, packed):
        """A `ValueError` for integer labels in memory outside `label_bounds`."""
        bounds = self.label_bounds(packed)
        found = None if bounds is None else label_range(labels)
        if found is not None and (found[0] < bounds[0] or found[1] >= bounds[1]):
            raise ValueError(self._bounds_message(bounds) + f" Got labels from {found[0]} to {found[1]}.")

    def _assert_labels(self, labels, packed):
        """`labels` checked against `label_bounds` inside `tf.data` (same message)."""
        bounds = self.label_bounds(packed)
        return labels if bounds is None or labels is None else assert_in(labels, bounds, self._bounds_message(bounds))

    def _bounds_message(self, bounds):
        return (
            f"{type(self).__name__} labels must be integers in [{bounds[0]}, {bounds[1] - 1}] "
            f"({self._label_meaning()}). Fix the labels, or build the model for more classes."
        )

    # === Keras entry points ===

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=None, *, sample_weight=None, **kwargs):
        """`keras.Model.fit`, also on raw text (see the module docstring).

        Examples in memory go in batches of similar lengths drawn from
        `(seed, epoch)` (`kzoo.models.batching`), so a `fit` resumed by
        `keras.callbacks.BackupAndRestore` sees the uninterrupted one's
        batches; a dataset read with `steps_per_epoch` is read on from where a
        backup stopped. `validation_split` holds out the last fraction of
        examples in memory (text or packed); `shuffle=None` (the default) is
        True except for a `tf.data.Dataset`, which shuffles itself."""
        if not self.compiled:
            self.compile()
        check_int(epochs, "epochs", type(self).__name__, minimum=0)
        if validation_split and validation_data is None and isinstance(x, (*IN_MEMORY, dict)):
            (x, held_x), (y, held_y), (sample_weight, held_w) = (
                split_off(v, validation_split) for v in (x, y, sample_weight)
            )
            validation_data, validation_split = (held_x, held_y, held_w), 0.0
        shuffle = not isinstance(x, tf.data.Dataset) if shuffle is None else shuffle
        order = "shuffled" if shuffle else "given"
        train, data = self._prepare(x, y, sample_weight, batch_size, order, seed=int(np.random.randint(2**31 - 1)))
        if data is not None:
            callbacks, shuffle = [*(callbacks or []), FollowEpochs(data)], False
        elif isinstance(train["x"], tf.data.Dataset) and kwargs.get("steps_per_epoch"):
            train["x"] = resumed_stream(train["x"], callbacks, kwargs["steps_per_epoch"])
        if validation_data is not None:
            unpacked = validation_data if isinstance(validation_data, tuple) else (validation_data,)
            validation = self._prepare(*keras.utils.unpack_x_y_sample_weight(unpacked), batch_size)[0]
            validation_data = validation["x"] if validation["y"] is None else (validation["x"], validation["y"])
        self._schedule_default_optimizer(train, data, epochs, kwargs.get("steps_per_epoch"))
        backend.build_optimizer_before_fit(self)  # one trace of the step, not two (TensorFlow)
        with batch_checks.reported(self):
            return super().fit(
                **train, epochs=epochs, verbose=verbose, callbacks=callbacks,
                validation_split=validation_split, validation_data=validation_data, shuffle=shuffle, **kwargs,
            )

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", *, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`, also on raw text (see the module docstring);
        examples in memory in batches of similar lengths (as `fit`)."""
        if not self.compiled:
            self.compile()
        callbacks = kwargs.pop("callbacks", None)
        prepared = self._prepare(x, y, sample_weight, batch_size)[0]
        with batch_checks.reported(self):
            return super().evaluate(**prepared, verbose=verbose, callbacks=callbacks, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        """`keras.Model.predict`, also on raw text (see the module docstring).

        Examples in memory run in batches of similar lengths; outputs come
        back in the caller's order, a sequence axis at the packed length (0
        beyond each batch's padded length)."""
        prepared, data = self._prepare(x, batch_size=batch_size)
        self._pad_outputs_to(None if data is None else data.max_length)
        with batch_checks.reported(self):
            if data is not None and len(data) == 1 and not kwargs:
                # One batch (e.g. one request): Keras' step without its data pipeline and
                # progress bar, 5 ms instead of 50 on TensorFlow.
                outputs = keras.Model.predict_on_batch(self, prepared["x"])
            else:
                callbacks = kwargs.pop("callbacks", None)
                outputs = super().predict(prepared["x"], batch_size=prepared["batch_size"], verbose=verbose,
                                          callbacks=callbacks, **kwargs)
        if data is None:
            return outputs
        back = np.argsort(data.rows())  # the caller's order
        return keras.tree.map_structure(lambda array: array[back], outputs)

    def predict_step(self, *args):
        # Keras' step takes `(data)`, or `(state, data)` on JAX; outputs along
        # the sequence padded back so that batches of different lengths concatenate.
        length = getattr(self, "_output_length", None)
        return backend.map_predictions(
            super().predict_step(*args),
            lambda outputs: outputs if length is None else padded_to(length, outputs, self.output),
        )

    def _pad_outputs_to(self, length):
        if length != getattr(self, "_output_length", None):
            self._output_length = length
            self.predict_function = None  # traced with the old length

    train_on_batch = on_batch.train_on_batch
    test_on_batch = on_batch.test_on_batch
    predict_on_batch = on_batch.predict_on_batch

    def _one_batch(self, x, y, sample_weight, with_labels):
        # The `*_on_batch` entry points (kzoo.models.on_batch): raw text packed, all checked.
        if with_labels and not self.compiled:
            self.compile()
        prepared, data = self._prepare(x, y, sample_weight, order="given")
        if data is None:
            return prepared["x"], prepared["y"], prepared["sample_weight"]
        self._pad_outputs_to(data.max_length)
        return (*data.batch(np.arange(data.size)), None, None)[:3]

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
        # A read-only mapping: Keras would track a dict and count its metrics twice.
        self._compile_arguments = types.MappingProxyType({
            "loss": self.default_loss() if loss == "auto" else loss,
            "metrics": self.default_metrics() if metrics == "auto" else metrics,
            **kwargs,
        })
        self._default_optimizer_pending = optimizer is None
        super().compile(optimizer=optimizer or self.default_optimizer(), **self._compile_arguments)

    def _schedule_default_optimizer(self, train, data, epochs, steps_per_epoch):
        """Replaces the default optimizer by one scheduled over the run."""
        if not getattr(self, "_default_optimizer_pending", False) or self.optimizer.built:
            return
        self._default_optimizer_pending = False
        if steps_per_epoch is None:
            if data is not None:
                steps_per_epoch = len(data)
            elif isinstance(train["x"], tf.data.Dataset) and int(train["x"].cardinality()) > 0:
                steps_per_epoch = int(train["x"].cardinality())
        if steps_per_epoch is None:
            warnings.warn(
                "The number of training steps is unknown (a dataset of unknown length), so the "
                "default optimizer keeps its constant learning rate, without warmup or decay. Pass "
                "steps_per_epoch, or compile with an optimizer scheduled over the run.",
                UserWarning,
                stacklevel=3,
            )
            return
        super().compile(optimizer=self.default_optimizer(epochs * steps_per_epoch), **self._compile_arguments)

    def _resolve_auto_jit_compile(self):
        # Keras' trainer asks this for `jit_compile="auto"`.
        return backend.auto_jit_compile(self, super()._resolve_auto_jit_compile)

    def compile_from_config(self, config):
        # `.keras` loading: Keras skips a subclass's own `compile` unless asked here.
        serialization.recompile(self, config)

    # === Config and presets ===

    def get_config(self):
        return quantization.with_mode(
            self, {"name": self.name, "trainable": self.trainable, **serialization.constructor_config(self)}
        )

    @classmethod
    def from_config(cls, config):
        return quantization.from_config(cls, config, serialization.from_constructor_config)

    quantize = quantization.quantize  # int8 for inference, kept by configs and presets

    save = serialization.save  # atomic: written beside, renamed into place
    save_weights = serialization.save_weights

    from_preset = classmethod(task_presets.from_preset)
    save_to_preset = task_presets.save_to_preset

    export = task_export.export

