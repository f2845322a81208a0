"""What `fit` does to its data before Keras sees it, beside the packing and
batching of `kzoo.models.batching`: the examples `validation_split` holds
out and a checked `validation_data`, and, under gradient accumulation, the
big batches cut into micro-batches (`kzoo.models.accumulation`)."""

import warnings

import numpy as np
from keras import ops

from kzoo.models import accumulation
from kzoo.models.batching import IN_MEMORY, LengthBatches, split_off
from kzoo.models.input_checks import num_rows


def held_out(x, y, sample_weight, fraction, model):
    """`(x, y, sample_weight, validation_data)`: the last `fraction` of the
    examples held out as Keras' `validation_split` holds them (before
    shuffling; raw text and label names too), checked first
    (`check_validation_split`); validation_data is None for 0.

    Example:

    >>> x, y, _, held = held_out(["a", "b", "c", "d"], [0, 1, 0, 1], None, 0.25, "BertClassifier")
    >>> [t.numpy().tolist() for t in held[:2]]
    [[b'd'], [1]]
    """
    owner = model if isinstance(model, str) else type(model).__name__
    if not check_validation_split(fraction, x, owner):
        return x, y, sample_weight, None
    (x, held_x), (y, held_y), (sample_weight, held_w) = (split_off(v, fraction) for v in (x, y, sample_weight))
    return x, y, sample_weight, (held_x, held_y, held_w)


def check_validation_split(fraction, x, owner):
    """`ValueError`s for a `validation_split` that holds out nothing usable,
    before any work: not a number in [0, 1), data not in memory (a dataset
    or generator, which cannot be cut before it is read), or a cut that
    leaves no example on one side. 0 holds out nothing (Keras' default).

    Args:
        fraction: the `validation_split` given to `fit`.
        x: the training examples.
        owner: str. The model's class name, for the messages.

    Returns:
        The fraction, a float.

    Example:

    >>> check_validation_split(0.25, ["a", "b", "c", "d"], "BertClassifier")
    0.25
    >>> check_validation_split(0.9, ["a", "b", "c", "d"], "BertClassifier")
    Traceback (most recent call last):
    ...
    ValueError: BertClassifier: validation_split=0.9 of 4 examples leaves 0 for training. ...
    """
    number = isinstance(fraction, (int, float, np.integer, np.floating)) and not isinstance(fraction, (bool, np.bool_))
    if not (number and 0 <= fraction < 1):
        raise ValueError(
            f"{owner}: validation_split must be a number in [0, 1), the fraction of the examples held "
            f"out (the last ones, as Keras does); got {fraction!r} ({type(fraction).__name__})."
        )
    if not fraction:
        return 0.0
    rows = num_rows(x, owner) if isinstance(x, (dict, *IN_MEMORY)) and not isinstance(x, (str, bytes)) else None
    if rows is None:
        raise ValueError(
            f"{owner}: validation_split cuts examples in memory (lists, arrays, tensors); got "
            f"{type(x).__name__}, which cannot be cut before it is read. Hold out batches yourself "
            "(e.g. dataset.take(n) for validation_data= and dataset.skip(n) for training)."
        )
    held = rows - int(rows * (1.0 - fraction))
    if held == 0 or held == rows:
        side = "validation" if held == 0 else "training"
        raise ValueError(
            f"{owner}: validation_split={fraction} of {rows} examples leaves 0 for {side}. Give "
            "more examples or another fraction."
        )
    return float(fraction)


def validation_tuple(validation_data, y, model):
    """`validation_data` as a tuple `(x[, y[, sample_weight]])`; a `ValueError`
    for examples without labels where the training ones have some (a list
    of texts is examples, not `[x, y]`).

    Example:

    >>> validation_tuple(["a text"], None, "BertClassifier")
    (['a text'],)
    """
    if isinstance(validation_data, tuple):
        return validation_data
    if y is not None and isinstance(validation_data, IN_MEMORY):
        owner = model if isinstance(model, str) else type(model).__name__
        raise ValueError(
            f"{owner}: the training examples have labels but validation_data has "
            f"none (got a {type(validation_data).__name__}). Pass validation_data=(x_val, y_val) "
            "as a tuple; a list is read as examples."
        )
    return (validation_data,)


def accumulated(model, train, data, order, counts_tokens):
    """`(train, data)` as micro-batches whose loss normalisers make k of
    them the big batch (`kzoo.models.accumulation`), when `model`'s
    optimizer accumulates gradients and its loss `counts_tokens` (declares
    `loss_counts`)."""
    steps = accumulation.accumulation_steps(model.optimizer)
    if steps == 1 or not counts_tokens:
        return train, data
    if data is None and not isinstance(train["x"], dict):  # a dataset or generator: its own batches
        warnings.warn(
            f"{type(model).__name__}'s loss is a mean over tokens, and the optimizer accumulates "
            f"gradients over {steps} micro-batches of a dataset: each micro-batch is normalised "
            f"by its own tokens, so an update is the big batch's only when its {steps} "
            "micro-batches hold equally many. For the exact big batch, pass the examples in "
            "memory: `fit` then groups them and normalises over each group's tokens.",
            UserWarning,
            stacklevel=4,
        )
        return train, data
    if data is None and train["y"] is None:
        return train, data
    if data is None:  # packed inputs in memory that Keras would batch (e.g. the Transformer's)
        data = LengthBatches(train["x"], train["y"], train["sample_weight"], train["batch_size"] or 32,
                             order, padding="max_length")
    counts = model.loss_counts(*data.arrays[1:])  # every example's, counted once
    if counts is None:
        return train, data
    data.accumulate(steps, {name: ops.convert_to_numpy(count) for name, count in counts.items()})
    return data.for_keras(), data
