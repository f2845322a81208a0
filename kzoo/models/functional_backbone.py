"""Config, dtype and preset plumbing shared by kzoo's functional models: the
BERT encoder (BERT sec. 3) and the Transformer ("Attention Is All You Need"
sec. 3), whose constructors take plain numbers and build a functional graph."""

import keras

from kzoo import presets


class FunctionalBackbone:
    """Mixin for a functional `keras.Model` subclass configured by plain
    arguments (the papers' hyper-parameters, named in `config_fields`).

    Its `__init__` builds the layers in a namespace, calls
    `keras.Model.__init__` on the graph, then `self._adopt(layers, dtype,
    locals())`: the layers become attributes (deterministic weight paths for
    checkpoints and layout maps) and the config fields are stored. The mixin
    gives `get_config` / `from_config` (dtype policies included),
    `from_preset` and `save_to_preset` (KerasHub's preset layout).

    Example:

    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16, dtype="mixed_bfloat16")
    >>> config = backbone.get_config()
    >>> config["num_layers"], config["dtype"]["config"]["name"]
    (1, 'mixed_bfloat16')
    >>> BertBackbone.from_config(config).get_config() == config
    True
    """

    config_fields = ()

    def _adopt(self, layers, dtype, arguments):
        if dtype is not None:
            # The functional constructor drops `dtype`; without this the model's
            # own policy (and so `get_config()["dtype"]`) stays float32.
            self.dtype_policy = keras.dtype_policies.get(dtype)
        for name, layer in vars(layers).items():
            setattr(self, name, layer)
        for field in self.config_fields:
            setattr(self, field, arguments[field])

    @classmethod
    def from_preset(cls, preset, /, **overrides):
        """The model from a built-in preset name or a preset directory;
        keyword arguments override its config.

        A name gives the paper's architecture with random weights (a warning
        says so); unknown names raise a `ValueError` listing close matches,
        see `kzoo.list_presets()`. A directory written by `save_to_preset`
        (str or `os.PathLike`) gives the saved model with its weights.

        Example:

        >>> import warnings
        >>> from kzoo import BertBackbone
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     backbone = BertBackbone.from_preset("bert_tiny", max_sequence_length=128)
        >>> backbone.num_layers, backbone.hidden_dim, backbone.max_sequence_length
        (2, 128, 128)
        """
        return presets.from_preset_for(cls, preset, **overrides)

    def save_to_preset(self, preset_dir, format="kzoo"):
        """Saves `config.json`, `model.weights.h5` and `metadata.json` into
        `preset_dir`, KerasHub's layout (BERT sec. 3.2: fine-tuning starts
        from the saved parameters); `from_preset(preset_dir)` loads them back.
        A BERT backbone also exports with `format="huggingface"` (`config.json`
        and `model.safetensors`, which `transformers.BertModel` loads).

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

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            **{field: getattr(self, field) for field in self.config_fields},
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
