"""Names of a task's labels: a classifier's `class_names`, a token
classifier's `tags` (label id i is called `names[i]`).

They are checked against the number of labels when the task is built; labels
given as names are turned into ids before any work (in memory, at once, by the
task's one way in, `kzoo.models.Task`, with
an error listing the known names; in a `tf.data` pipeline, by assertions that
fail its first batch with an unknown name). They do not shape the task's
head: `from_preset` gives a saved task new names of the same number.
"""

import numpy as np
import tensorflow as tf


ARGUMENTS = ("class_names", "tags")  # the tasks' constructor arguments naming their labels


def check_names(names, num_classes, argument, owner):
    """`(num_classes, names)` checked: names are distinct strings, one per
    label id; `num_classes=None` is taken from them.

    Args:
        names: list of str or None. The label names, in label order.
        num_classes: int or None. The number of labels, if given.
        argument: str. The names' argument ("class_names", "tags"), for messages.
        owner: str. The task's class name, for messages.

    Returns:
        `(num_classes, names)`: an int, and a list of str or None.

    Raises:
        TypeError: neither `num_classes` nor `names` is given (as for a missing argument).
        ValueError: the names are not distinct strings, one per label.

    Example:

    >>> check_names(("neg", "pos"), None, "class_names", "BertClassifier")
    (2, ['neg', 'pos'])
    >>> check_names(["neg", "pos"], 3, "class_names", "BertClassifier")
    Traceback (most recent call last):
    ...
    ValueError: class_names must be 3 distinct strings, the name of each label id in order
    (2 names for num_classes=3); got ['neg', 'pos'].
    """
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
    """Labels given as names (a `tf.string` tensor, ragged too) as int64 label ids.

    Args:
        labels: `tf.Tensor` or `tf.RaggedTensor` of strings.
        names: list of str or None. The task's label names.
        argument: str. The names' argument, for messages.
        owner: str. The task's class name, for messages.

    Returns:
        A `tf.Tensor` (a `tf.RaggedTensor` for ragged labels) of ids.

    Raises:
        ValueError: a name the task does not have (all known names listed),
            or names for a task without them.

    Example:

    >>> names_to_ids(tf.constant(["pos", "neg", "pos"]), ["neg", "pos"], "class_names", "BertClassifier").numpy()
    array([1, 0, 1])
    >>> names_to_ids(tf.constant(["good"]), ["neg", "pos"], "class_names", "BertClassifier")
    Traceback (most recent call last):
    ...
    ValueError: BertClassifier got labels that are none of its class_names: ['good']. Its
    class_names are ['neg', 'pos'] (label ids 0 to 1, in that order).
    """
    flat = labels.flat_values if isinstance(labels, tf.RaggedTensor) else labels
    values = flat.numpy()
    found, positions = np.unique(values.ravel(), return_inverse=True)
    found = [value.decode("utf-8") for value in found]
    _check_known(found, names, argument, owner)
    index = {name: i for i, name in enumerate(names)}
    ids = tf.constant(np.array([index[name] for name in found], "int64")[positions].reshape(values.shape))
    return labels.with_flat_values(ids) if isinstance(labels, tf.RaggedTensor) else ids


def label_range(labels):
    """`(lowest, highest)` of integer labels (a tensor, ragged too), None when
    there are none; a `ValueError` for labels that are not integers (class
    names, fractions).

    Example:

    >>> label_range(tf.ragged.constant([[0, 2], [1]]))
    (0, 2)
    """
    values = np.asarray(labels.flat_values if isinstance(labels, tf.RaggedTensor) else labels)
    if values.size == 0:
        return None
    if values.dtype.kind not in "iuf" or (values.dtype.kind == "f" and not np.all(np.mod(values, 1) == 0)):
        raise ValueError(
            "Labels must be integer class ids; got values such as "
            f"{values.ravel()[:3].tolist()}. Map class names to ids (0, 1, ...) first."
        )
    return int(values.min()), int(values.max())


def names_to_ids_in_graph(labels, names, argument, owner):
    """`names_to_ids` inside `tf.data`: string labels (ragged too) as int64
    ids, with an assertion that fails a batch holding an unknown name (the
    known names in its message); other labels as they are.

    Args:
        labels: a `tf.Tensor`, `tf.RaggedTensor`, or None.
        names, argument, owner: as for `names_to_ids`.

    Returns:
        The ids, or `labels`.

    Example:

    >>> labels = tf.constant(["pos", "neg"])
    >>> names_to_ids_in_graph(labels, ["neg", "pos"], "class_names", "BertClassifier").numpy().tolist()
    [1, 0]
    """
    if labels is None or not isinstance(labels, (tf.Tensor, tf.RaggedTensor)) or labels.dtype != tf.string:
        return labels
    if names is None:
        raise ValueError(_no_names(argument, owner, "strings"))
    message = f"{owner} got labels that are none of its {argument}, which are {names!r:.300}. Unknown:"

    def ids(values):
        matches = tf.equal(tf.expand_dims(values, -1), tf.constant(names))  # (..., K)
        known = tf.reduce_any(matches, axis=-1)
        unknown = tf.boolean_mask(tf.reshape(values, [-1]), tf.logical_not(tf.reshape(known, [-1])))
        check = tf.debugging.Assert(tf.reduce_all(known), [message, unknown], summarize=5)
        with tf.control_dependencies([check]):
            return tf.argmax(tf.cast(matches, tf.int32), axis=-1, output_type=tf.int64)

    return tf.ragged.map_flat_values(ids, labels) if isinstance(labels, tf.RaggedTensor) else ids(labels)


def ids_to_names(ids, names):
    """Label ids as names (a list, nested as `ids`); ids as Python ints without names.

    Args:
        ids: array-like of int. Label ids.
        names: list of str or None.

    Returns:
        A (nested) list of str, or of int when `names` is None.

    Example:

    >>> import numpy as np
    >>> ids_to_names(np.array([1, 0]), ["neg", "pos"]), ids_to_names(np.array([1, 0]), None)
    (['pos', 'neg'], [1, 0])
    """
    ids = np.asarray(ids).tolist()
    if names is None:
        return ids
    return [ids_to_names(i, names) for i in ids] if isinstance(ids, list) else names[ids]


def _check_known(found, names, argument, owner):
    if names is None:
        raise ValueError(_no_names(argument, owner, f"strings ({found[:3]!r})"))
    known = set(names)
    unknown = [value for value in found if value not in known]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ValueError(
            f"{owner} got labels that are none of its {argument}: {unknown[:5]!r}{more}. Its "
            f"{argument} are {names!r:.300} (label ids 0 to {len(names) - 1}, in that order)."
        )


def _no_names(argument, owner, what):
    return (
        f"{owner} got labels as {what}, but it has no {argument}. Build it with "
        f"{argument}=[...] (the name of each label id, in order), or give label ids."
    )
