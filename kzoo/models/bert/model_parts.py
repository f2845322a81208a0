"""Config and compile state of kzoo's BERT models that hold other Keras objects (BERT sec. 3)."""

import keras

from kzoo.fast_paths import CompileDefaults


class ModelWithParts(CompileDefaults):
    """Mixin for a `keras.Model` built from parts (a backbone, a tokenizer or
    preprocessor) and a few plain arguments (BERT sec. 3.1, 3.2 models).

    `get_config` serializes the parts named in `config_parts` and the
    attributes named in `config_fields`; `from_config` rebuilds them;
    `compile_from_config` restores the optimizer (with its schedule) when a
    `.keras` file is loaded.

    Example:

    >>> from kzoo import BertBackbone, BertPretrainer
    >>> model = BertPretrainer(BertBackbone(vocabulary_size=50, num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16))
    >>> sorted(model.get_config())
    ['backbone', 'name', 'tokenizer', 'trainable']
    """

    config_parts = ("backbone",)
    config_fields = ()

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            **{part: keras.saving.serialize_keras_object(getattr(self, part)) for part in self.config_parts},
            **{field: getattr(self, field) for field in self.config_fields},
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for part in cls.config_parts:
            if isinstance(config.get(part), dict):
                config[part] = keras.saving.deserialize_keras_object(config[part])
        return cls(**config)

    def compile_from_config(self, config):
        # `.keras` loading: restore the optimizer (e.g. BertAdamW and its schedule).
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)
