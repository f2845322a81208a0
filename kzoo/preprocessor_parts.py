"""Config and preset directories of preprocessors that hold a tokenizer
(BERT sec. 3 input representation; "Attention Is All You Need" sec. 5.1)."""

import keras

from kzoo import presets


class PreprocessorWithTokenizer:
    """Mixin for a preprocessor built from a tokenizer and a few plain
    arguments: `get_config` serializes the tokenizer and the attributes named
    in `config_fields`; `from_config`, `from_preset` and `save_to_preset`
    follow (KerasHub's preset layout: `preprocessor.json`, `tokenizer.json`,
    the vocabulary under `assets/`).

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertPreprocessor, BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> path = tempfile.mkdtemp()
    >>> BertPreprocessor(tokenizer, sequence_length=8).save_to_preset(path)
    >>> sorted(os.listdir(path))
    ['assets', 'metadata.json', 'preprocessor.json', 'tokenizer.json']
    >>> revived = BertPreprocessor.from_preset(path, sequence_length=4)
    >>> revived("hi hi hi")["token_ids"].numpy().tolist()
    [2, 5, 5, 3]
    """

    config_fields = ("sequence_length",)

    def get_config(self):
        return {
            "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
            **{field: getattr(self, field) for field in self.config_fields},
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config["tokenizer"], dict):
            config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)

    @classmethod
    def from_preset(cls, preset, /, **overrides):
        """The preprocessor saved in a preset directory, with its tokenizer;
        keyword arguments (e.g. `sequence_length`) override its config."""
        return presets.from_preset_for(cls, preset, **overrides)

    def save_to_preset(self, preset_dir):
        """Saves `preprocessor.json`, `tokenizer.json` and the vocabulary into
        `preset_dir` (KerasHub's layout), for `from_preset` on any backend."""
        presets.save_preprocessor(self, preset_dir)
