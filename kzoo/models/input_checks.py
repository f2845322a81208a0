"""Checks of what users hand kzoo's models, before any work is done: integer
arguments, the id tensors a backbone is called on, and the examples of `fit`,
`evaluate` and `predict`. Nothing is coerced: a wrong value is a `ValueError`
in kzoo's words, the same on every backend, saying what to change.

Values are read only where they are concrete (eager calls, NumPy); inside a
compiled step only shapes are checked.
"""

import keras
import numpy as np
import tensorflow as tf

from kzoo.backend import is_concrete
from kzoo.tokenizers.inputs import check_strings


CONFIG_HINT = "In a config.json, write a JSON integer (2, not \"2\" or 2.0)."


def check_int(value, name, owner, minimum=1, hint=""):
    """`value` as an int, or a `ValueError` naming `name`: a bool, a float
    (even 8.0: `8.9` would otherwise become 8) or a string is refused.

    Args:
        value: the argument.
        name: str. Its name, for the message.
        owner: str. Whose argument it is, for the message.
        minimum: int. The smallest value allowed. Defaults to `1`.
        hint: str. A sentence added to the message. Defaults to `""`.

    Returns:
        An int.

    Example:

    >>> check_int(8, "sequence_length", "BertPreprocessor")
    8
    >>> check_int(8.9, "sequence_length", "BertPreprocessor")
    Traceback (most recent call last):
    ...
    ValueError: BertPreprocessor: sequence_length must be an int >= 1; got 8.9 (float). ...
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        if isinstance(value, (str, float, np.floating)):
            hint = f"It is never rounded or parsed. {hint}"
        raise ValueError(
            f"{owner}: {name} must be an int >= {minimum}; got {value!r} ({type(value).__name__}). {hint}".rstrip()
        )
    return int(value)


def check_ints(owner, minimum=1, **values):
    """`check_int` for each keyword argument, a constructor's (so the
    message says how to write it in a config.json).

    Example:

    >>> check_ints("BertBackbone", num_heads=2, hidden_dim="8")
    Traceback (most recent call last):
    ...
    ValueError: BertBackbone: hidden_dim must be an int >= 1; got '8' (str). ...
    """
    for name, value in values.items():
        check_int(value, name, owner, minimum, CONFIG_HINT)


def check_id_inputs(inputs, tables, owner, text_hint, same_shape=True):
    """`ValueError`s for a backbone's id inputs that cannot be ids: None,
    text, rank below 2, shapes that disagree, fractional values, values
    beyond int32 (which the cast to int32 would wrap; the embedding layers
    check the rest of the range).

    Args:
        inputs: dict. `{name: tensor, array or list}`; None values are absent.
        tables: dict. `{name: rows of its embedding table}` for the inputs
            whose values are ids (others, e.g. a padding mask, are only shape-checked).
        owner: str. The model's class name, for the messages.
        text_hint: str. What to call on text first (e.g. the preprocessor).
        same_shape: bool. Whether all inputs share one shape (BERT's
            `token_ids`, `segment_ids`, `padding_mask`); else only the
            batch size (the Transformer's source and target). Defaults to `True`.

    Example:

    >>> check_id_inputs({"token_ids": np.array([[2, 5.5, 3]])}, {"token_ids": 10}, "BertBackbone", "")
    Traceback (most recent call last):
    ...
    ValueError: BertBackbone: token_ids must be integer ids; got 5.5 at index (0, 1). ...
    """
    shapes = {}
    for name, value in inputs.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = arrays_from_lists({name: value}, owner)[name]
        if holds_text(value):
            raise ValueError(
                f"{owner} takes token ids, not text: {name} holds strings. {text_hint}"
            )
        if isinstance(value, np.ndarray) and value.dtype == object:
            raise ValueError(
                f"{owner}: {name} is an array of Python objects (e.g. rows of different lengths, or "
                "None among the ids); ids must be an int array of shape (batch, sequence_length)."
            )
        shape = _shape(value)
        if shape is not None and len(shape) < 2:
            raise ValueError(
                f"{owner}: {name} must be (batch, sequence_length); got shape {shape}. For one "
                "example, keep the batch dimension: give the preprocessor a list of one text, "
                "or use ids[None]."
            )
        if shape is not None:
            shapes[name] = shape
        if name in tables and is_concrete(value):
            values = keras.ops.convert_to_numpy(value) if keras.ops.is_tensor(value) else np.asarray(value)
            _check_integral(values, name, owner)
            _check_int32(values, name, owner, tables[name])
    _check_shapes(shapes, owner, same_shape)


def arrays_from_lists(inputs, owner):
    """`inputs` (a dict) with lists and tuples made NumPy arrays and None
    values dropped (None means absent); rows of different lengths are a
    `ValueError` saying to pad them.

    Example:

    >>> arrays_from_lists({"token_ids": [[2, 3]], "segment_ids": None}, "BertBackbone")["token_ids"].shape
    (1, 2)
    """
    arrays = {}
    for name, value in inputs.items():
        if isinstance(value, (list, tuple)):
            try:
                value = np.asarray(value)
            except ValueError:
                raise ValueError(
                    f"{owner}: the rows of {name} have different lengths; ids must be an int array of "
                    "shape (batch, sequence_length): pad the rows (the preprocessor does)."
                ) from None
        if value is not None:
            arrays[name] = value
    return arrays


def missing_token_ids(name, owner, text_hint):
    """The `ValueError` for a backbone called without its token ids.

    Example:

    >>> str(missing_token_ids("token_ids", "BertBackbone", "Use the preprocessor."))[:44]
    'BertBackbone got no token_ids (None): it tak'
    """
    return ValueError(
        f"{owner} got no {name} (None): it takes token ids, an int array (batch, "
        f"sequence_length). {text_hint}"
    )


def _shape(value):
    """The shape as a tuple (None for unknown dimensions, symbolic ones
    included: a JAX or torch export traced for any batch), or None when even
    the rank is unknown."""
    shape = getattr(value, "shape", None)
    if shape is None:
        return np.shape(value)
    try:
        return tuple(int(d) if isinstance(d, (int, np.integer)) else None for d in shape)
    except (TypeError, ValueError):  # a TensorShape of unknown rank
        return None


def holds_text(value):
    """Whether `value` holds text: a string, a `tf.string` tensor, a NumPy
    array of strings (or of objects, one a string), a list whose first item
    (nested) is one.

    Example:

    >>> holds_text([["a"]]), holds_text(np.array([1, 2])), holds_text(tf.constant(["a"]))
    (True, False, True)
    """
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    if isinstance(value, (str, bytes)):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return False
    if isinstance(dtype, np.dtype):
        strings = dtype == np.dtype(object) and any(isinstance(v, (str, bytes)) for v in value.flat)
        return dtype.kind in "US" or strings
    return getattr(dtype, "name", None) == "string"  # a tf.string tensor


def _check_integral(values, name, owner):
    if values.dtype.kind == "f" and values.size:
        fractional = np.argwhere(np.mod(values, 1) != 0)
        if len(fractional):
            index = tuple(int(i) for i in fractional[0])
            raise ValueError(
                f"{owner}: {name} must be integer ids; got {values[index]} at index {index}. Ids "
                "are never rounded: check where they came from."
            )


def _check_int32(values, name, owner, table):
    """Ids the model's int32 cast would wrap (2**32 + 5 becomes 5); ids
    inside int32 are checked against the table by the embedding layers."""
    if values.size and (values.min() < -(2**31) or values.max() >= 2**31):
        extreme = values.max() if values.max() >= 2**31 else values.min()
        raise ValueError(
            f"{owner}: {name} holds {extreme}, beyond int32, the ids' dtype (a cast would wrap it "
            f"to another id). Ids must lie in [0, {table}): were they made with another vocabulary?"
        )


def _check_shapes(shapes, owner, same_shape):
    """Known dimensions must agree (all of them, or the batch size)."""
    names = list(shapes)
    for other in names[1:]:
        a, b = shapes[names[0]], shapes[other]
        dims = range(max(len(a), len(b))) if same_shape else (0,)
        agree = len(a) == len(b) or not same_shape
        agree = agree and all(a[d] is None or b[d] is None or a[d] == b[d] for d in dims)
        if not agree:
            what = "the same shape" if same_shape else "the same batch size"
            raise ValueError(
                f"{owner}: {names[0]} has shape {a} but {other} has shape {b}; they must have "
                f"{what}. Make them together, e.g. with the preprocessor."
            )


def check_examples(x, y, owner, batch_size=None):
    """`(x, y)` for `fit`/`evaluate`/`predict`, with a `ValueError` for no
    examples (None, an empty list or batch), a bare string, columns of a tuple
    of different lengths, labels of another length than the examples, or a
    `batch_size` that is not a positive int (Keras would read `batch_size=0`
    as 32; `fit` checks its `epochs` itself). A pandas Series
    becomes its NumPy values. Datasets and generators pass as they are.

    Args:
        x: the examples: text, a tuple of columns, a dict of packed inputs, ...
        y: the labels, or None.
        owner: str. The model's class name, for the messages.
        batch_size: int or None. Examples per batch. Defaults to `None`.

    Returns:
        `(x, y)`.

    Example:

    >>> check_examples((["a b", "c"], ["d"]), None, "BertClassifier")
    Traceback (most recent call last):
    ...
    ValueError: BertClassifier got a tuple of columns of different lengths: 2, 1. ...
    """
    if batch_size is not None:
        check_int(batch_size, "batch_size", owner)
    x, y = _from_pandas(x), _from_pandas(y)
    if x is None:
        raise ValueError(
            f"{owner} got no examples (x=None). Pass texts (a list of strings), a tuple of "
            "columns such as (texts_a, texts_b), packed inputs (a dict of arrays), or a tf.data.Dataset."
        )
    if isinstance(x, (str, bytes)):
        raise ValueError(f"{owner} takes a batch of examples; got one string. Wrap it in a list: [{x!r:.40}].")
    rows = num_rows(x, owner)
    if rows == 0:
        raise ValueError(f"{owner} got 0 examples: there is nothing to run on. Pass at least one example.")
    labels = num_rows(y[0] if isinstance(y, tuple) else y, owner)
    if rows is not None and labels is not None and labels != rows:
        raise ValueError(f"{owner} got {rows} examples but {labels} labels; give one label per example.")
    return x, y


def _from_pandas(value):
    # A pandas Series (duck-typed: kzoo does not need pandas) is its values.
    if hasattr(value, "to_numpy") and getattr(value, "ndim", 0) == 1 and not keras.ops.is_tensor(value):
        return value.to_numpy()
    return value


def num_rows(value, owner="kzoo"):
    """The examples in `value` (a tuple: its columns, which must agree), or
    None when unknown (datasets, generators, symbolic shapes)."""
    if isinstance(value, tuple):
        counts = [num_rows(column, owner) for column in value]
        if len(set(counts)) > 1:
            raise ValueError(
                f"{owner} got a tuple of columns of different lengths: "
                f"{', '.join(str(c) for c in counts)}. Each example needs one item in every "
                "column (e.g. one text_a and one text_b per pair)."
            )
        return counts[0] if counts else 0
    if isinstance(value, dict):
        first = value.get("token_ids", next(iter(value.values()), None))
        return None if first is None else num_rows(first, owner)
    if isinstance(value, list):
        return len(value)
    shape = getattr(value, "shape", None)
    if shape is not None and len(shape) > 0 and isinstance(shape[0], (int, np.integer)):
        return int(shape[0])
    nrows = getattr(value, "nrows", None)  # a tf.RaggedTensor
    return int(nrows()) if callable(nrows) else None


# === Examples and labels in memory, as TensorFlow tensors ===


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
