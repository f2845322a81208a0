"""The base class of kzoo's preprocessors: text to a model's inputs, in TensorFlow.

A preprocessor holds a tokenizer and a few numbers (lengths, strides). It runs
TensorFlow ops on the CPU for every Keras backend, outside the compiled model:
inside `tf.data.Dataset.map`, or eagerly on texts in memory
(`preprocess_in_memory`). Its outputs feed the model on whatever backend Keras runs.
"""

import keras
import numpy as np
import tensorflow as tf
import tqdm

from kzoo import presets
from kzoo.data.padding_ladder import PADDING_MODES, cut_to, ladder_length, text_lengths
from kzoo.models import serialization
from kzoo.tokenizers.inputs import check_strings

PREPROCESSING_CHUNK = 4096  # texts per eager call: vectorised, with a progress bar beyond one


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
    # Whether `call` on texts alone may run as a traced `tf.function` (its
    # checks hold on unknown shapes): 0.7 ms instead of 35 ms for one text.
    traceable = False

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

    # === Running ===

    def preprocess_in_memory(self, x, y=None, sample_weight=None):
        """`self(x, y, sample_weight)` on examples in memory, as NumPy, each
        packed to `sequence_length` (a task cuts the padding batch by batch).

        Runs eagerly, one vectorised call per chunk of 4096 examples (a
        progress bar beyond one chunk): much faster than tracing a `tf.data`
        map for every `fit` or `predict`.

        Args:
            x: tensor or tuple of tensors. The examples (a tuple for e.g.
                sentence pairs), from `to_tensors`.
            y: tensor or None. Labels, as `x`. Defaults to `None`.
            sample_weight: tensor or None. Weights, as `x`. Defaults to `None`.

        Returns:
            `(inputs, labels, sample_weight)`, NumPy arrays (None where absent).

        Example:

        >>> from kzoo import BertPreprocessor, BertTokenizer
        >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
        >>> x, y, _ = BertPreprocessor(tokenizer, 4).preprocess_in_memory(
        ...     to_tensors(["hi", "hi hi"]), to_tensors([0, 1]))
        >>> x["token_ids"].tolist(), y.tolist()
        ([[2, 5, 3, 0], [2, 5, 5, 3]], [0, 1])
        """
        starts = range(0, num_rows(x), PREPROCESSING_CHUNK)
        call = self._traced_call() if self.traceable and y is None and sample_weight is None else self.call
        chunks = []
        for start in tqdm.tqdm(starts, desc="Preprocessing", unit="chunk", disable=len(starts) < 2):
            part = [rows(value, start, start + PREPROCESSING_CHUNK) for value in (x, y, sample_weight)]
            packed = keras.utils.unpack_x_y_sample_weight(call(*part))
            chunks.append(keras.tree.map_structure(lambda t: None if t is None else np.asarray(t), packed))
        if len(chunks) == 1:
            return chunks[0]
        return keras.tree.map_structure(lambda *parts: None if parts[0] is None else np.concatenate(parts), *chunks)

    def _traced_call(self):
        """`call` as a `tf.function`, traced again if the config changed."""
        key = tuple((k, v) for k, v in serialization.constructor_config(self, skip=("tokenizer",)).items())
        cached = self.__dict__.get("_traced")  # not a tracked attribute
        if cached is None or cached[0] != (key, id(self.tokenizer)):
            cached = ((key, id(self.tokenizer)), tf.function(self.call, reduce_retracing=True))
            self.__dict__["_traced"] = cached
        return cached[1]


# === Examples and labels ===


def _to_tensor(value, name, caller):
    """A `tf.Tensor` (or `tf.RaggedTensor` for lists of unequal lists); the
    items of lists and object arrays checked, never turned into text."""
    if isinstance(value, (tf.Tensor, tf.RaggedTensor)):
        return value
    _check_items(value, name, caller)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple, np.ndarray)):
        if len({len(row) for row in value}) > 1:
            return tf.ragged.constant([list(row) for row in value])
    array = np.asarray(value)
    if array.dtype.kind == "U":
        array = array.astype(object)  # tf.constant takes str objects, not NumPy's fixed-width unicode
    return tf.constant(array)


def _check_items(value, name, caller):
    """Text in memory must be strings only (`check_strings`), numbers
    numbers only: a `ValueError` naming the first item that is neither."""
    if not isinstance(value, (list, tuple)) and not (isinstance(value, np.ndarray) and value.dtype == object):
        return
    if {type(item) for item in value} <= {str, bytes, int}:  # flat strings or ints: mixed ones found below
        if all(type(item) is int for item in value) or not any(type(item) is int for item in value):
            return
    flat = list(_leaves(value))
    if any(isinstance(item, (str, bytes)) for item in flat):
        return check_strings(value, caller, name)
    for index, item in enumerate(flat):
        if isinstance(item, bool) or not isinstance(item, (int, float, np.number)) or item != item:
            where = f"{name}[{index}]" if np.ndim(value) == 1 else f"item {index} of {name} (flattened)"
            shown = item.item() if isinstance(item, np.generic) else item
            raise ValueError(
                f"{caller} expected numbers or strings, but {where} is {shown!r:.40} "
                f"({type(item).__name__}). Drop or fill missing values first."
            )


