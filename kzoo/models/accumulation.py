"""Gradient accumulation that equals the big batch for losses that are a
mean over tokens.

Keras' optimizer with `gradient_accumulation_steps=k` updates once every k
micro-batches with the *mean* of their gradients. A loss that is a mean over
each micro-batch's tokens then weighs a token of a micro-batch with few real
tokens more than one of a full micro-batch: k micro-batches are not the big
batch of their examples (Hugging Face's transformers#35438). The big batch's
loss is `Σ_group ℓ / N`, N the group's tokens, so micro-batch j must
contribute `k · Σ_j ℓ / N`: its own mean loss times `n_j / (N / k)`.

The data path knows the groups, so it computes `N / k` (the *normaliser*):
`MicroBatches` cuts each epoch into batches of k·b examples (the big batches,
drawn as `fit(batch_size=k·b)` draws them) and each into k micro-batches, and
sends each micro-batch's normalisers with its sample weights
(`with_normalisers`). `kzoo.models.BaseModel` takes them out again
before Keras' loss and metrics see the weights, and rescales the loss
(`renormalised_loss`) of a model whose `loss_counts` says what it averages over.
Every epoch is then a whole number of groups, so an epoch's end (where
`keras.callbacks.BackupAndRestore` backs up) is a group's end as well.
"""

import warnings

import numpy as np
from keras import ops

from kzoo.models.batching import LengthBatches


def accumulated(model, train, data, order):
    """`(train, data)` as micro-batches, k of them the big batch, when `model`'s optimizer accumulates gradients."""
    steps = int(getattr(model.optimizer, "gradient_accumulation_steps", None) or 1)
    if steps == 1:
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
    batches = data or LengthBatches(  # packed inputs in memory that Keras would batch (e.g. the Transformer's)
        train["x"], train["y"], train["sample_weight"], train["batch_size"] or 32, order, padding="max_length")
    counts = model.loss_counts(*batches.arrays[1:])  # every example's, counted once
    if counts is None:
        return train, data
    return None, MicroBatches(batches, steps, {name: ops.convert_to_numpy(count) for name, count in counts.items()})


class MicroBatches(LengthBatches):
    """The examples of `data` (a `LengthBatches`) for accumulation over `steps`:
    big batches of `steps · batch_size` examples, each cut into `steps`
    micro-batches that carry the big batch's `counts` (`{name: (examples,)
    array}`) divided by `steps`."""

    def __init__(self, data, steps, counts):
        vars(self).update(vars(data))  # the same examples, ladder, order and seed
        self.batch_size, self.steps, self.counts = data.batch_size * steps, steps, counts
        self.set_epoch(0)

    def set_epoch(self, epoch, logs=None):
        super().set_epoch(epoch)  # the big batches, then each cut in `steps`
        self.batches, self.normalisers = micro_batches(self.batches, self.steps, self.counts)

    def __getitem__(self, index):
        x, y, sample_weight = (*self.batch(self.batches[index]), None, None)[:3]
        return x, y, with_normalisers(sample_weight, self.normalisers[index], len(self.batches[index]))


NORMALISERS = "loss_normalisers"
SAMPLE_WEIGHT = "sample_weight"


def micro_batches(groups, steps, counts):
    """`(batches, normalisers)`: each group (a big batch's example indices) split
    into `steps` micro-batches of nearly equal sizes, each with the group's
    `counts` summed and divided by `steps`; a group of fewer than `steps`
    examples completed by micro-batches that repeat its first example with
    infinite normalisers (they weigh nothing; the optimizer still updates once).

    Example:

    >>> batches, normalisers = micro_batches([np.arange(5), np.array([5])], 2, {"tokens": np.arange(6.0)})
    >>> [b.tolist() for b in batches], [n["tokens"] for n in normalisers]
    ([[0, 1, 2], [3, 4], [5], [5]], [5.0, 5.0, 2.5, inf])
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
    """A batch's sample weights with its normalisers beside them, one value per example (Keras may split a batch)."""
    packed = {NORMALISERS: {name: np.full((rows,), value, "float32") for name, value in normalisers.items()}}
    return packed if sample_weight is None else {**packed, SAMPLE_WEIGHT: sample_weight}
