"""The one base of kzoo's `Backbone` and `Task`: a config made of the
constructor's arguments (with int8 `quantize` and LoRA), `fit`, `evaluate`,
`predict` and the `*_on_batch` methods on one checked path (the subclass's
`_prepare`), atomic `save` / `save_weights`, and `jit_compile="auto"` as XLA on
TensorFlow as on JAX.
"""

import functools

import keras
import numpy as np
import tensorflow as tf

from kzoo import backend
from kzoo.layers import lora
from kzoo.models import accumulation, batching, quantization, serialization
from kzoo.models.datasets import resumed_stream
from kzoo.models.input_checks import check_int, num_rows
from kzoo import atomic


class BaseModel(keras.Model):
    """`keras.Model` with kzoo's config, checked data path and atomic saves.

    Subclasses (`kzoo.models.Backbone`, `kzoo.models.Task`) define
    `_prepare(x, y, sample_weight, batch_size, order, seed, refused)`, which returns
    Keras' arguments `{"x", "y", "sample_weight", "batch_size"}` and None, or for
    data batched by length None and the `kzoo.models.batching.LengthBatches`
    (what Keras reads of it, `for_keras()`, built by `fit` and `evaluate` only).
    A class with `compiles_itself = True` compiles with its recipe at its
    first `fit`, `evaluate` or `*_on_batch` with labels.

    Example:

    >>> import numpy as np
    >>> class Tiny(BaseModel):
    ...     def __init__(self, units, **kwargs):
    ...         inputs = keras.Input((2,))
    ...         super().__init__(inputs, keras.layers.Dense(units)(inputs), **kwargs)
    ...         self.units = units
    ...     def _prepare(self, x, y=None, sample_weight=None, batch_size=None, order=None, seed=0, refused=None):
    ...         return {"x": x, "y": y, "sample_weight": sample_weight, "batch_size": batch_size}, None
    >>> model = Tiny(3)
    >>> Tiny.from_config(model.get_config()).units
    3
    >>> model.predict(np.ones((2, 2)), verbose=0).shape
    (2, 3)
    """

    compiles_itself = False

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable,
                  **serialization.constructor_config(self, skip=("dtype",))}
        if "dtype" in serialization.constructor_parameters(type(self)):
            config["dtype"] = keras.dtype_policies.serialize(self.dtype_policy)
        return lora.with_record(self, quantization.with_mode(self, config))

    @classmethod
    def from_config(cls, config):
        def build(cls, config):
            return quantization.from_config(cls, config, serialization.from_constructor_config)

        return lora.from_config(cls, config, build)

    def compile_from_config(self, config):
        # `.keras` loading: Keras skips a subclass's own `compile` unless asked here;
        # the optimizer is built so that its saved state can be loaded into it.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def quantize(self, mode, config=None):
        """Quantizes the weights to int8 for inference, in place; configs,
        `.keras` files and presets keep the mode (`kzoo.models.quantization`).

        Args:
            mode: str. `"int8"`.
            config: `keras.quantizers.Int8QuantizationConfig` or None.
                Keras' default only. Defaults to `None`.

        Example:

        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
        >>> backbone.quantize("int8")
        >>> backbone.get_config()["quantization"]
        'int8'
        """
        if lora.adapted_layers(self):
            raise ValueError(
                f"This {type(self).__name__} has LoRA on; quantize its base before enable_lora (the factors "
                "train in float32 on the int8 kernels), or quantize model.merge_lora() for inference."
            )
        quantization.quantize(self, mode, config)

    # === LoRA (kzoo.layers.lora) ===

    def enable_lora(self, rank, target_layer_names=None, alpha=None):
        """Low-rank adapters (LoRA, Hu et al. 2021, sec. 4) on the backbone's
        attention projections: `W0 x + (alpha / rank) B A x`, with W0 and the
        rest of the backbone frozen; a task's head keeps training. The
        config, presets and `.keras` files keep LoRA on; `export` and the
        Hugging Face format write the merged kernels. For an int8 base,
        `quantize` the backbone first (see `kzoo.layers.lora`). A BERT task's
        `compile()` then defaults to LoRA's learning rate, 2e-3.

        Args:
            rank: int. The factors' inner size r (8 is common).
            target_layer_names: list of str or None. The `Dense` /
                `EinsumDense` layers to adapt, by name. Defaults to `None`:
                `["query", "value"]` (sec. 7.1's W_q and W_v).
            alpha: float or None. The update's scale is `alpha / rank`.
                Defaults to `None`: `rank`.

        Example:

        >>> from kzoo import BertClassifier
        >>> model = BertClassifier.from_preset("bert_tiny", load_weights=False, num_classes=2)
        >>> model.enable_lora(8)
        >>> sum(int(np.prod(v.shape)) for v in model.trainable_weights)  # of 4.4M: A, B and the head
        10498
        """
        lora.enable(self, rank, target_layer_names, alpha)

    def save_lora_weights(self, filepath):
        """Writes what trains with LoRA on (the factors, a task's head) to a
        small `.lora.h5` file, atomically; `load_lora_weights` reads it into
        a model from the same preset.

        Args:
            filepath: str or os.PathLike. A path ending in `.lora.h5`.

        Example:

        >>> import os, tempfile
        >>> from kzoo import BertClassifier
        >>> model = BertClassifier.from_preset("bert_tiny", load_weights=False, num_classes=2)
        >>> model.enable_lora(8)
        >>> path = os.path.join(tempfile.mkdtemp(), "areas.lora.h5")
        >>> model.save_lora_weights(path)
        >>> again = BertClassifier.from_preset("bert_tiny", load_weights=False, num_classes=2)
        >>> again.load_lora_weights(path)
        >>> again.backbone.get_config()["lora"]
        {'rank': 8, 'alpha': 8, 'target_layer_names': ['query', 'value']}
        """
        lora.save_adapter(self, filepath)

    def load_lora_weights(self, filepath):
        """Reads a `save_lora_weights` file, turning LoRA on with its rank
        and targets first if it is off; each trained variable must match
        (see `save_lora_weights`).

        Args:
            filepath: str or os.PathLike. A `.lora.h5` file.
        """
        lora.load_adapter(self, filepath)

    def merge_lora(self):
        """A new model without LoRA whose kernels hold `W0 + (alpha / rank) B A`
        (Keras' merge), for serving; this one is unchanged. `export` and the
        Hugging Face format merge by themselves.

        Example:

        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
        >>> backbone.enable_lora(2)
        >>> "lora" in backbone.merge_lora().get_config()
        False
        """
        return lora.merged(self)

    def save(self, filepath, overwrite=True, zipped=None, **kwargs):
        """`keras.Model.save`, atomic: the `.keras` file is written beside
        `filepath` and renamed into place once complete, so a failed save
        leaves the previous file. Non-local paths, `overwrite=False` over a
        file and `zipped=False` are left to Keras.

        Example:

        >>> import os, tempfile
        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
        >>> path = os.path.join(tempfile.mkdtemp(), "backbone.keras")
        >>> backbone.save(path)
        >>> os.listdir(os.path.dirname(path))
        ['backbone.keras']
        """
        with atomic.replacing_file_of_keras(filepath, overwrite, zipped is not False) as path:
            return super().save(path, overwrite=overwrite, zipped=zipped, **kwargs)

    def save_weights(self, filepath, overwrite=True, max_shard_size=None):
        """`keras.Model.save_weights`, atomic as `save` (what
        `keras.callbacks.BackupAndRestore` and `ModelCheckpoint` write);
        sharded weights are left to Keras.

        Example:

        >>> import os, tempfile
        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
        >>> path = os.path.join(tempfile.mkdtemp(), "backbone.weights.h5")
        >>> backbone.save_weights(path)
        >>> os.listdir(os.path.dirname(path))
        ['backbone.weights.h5']
        """
        with atomic.replacing_file_of_keras(filepath, overwrite, max_shard_size is None) as path:
            super().save_weights(path, overwrite=overwrite, max_shard_size=max_shard_size)
            if max_shard_size is None:
                lora.append_state(self, path)  # W0, A and B as they are: a resumed fit goes on exactly

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        """`keras.Model.load_weights`, and with LoRA on the unmerged factors
        `save_weights` adds (`kzoo.layers.lora`).

        Example:

        >>> import os, tempfile
        >>> from kzoo import BertBackbone
        >>> lora_on = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
        >>> lora_on.enable_lora(2)
        >>> path = os.path.join(tempfile.mkdtemp(), "lora.weights.h5")
        >>> lora_on.save_weights(path)   # Keras' merged kernels, and W0, A and B beside them
        >>> again = BertBackbone.from_config(lora_on.get_config())
        >>> again.load_weights(path)
        >>> all(np.array_equal(a, b) for a, b in zip(again.get_weights(), lora_on.get_weights()))
        True
        """
        super().load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)
        if str(filepath).endswith(".weights.h5"):
            lora.restore_state(self, filepath)

    def loss_counts(self, y, sample_weight=None):
        """What the loss averages over, per example (`{name: (batch,) tensor}`, e.g. real target
        tokens), for accumulation equal to the big batch (`kzoo.models.accumulation`); None: no such mean."""
        return None

    def renormalised_loss(self, loss, y, y_pred, sample_weight, normalisers):
        """A micro-batch's `loss` (a mean over the one count of `loss_counts`) as its
        share of its group's mean: times its count over the normaliser (group's count / k)."""
        (name, normaliser), = normalisers.items()
        return loss * keras.ops.sum(self.loss_counts(y, sample_weight)[name]) / normaliser

    def _compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        # Keras' train and test steps compute the loss here; micro-batches send normalisers with their weights.
        sample_weight, normalisers = self._split_normalisers(sample_weight)
        loss = super()._compute_loss(x, y, y_pred, sample_weight, training)
        return loss if normalisers is None else self.renormalised_loss(loss, y, y_pred, sample_weight, normalisers)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, y, y_pred, self._split_normalisers(sample_weight)[0])

    @staticmethod
    def _split_normalisers(sample_weight):
        # `(sample_weight, normalisers)`: a batch's own weights (or None) and its normalisers as scalars (or None).
        if not isinstance(sample_weight, dict) or accumulation.NORMALISERS not in sample_weight:
            return sample_weight, None
        normalisers = {name: value[0] for name, value in sample_weight[accumulation.NORMALISERS].items()}
        return sample_weight.get(accumulation.SAMPLE_WEIGHT), normalisers  # each equal across a batch

    def make_train_function(self, force=False):
        if self.train_function is None and getattr(getattr(self, "backbone", self), "_lora", None):
            lora.revive(self)  # factors Keras zeroed when loading a `.keras` file
        return super().make_train_function(force=force)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=None, *, sample_weight=None, **kwargs):
        """`keras.Model.fit` on checked data (a task's also raw text).

        Examples in memory go in batches of similar lengths drawn from `(seed, epoch)`
        (`kzoo.models.batching`): a `fit` resumed by `keras.callbacks.BackupAndRestore` sees
        the uninterrupted one's batches, and a dataset read with `steps_per_epoch` goes on from
        the backup. `validation_split` holds out the last fraction of examples in memory before
        shuffling, as Keras does (raw text and label names too); `validation_data` takes what
        `fit` takes, in batches of `validation_batch_size` (else `batch_size`). `shuffle=None`
        (the default) is True except for a `tf.data.Dataset`."""
        if self.compiles_itself and not self.compiled:
            self.compile()
        owner = type(self).__name__
        check_int(epochs, "epochs", owner, minimum=0)
        if validation_data is None:
            x, y, sample_weight, validation_data = batching.held_out(x, y, sample_weight, validation_split, owner)
        elif not isinstance(validation_data, tuple):
            validation_data = batching.validation_tuple(validation_data, y, owner)
        shuffle = not isinstance(x, tf.data.Dataset) if shuffle is None else shuffle
        order = "shuffled" if shuffle else "given"
        refused = []  # this call's batches refused inside tf.data (`kzoo.models.input_checks`)
        seed = int(np.random.randint(2**31 - 1))
        train, data = self._prepare(x, y, sample_weight, batch_size, order, seed, refused)
        if type(self).loss_counts is not BaseModel.loss_counts:  # micro-batches normalised over their group's tokens
            train, data = accumulation.accumulated(self, train, data, order)
        if data is not None:
            follow = keras.callbacks.LambdaCallback(on_epoch_begin=data.set_epoch)  # a resumed fit: its epoch
            callbacks, shuffle, train = [*(callbacks or []), follow], False, data.for_keras()
        elif isinstance(train["x"], tf.data.Dataset) and kwargs.get("steps_per_epoch"):
            train["x"] = resumed_stream(train["x"], callbacks, kwargs["steps_per_epoch"])
        if validation_data is not None:
            held_batch_size = kwargs.pop("validation_batch_size", None) or batch_size
            held_x, held_y, held_w = keras.utils.unpack_x_y_sample_weight(validation_data)
            held, held_data = self._prepare(held_x, held_y, held_w, held_batch_size, refused=refused)
            held = held or held_data.for_keras()
            validation_data = held["x"] if held["y"] is None else (held["x"], held["y"], held["sample_weight"])
        if getattr(self, "_default_optimizer_pending", False) and not self.optimizer.built:
            steps = kwargs.get("steps_per_epoch") or (len(data) if data is not None else None)
            self._schedule_default_optimizer(train["x"], epochs, steps)
        backend.build_optimizer_before_fit(self)  # one trace of the step, not two (TensorFlow)
        with backend.checked_upstream(self, refused):
            return super().fit(
                **train, epochs=epochs, verbose=verbose, callbacks=callbacks,
                validation_split=0.0, validation_data=validation_data, shuffle=shuffle, **kwargs,  # held out above
            )

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", *, sample_weight=None, **kwargs):
        """`keras.Model.evaluate` on checked data (a task's also raw text),
        examples in memory in batches of similar lengths (as `fit`)."""
        if kwargs.get("_use_cached_eval_dataset"):
            # `fit`'s validation pass: Keras reads the batches `fit` prepared and checked, whatever `x` says.
            return super().evaluate(x, y, batch_size, verbose, sample_weight=sample_weight, **kwargs)
        if self.compiles_itself and not self.compiled:
            self.compile()
        refused = []
        prepared, data = self._prepare(x, y, sample_weight, batch_size, refused=refused)
        with backend.checked_upstream(self, refused):
            return super().evaluate(**(prepared or data.for_keras()), verbose=verbose, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        """`keras.Model.predict` on checked data (a task's also raw text). Examples in memory
        run in batches of similar lengths, each by Keras' `predict_on_batch` (with `callbacks`
        and a progress bar over several batches); outputs come back in the caller's order, a
        sequence axis at the packed length (0 beyond each batch's padded length)."""
        refused = []
        prepared, data = self._prepare(x, batch_size=batch_size, refused=refused)
        if data is not None and kwargs.get("steps") is not None:
            raise ValueError(f"{type(self).__name__}.predict predicts examples in memory whole: steps= counts "
                             "batches of a tf.data.Dataset only. Slice the examples instead.")
        with backend.checked_upstream(self, refused):
            if data is None:
                return super().predict(prepared["x"], batch_size=prepared["batch_size"], verbose=verbose, **kwargs)
            progress_bar = verbose != 0 and len(data) > 1
            if not (kwargs.get("callbacks") or progress_bar):  # nothing to tell (a few texts, quietly): no list
                outputs = [self._predict_batch(batch[0]) for batch in data]
            else:
                outputs = self._predict_batches(data, keras.callbacks.CallbackList(
                    kwargs.get("callbacks"), add_progbar=progress_bar, verbose=verbose, epochs=1,
                    steps=len(data), model=self,
                ))
        return keras.tree.map_structure(functools.partial(batching.joined, data), self.output, *outputs)

    def _predict_batches(self, data, callbacks):
        # Keras' predict loop over `data`'s batches, with `callbacks` told.
        callbacks.on_predict_begin()
        outputs = []
        for index in range(len(data)):
            callbacks.on_predict_batch_begin(index)
            outputs.append(self._predict_batch(data[index][0]))
            callbacks.on_predict_batch_end(index, {"outputs": outputs[-1]})
        callbacks.on_predict_end()
        return outputs

    def _predict_batch(self, x):
        # Keras' `predict_on_batch` on one of `predict`'s batches, leaner on JAX (`backend.predict_on_batch`).
        return backend.predict_on_batch(self, x, super().predict_on_batch)

    def make_predict_function(self, force=False):
        """Keras' predict function, traced by every model over the same code:
        without TensorFlow's warning that adds their traces up
        (`kzoo.backend.without_retracing_warning`); on torch, small batches
        traced (`kzoo.backend.fast_predict_function`)."""
        function = super().make_predict_function(force)  # None when it builds one (TensorFlow)
        backend.without_retracing_warning(self.predict_function)
        self.predict_function = backend.fast_predict_function(self, self.predict_function)
        return function

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
        """`keras.Model.train_on_batch` on a batch checked (a task's also
        packed from raw text) as `fit` checks it: a bad batch is a
        `ValueError` before the step, which then leaves the weights as they were.

        Example:

        >>> import numpy as np
        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
        >>> backbone.compile(optimizer="sgd", loss={"pooled_output": "mse"})
        >>> backbone.train_on_batch({"token_ids": np.full((2, 4), 50)}, {"pooled_output": np.zeros((2, 8))})
        Traceback (most recent call last):
        ...
        ValueError: `token_embedding` ids must lie in [0, 50) (the embedding table has 50 rows), but got values ...
        """
        x, y, sample_weight = self._one_batch(x, y, sample_weight)
        backend.build_optimizer_before_fit(self)  # one trace of the step, not two (TensorFlow)
        with backend.checked_upstream(self):
            return super().train_on_batch(x, y, sample_weight=sample_weight, class_weight=class_weight,
                                          return_dict=return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """`keras.Model.test_on_batch` on a batch checked as `evaluate` checks it.

        Example:

        >>> import numpy as np
        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
        >>> backbone.compile(loss={"pooled_output": "mse"})
        >>> x = {"token_ids": np.ones((2, 4), "int32")}
        >>> float(backbone.test_on_batch(x, {"pooled_output": np.zeros((2, 8))})) >= 0
        True
        """
        x, y, sample_weight = self._one_batch(x, y, sample_weight)
        with backend.checked_upstream(self):
            return super().test_on_batch(x, y, sample_weight=sample_weight, return_dict=return_dict)

    def predict_on_batch(self, x):
        """`keras.Model.predict_on_batch` on a batch checked as `predict` checks it.

        Example:

        >>> import numpy as np
        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
        >>> backbone.predict_on_batch({"token_ids": np.ones((2, 4), "int32")})["sequence_output"].shape
        (2, 4, 8)
        """
        return self.predict(x, batch_size=num_rows(x) or None, verbose=0)

    def _one_batch(self, x, y, sample_weight):
        # One batch as Keras' `train_on_batch` and `test_on_batch` take it: checked, and raw text packed.
        if self.compiles_itself and not self.compiled:
            self.compile()
        prepared, data = self._prepare(x, y, sample_weight, order="given")
        if data is None:
            return prepared["x"], prepared["y"], prepared["sample_weight"]
        return (*data.batch(np.arange(len(data.lengths))), None, None)[:3]

    def _resolve_auto_jit_compile(self):
        # Keras' trainer asks this for `jit_compile="auto"`.
        return backend.auto_jit_compile(self, super()._resolve_auto_jit_compile)