def _leaves(value):
    for item in value:
        if isinstance(item, (list, tuple)) or (isinstance(item, np.ndarray) and item.ndim > 0):
            yield from _leaves(item)
        else:
            yield item


def to_tensors(value, name="x", caller="kzoo"):
    """Examples or labels in memory as TensorFlow tensors: a tuple of columns
    (e.g. sentence pairs) stays a tuple; lists of unequal lists become ragged;
    None stays None. Nothing becomes text silently: a list or object array
    holding strings must hold strings only (None, numbers and NaN refused,
    the first named), one of numbers numbers only.

    Args:
        value: list, NumPy array, tensor, tuple of those, or None. Examples or
            labels in memory.
        name: str. The argument's name, for messages. Defaults to `"x"`.
        caller: str. Who takes the values, for messages. Defaults to `"kzoo"`.

    Returns:
        A `tf.Tensor` / `tf.RaggedTensor`, a tuple of them, or None.

    Example:

    >>> to_tensors((["a b", "c"], ["d", "e f"]))[1].numpy().tolist()
    [b'd', b'e f']
    >>> to_tensors([[1, 2], [3]]).to_list()
    [[1, 2], [3]]
    >>> to_tensors(["a b", None], caller="BertClassifier")
    Traceback (most recent call last):
    ...
    ValueError: BertClassifier expected strings, but x[1] is None (NoneType). ...
    """
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(_to_tensor(v, f"{name}[{i}]", caller) for i, v in enumerate(value))
    return _to_tensor(value, name, caller)


def num_rows(value):
    """The number of examples in a tensor or a tuple of tensors.

    Example:

    >>> num_rows(to_tensors((["a", "b"], ["c", "d"])))
    2
    """
    first = value[0] if isinstance(value, tuple) else value
    return int(first.nrows()) if isinstance(first, tf.RaggedTensor) else int(first.shape[0])


def rows(value, start, stop):
    """Rows `start:stop` of a tensor, a tuple of tensors, or None.

    Example:

    >>> rows(to_tensors((["a", "b", "c"], ["d", "e", "f"])), 1, 3)[1].numpy().tolist()
    [b'e', b'f']
    """
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(rows(v, start, stop) for v in value)
    return value[start:stop]


def split_rows(value, fraction):
    """`(first, last)`: the last `fraction` of the rows held out, as Keras'
    `validation_split` does, for a tensor, a tuple of tensors or None.

    Example:

    >>> train, held_out = split_rows(to_tensors(["a", "b", "c", "d"]), 0.25)
    >>> held_out.numpy().tolist()
    [b'd']
    """
    if value is None:
        return None, None
    cut = int(num_rows(value) * (1.0 - fraction))
    return rows(value, 0, cut), rows(value, cut, None)


def label_range(labels):
    """`(lowest, highest)` of integer labels in memory (the first column of a
    tuple), None when there are none; a `ValueError` for labels that are not
    integers (class names, fractions).

    Example:

    >>> label_range([[0, 2], [1]])
    (0, 2)
    """
    if labels is None:
        return None
    labels = to_tensors(labels)
    first = labels[0] if isinstance(labels, tuple) else labels  # e.g. (answer_starts, answer_texts)
    values = np.asarray(first.flat_values if isinstance(first, tf.RaggedTensor) else first)
    if values.size == 0:
        return None
    if values.dtype.kind not in "iuf" or (values.dtype.kind == "f" and not np.all(np.mod(values, 1) == 0)):
        raise ValueError(
            "Labels must be integer class ids; got values such as "
            f"{values.ravel()[:3].tolist()}. Map class names to ids (0, 1, ...) first."
        )
    return int(values.min()), int(values.max())


def assert_in(labels, bounds, message):
    """`labels` with TensorFlow assertions that each value (of the first column
    of a tuple) lies in `[bounds[0], bounds[1])`, for `tf.data`: a bad batch
    fails with `message` when it is reached.

    Example:

    >>> assert_in(tf.constant([0, 1]), (0, 2), "labels in [0, 1]").numpy().tolist()
    [0, 1]
    """
    first = labels[0] if isinstance(labels, tuple) else labels
    values = tf.cast(first.flat_values if isinstance(first, tf.RaggedTensor) else first, tf.int64)
    checks = [
        tf.debugging.assert_greater_equal(values, tf.cast(bounds[0], tf.int64), message=message),
        tf.debugging.assert_less(values, tf.cast(bounds[1], tf.int64), message=message),
    ]
    with tf.control_dependencies(checks):
        return tf.nest.map_structure(tf.identity, labels)
