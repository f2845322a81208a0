"""The base class of kzoo's preprocessors: text to a model's inputs, in TensorFlow.

A preprocessor holds a tokenizer and a few numbers (lengths, strides). It runs
TensorFlow ops on the CPU for every Keras backend, outside the compiled model:
inside `tf.data.Dataset.map`, or on texts in memory (`kzoo.models.batching.packed`,
a task's one way in). Its outputs feed the model on whatever backend Keras runs.
"""

import keras
import tensorflow as tf

from kzoo import presets
from kzoo.data.padding_ladder import PADDING_MODES, cut_to, ladder_length, text_lengths
from kzoo.models import serialization


class Preprocessor(keras.layers.Layer):
    """Turns text into a model's inputs (and labels), with a tokenizer.

    A subclass sets `tokenizer_class` (the tokenizer it takes, so that a task
    can turn a bare tokenizer into its preprocessor), calls
    `super().__init__(tokenizer, padding)` and stores its other constructor
    arguments as attributes of the same name; it defines `call(x, y=None,
    sample_weight=None)` with TensorFlow ops, packing to `sequence_length` and
    returning `keras.utils.pack_x_y_sample_weight(inputs, y, sample_weight)`
    so that `dataset.map(preprocessor)` works on `(x, y)` datasets, and sets
    `labels_per_token = True` if its labels are packed like the tokens.
    Calling the preprocessor runs `call` on TensorFlow tensors, whatever the
    Keras backend (`keras.layers.Layer.__call__` would convert them), then,
    with `padding="longest"`, cuts the batch's trailing padding to the
    smallest rung of `kzoo.data.length_ladder(sequence_length)` that holds
    its longest text (`kzoo.data.padding_ladder`): the model's outputs at the
    real positions are the same, for a fraction of the work on short texts.

    The constructor arguments are the config (the tokenizer serialized), and
    `from_preset` / `save_to_preset` read and write `preprocessor.json`,
    `tokenizer.json` and the vocabulary under `assets/` (KerasHub's layout).

    Args:
        tokenizer: `kzoo.tokenizers.WordPieceTokenizer`. The tokenizer (e.g. a
            `kzoo.BertTokenizer`), kept as `self.tokenizer`.
        padding: str. `"longest"`: each batch padded to the ladder length at
            or above its longest text, and a task's `fit`/`evaluate`/`predict`
            group texts of similar length into batches. `"max_length"`: every
            batch padded to `sequence_length`, in the order given (fixed
            shapes, e.g. for TPUs or a fixed-shape export). Defaults to `"longest"`.

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

    tokenizer_class = None
    labels_per_token = False

    def __init__(self, tokenizer, padding="longest"):
        if padding not in PADDING_MODES:
            raise ValueError(
                f"padding must be 'longest' (each batch padded as far as its longest text needs) or "
                f"'max_length' (every batch padded to sequence_length); got {padding!r}."
            )
        super().__init__()
        self.tokenizer = tokenizer
        self.padding = padding
        self.built = True  # no variables

    def _traces_texts(self):
        """Whether this call of `call` on texts alone (e.g. `predict`'s) runs as
        a traced `tf.function` (`kzoo.models.batching.packed`); here never: a
        subclass whose checks hold on unknown shapes may say when."""
        return False

    @tf.autograph.experimental.do_not_convert  # graph-ready TF ops: nothing to convert
    def __call__(self, *args, **kwargs):
        outputs = self.call(*args, **kwargs)
        return outputs if self.padding == "max_length" else self._cut_padding(outputs)

    def _cut_padding(self, outputs):
        """`outputs` cut to the ladder length of the batch's longest text."""
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(outputs)
        if not isinstance(x, dict) or "padding_mask" not in x:
            return outputs
        mask = x["padding_mask"]
        longest = tf.reduce_max(text_lengths(mask if mask.shape.rank > 1 else mask[tf.newaxis]))
        length = ladder_length(longest, self.sequence_length)
        x, y, sample_weight = cut_to(length, x, y, sample_weight, self.labels_per_token)
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    # === Config ===

    def get_config(self):
        return serialization.constructor_config(self)

    @classmethod
    def from_config(cls, config):
        return serialization.from_constructor_config(cls, config)

    # === Presets ===

    @classmethod
    def from_preset(cls, preset, /, load_weights=True, **overrides):
        """The preprocessor saved in a preset directory, with its tokenizer,
        or the released tokenizer of a built-in name (see `kzoo.list_presets()`).

        Args:
            preset: str or `os.PathLike`. A preset directory or name.
            load_weights: bool. For a name: `False` reads the released
                vocabulary only from files already on this machine (the cache,
                an installed package), never the network. Defaults to `True`.
            **overrides: config fields to change (e.g. `sequence_length`).

        Returns:
            An instance of the class `from_preset` is called on.
        """
        return presets.load(cls, preset, load_weights, **overrides)

    def save_to_preset(self, preset_dir):
        """Saves `preprocessor.json`, `tokenizer.json` and the vocabulary into
        `preset_dir` (KerasHub's layout), for `from_preset` on any backend.

        Args:
            preset_dir: str or `os.PathLike`. A new or empty directory, or a preset directory.
        """
        presets.save_preprocessor(self, preset_dir)

    def check_fits(self, backbone):
        """`ValueError`s when the tokenizer's vocabulary is not the backbone's
        embedding table, or `sequence_length` (if any) exceeds its position table.

        Args:
            backbone: `kzoo.models.Backbone`. A backbone with `vocabulary_size`
                and `max_sequence_length`.

        Example:

        >>> from kzoo import BertBackbone, BertPreprocessor, BertTokenizer
        >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
        >>> backbone = BertBackbone(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8,
        ...                         intermediate_dim=16, max_sequence_length=8)
        >>> BertPreprocessor(tokenizer, sequence_length=16).check_fits(backbone)
        Traceback (most recent call last):
        ...
        ValueError: The preprocessor packs 16 tokens but the backbone's position table has 8 rows. ...
        """
        vocabulary_size = self.tokenizer.vocabulary_size()
        if vocabulary_size != backbone.vocabulary_size:
            raise ValueError(
                f"The tokenizer's vocabulary has {vocabulary_size} tokens but the backbone's "
                f"embedding table has {backbone.vocabulary_size} rows: they belong to different "
                "models (was the vocabulary file replaced?). Use the tokenizer the backbone was "
                "pre-trained with, e.g. both from the same preset directory."
            )
        sequence_length = getattr(self, "sequence_length", 0)
        if sequence_length > backbone.max_sequence_length:
            raise ValueError(
                f"The preprocessor packs {sequence_length} tokens but the backbone's "
                f"position table has {backbone.max_sequence_length} rows. Pass "
                f"sequence_length <= {backbone.max_sequence_length} to the preprocessor."
            )
