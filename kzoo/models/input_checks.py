"""Checks of what users hand kzoo's models, before any work is done: integer
arguments, the examples of `fit`, `evaluate` and `predict` and their labels
(label names too). Nothing is coerced: a wrong value is a `ValueError` in
kzoo's words, the same on every backend, saying what to change. Packed
batches are checked where they come in (`kzoo.backend.check_batch`,
`kzoo.models.datasets`), as a compiled step cannot always stop before it
changes the weights.
"""

import keras
import numpy as np
import tensorflow as tf

from kzoo.tokenizers.inputs import check_strings


CONFIG_HINT = "In a config.json, write a JSON integer (2, not \"2\" or 2.0)."


def check_int(value, name, owner, minimum=1, hint=""):
    """`value` as an int, or a `ValueError` naming `name` (and `owner`, then
    `hint`): a bool, a float (even 8.0: 8.9 would otherwise become 8), a
    string or a value below `minimum` is refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        if isinstance(value, (str, float, np.floating)):
            hint = f"It is never rounded or parsed. {hint}"
        raise ValueError(
            f"{owner}: {name} must be an int >= {minimum}; got {value!r} ({type(value).__name__}). {hint}".rstrip()
        )
    return int(value)


def check_ints(owner, minimum=1, **values):
    """`check_int` for each keyword argument of a constructor (the message says how to write it in a config.json)."""
    for name, value in values.items():
        check_int(value, name, owner, minimum, CONFIG_HINT)


def checked_steps(steps):
    """`gradient_accumulation_steps` for a Keras optimizer: None for None or 1
    (Keras takes 2 or more), else the positive int; anything else a `ValueError`."""
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"gradient_accumulation_steps must be a positive int or None; got {steps!r}.")
    return None if steps == 1 else steps


# === Examples ===


def check_examples(x, y, owner, batch_size=None):
    """`(x, y)` for `fit`/`evaluate`/`predict`, or a `ValueError` for no examples
    (None, an empty list or batch), a bare string, columns of a tuple of
    different lengths, labels of another length than the examples, or a
    `batch_size` that is not a positive int (Keras reads 0 as 32). A pandas
    Series becomes its NumPy values; datasets and generators pass as they are."""
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
    labels = None if y is None else num_rows(y[0] if isinstance(y, tuple) else y, owner)
    if rows is not None and labels is not None and labels != rows:
        raise ValueError(f"{owner} got {rows} examples but {labels} labels; give one label per example.")
    return x, y


def _from_pandas(value):
    # A pandas Series (duck-typed: kzoo does not need pandas) is its values.
    if hasattr(value, "to_numpy") and getattr(value, "ndim", 0) == 1 and not keras.ops.is_tensor(value):
        return value.to_numpy()
    return value


def num_rows(value, owner="kzoo"):
    """The examples in `value` (a tuple: its columns, which must agree), or None
    when unknown (datasets, generators, symbolic shapes)."""
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
    """A `tf.Tensor` (ragged for lists of unequal lists); items of lists and object arrays checked, never made text."""
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
    """Text must be strings only (`check_strings`), numbers numbers only: a `ValueError` naming the first other item."""
    if not isinstance(value, (list, tuple)) and not (isinstance(value, np.ndarray) and value.dtype == object):
        return
    types = set(map(type, value))
    if types <= {str, bytes, int} and (types <= {int} or int not in types):  # flat strings or ints, not mixed
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
    stays a tuple, lists of unequal lists become ragged, None stays None.
    Nothing becomes text silently: a list or object array holding strings must
    hold strings only (None, numbers and NaN refused, the first named), one of
    numbers numbers only. `name` and `caller` are for the messages."""
    if isinstance(value, tuple):
        return tuple(_to_tensor(v, f"{name}[{i}]", caller) for i, v in enumerate(value))
    return None if value is None else _to_tensor(value, name, caller)


def rows(value, start, stop):
    """Rows `start:stop` of examples in memory, of a tuple of columns or a dict of them, or None."""
    if isinstance(value, tuple):
        return tuple(rows(v, start, stop) for v in value)
    if isinstance(value, dict):
        return {key: rows(v, start, stop) for key, v in value.items()}
    return None if value is None else value[start:stop]


# === Labels and their names (a classifier's `class_names`, a token classifier's `tags`) ===


ARGUMENTS = ("class_names", "tags")  # the tasks' constructor arguments naming their labels


def check_names(names, num_classes, argument, owner):
    """`(num_classes, names)` checked: names (the label names of `argument`) are
    distinct strings, one per label id; `num_classes=None` is taken from them.
    A `TypeError` when neither is given (as for a missing argument), else a
    `ValueError` for bad names."""
    if names is None:
        if num_classes is None:
            raise TypeError(
                f"{owner} needs 'num_classes' (the number of labels K), or {argument}=[...] "
                "(their names, in label order)."
            )
        return num_classes, None
    given = names
    names = [] if isinstance(names, (str, bytes)) else list(names)
    count = len(names) if num_classes is None else num_classes
    duplicates = sorted({name for name in names if isinstance(name, str) and names.count(name) > 1})
    problem = (
        "a single string" if isinstance(given, (str, bytes))
        else "no names" if not names
        else f"not strings: {[n for n in names if not isinstance(n, str)][:3]!r}"
        if not all(isinstance(name, str) for name in names)
        else f"repeated: {duplicates[:3]!r}" if duplicates
        else f"{len(names)} names for num_classes={num_classes}"
        if len(names) != count
        else None
    )
    if problem:
        raise ValueError(
            f"{argument} must be {count} distinct strings, the name of each label id in order "
            f"({problem}); got {given!r:.200}."
        )
    return count, names


def names_to_ids(labels, names, argument, owner):
    """Labels given as names (a `tf.string` tensor, ragged too) as int64 ids of
    `names` (NumPy, or ragged as given); a `ValueError` for a name the task does not have (the known names
    listed), or for names given to a task without them."""
    values = (labels.flat_values if isinstance(labels, tf.RaggedTensor) else labels).numpy()
    found, positions = np.unique(values.ravel(), return_inverse=True)
    found = list(map(bytes.decode, found))  # UTF-8
    if names is None or not set(found) <= set(names):
        raise _unknown_names(found, sorted(set(found) - set(names or ())), names, argument, owner)
    ids = np.array(list(map(names.index, found)), "int64")[positions].reshape(values.shape)
    return labels.with_flat_values(ids) if isinstance(labels, tf.RaggedTensor) else ids


def ids_to_names(ids, names):
    """Label ids as names (a list, nested as `ids`); ids as Python ints without `names`."""
    ids = np.asarray(ids)
    if names is None:
        return ids.tolist()
    return np.asarray(names, dtype=object)[ids].tolist() if ids.ndim else names[int(ids)]


def _unknown_names(found, unknown, names, argument, owner):
    if names is None:
        return ValueError(no_names(argument, owner, f"strings ({found[:3]!r})"))
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    return ValueError(
        f"{owner} got labels that are none of its {argument}: {unknown[:5]!r}{more}. Its "
        f"{argument} are {names!r:.300} (label ids 0 to {len(names) - 1}, in that order)."
    )


def no_names(argument, owner, what):
    return (
        f"{owner} got labels as {what}, but it has no {argument}. Build it with "
        f"{argument}=[...] (the name of each label id, in order), or give label ids."
    )
