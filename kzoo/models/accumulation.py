"""Gradient accumulation that equals the big batch for token-level losses.

Keras' optimizer with `gradient_accumulation_steps=k` updates once every k
micro-batches with the *mean* of their gradients. A loss that is a mean over
each micro-batch's tokens then weighs a token of a micro-batch with few real
tokens more than one of a full micro-batch: k micro-batches are not the big
batch of their examples (Hugging Face's transformers#35438). The big batch's
loss is `Σ_group ℓ / N`, N the group's tokens, so micro-batch j must
contribute `k · Σ_j ℓ / N`: its own mean loss times `n_j / (N / k)`.

The data path knows the groups, so it computes `N / k` (the *normaliser*):
`kzoo.models.batching.LengthBatches.accumulate` cuts each epoch into batches
of k·b examples (the big batches, drawn as `fit(batch_size=k·b)` draws them)
and each into k micro-batches, and sends each micro-batch's normalisers with
its sample weights (`with_normalisers`). `BaseModel` takes them out again
(`split`) before Keras' loss and metrics see the weights, and rescales the
loss (`BaseModel.renormalised_loss`). A task says what its loss averages over
with `loss_counts(y, sample_weight)`: per-example counts, one entry per mean
in its loss (e.g. `{"mlm": ..., "nsp": ...}` for BERT's pre-training).

Every epoch is then a whole number of groups, so an epoch's end (where
`keras.callbacks.BackupAndRestore` backs up) is a group's end as well.
"""

import numpy as np

NORMALISERS = "loss_normalisers"
SAMPLE_WEIGHT = "sample_weight"


def accumulation_steps(optimizer):
    """Micro-batches per optimizer update: the optimizer's
    `gradient_accumulation_steps`, 1 without accumulation.

    Example:

    >>> import keras
    >>> accumulation_steps(keras.optimizers.Adam(gradient_accumulation_steps=4))
    4
    >>> accumulation_steps(keras.optimizers.Adam()), accumulation_steps(None)
    (1, 1)
    """
    return int(getattr(optimizer, "gradient_accumulation_steps", None) or 1)


def checked_steps(steps):
    """`gradient_accumulation_steps` for a Keras optimizer: None for None or
    1 (Keras takes 2 or more), else the positive int; anything else is a
    `ValueError` in kzoo's words.

    Example:

    >>> checked_steps(1), checked_steps(4)
    (None, 4)
    >>> checked_steps(0)
    Traceback (most recent call last):
    ...
    ValueError: gradient_accumulation_steps must be a positive int or None; got 0.
    """
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"gradient_accumulation_steps must be a positive int or None; got {steps!r}.")
    return None if steps == 1 else steps


def micro_batches(groups, steps, counts):
    """`(batches, normalisers)`: each group of examples (a big batch) split
    into `steps` micro-batches of nearly equal sizes, each with the group's
    counts divided by `steps` (`{name: float}`).

    A group of fewer than `steps` examples is completed by micro-batches
    that repeat its first example with infinite normalisers: they weigh
    nothing, and the optimizer still updates once per group.

    Args:
        groups: list of int arrays. The example indices of each big batch.
        steps: int. k, the micro-batches per group.
        counts: dict of float arrays `(examples,)`. What each example adds
            to each of the loss's denominators (`loss_counts`).

    Example:

    >>> batches, normalisers = micro_batches([np.arange(5), np.array([5])], 2, {"tokens": np.arange(6.0)})
    >>> [b.tolist() for b in batches]
    [[0, 1, 2], [3, 4], [5], [5]]
    >>> [n["tokens"] for n in normalisers]
    [5.0, 5.0, 2.5, inf]
    """
    batches, normalisers = [], []
    for rows in groups:
        totals = {name: float(np.sum(count[rows])) / steps for name, count in counts.items()}
        for part in np.array_split(rows, steps):
            filler = len(part) == 0
            batches.append(rows[:1] if filler else part)
            normalisers.append({name: np.inf for name in totals} if filler else totals)
    return batches, normalisers


def with_normalisers(sample_weight, normalisers, rows):
    """A batch's sample weights with its normalisers beside them, one value
    per example (so that Keras can split a batch over devices).

    Example:

    >>> weights = with_normalisers(None, {"tokens": 2.5}, 3)
    >>> weights[NORMALISERS]["tokens"].tolist(), SAMPLE_WEIGHT in weights
    ([2.5, 2.5, 2.5], False)
    """
    packed = {NORMALISERS: {name: np.full((rows,), value, "float32") for name, value in normalisers.items()}}
    return packed if sample_weight is None else {**packed, SAMPLE_WEIGHT: sample_weight}


def split(sample_weight):
    """`(sample_weight, normalisers)`: a batch's own sample weights (or None)
    and its normalisers as scalars (`{name: tensor}`, or None when the batch
    carries none).

    Example:

    >>> weights, normalisers = split(with_normalisers(np.ones(2), {"tokens": 4.0}, 2))
    >>> weights.tolist(), float(normalisers["tokens"])
    ([1.0, 1.0], 4.0)
    >>> split(np.ones(2))[1] is None
    True
    """
    if not isinstance(sample_weight, dict) or NORMALISERS not in sample_weight:
        return sample_weight, None
    normalisers = {name: value[0] for name, value in sample_weight[NORMALISERS].items()}  # equal in a batch
    return sample_weight.get(SAMPLE_WEIGHT), normalisers
