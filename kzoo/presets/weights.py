"""Weights files of a preset directory (`model.weights.h5`, `task.weights.h5`):
written without optimizer state, read after checking every variable's shape."""

import collections
import os
import tempfile

import h5py
import keras

from kzoo.layers.dropout import SEED_STATE
from kzoo.presets.directory import RESAVE


def save_weights(model, path):
    """Writes `model`'s weights to `path`, without its optimizer's state.

    Args:
        model: keras.Model. The model to save.
        path: str. A `.weights.h5` file.

    Example:

    >>> import os, tempfile, keras
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.weights.h5")
    >>> save_weights(model, path)
    >>> sorted(weight_shapes(path).values())
    [(2,), (3, 2)]
    """
    optimizer = getattr(model, "optimizer", None)  # set by `compile`
    skip = [optimizer] if optimizer is not None else None
    keras.saving.save_weights(model, path, objects_to_skip=skip)


def load_weights(model, path, described_by):
    """`model.load_weights(path)`, after checking the file is readable and its
    variables have the shapes of `model` (Keras ignores a file's extra layers).

    Args:
        model: keras.Model. The model built from the preset's JSON.
        path: str. The `.weights.h5` file.
        described_by: str. The JSON file `model` was built from, for messages.

    Raises:
        ValueError: the file is missing, damaged, or its shapes differ from
            the model's; the message lists the variables that differ.

    Example:

    >>> import os, tempfile, keras
    >>> path = os.path.join(tempfile.mkdtemp(), "model.weights.h5")
    >>> save_weights(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), path)
    >>> load_weights(keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)]), path, "config.json")
    Traceback (most recent call last):
    ...
    ValueError: The weights in '...' do not match the model config.json describes (2 variable(s) differ):
      variable 'layers/dense.../vars/0': expected shape (3, 4), found (3, 2)
    ...
    """
    if not os.path.isfile(path):
        raise ValueError(
            f"The weights file {path!r} is missing: the preset has {described_by} but no "
            f"{os.path.basename(path)}. {RESAVE}, or copy the whole directory again."
        )
    found = weight_shapes(path)
    expected = collections.Counter(tuple(w.shape) for w in model.weights)
    if collections.Counter(found.values()) != expected:
        differences = _shape_differences(model, found)
        if differences:
            raise ValueError(
                f"The weights in {path!r} do not match the model {described_by} describes "
                f"({len(differences)} variable(s) differ):\n  " + "\n  ".join(differences[:5])
                + f"\nWas {described_by} edited, or overridden? Load it unchanged, or "
                "re-save the preset with `save_to_preset(path)`."
            )
    try:
        model.load_weights(path)
    except Exception as error:  # Keras reports damaged files in many ways
        raise ValueError(f"Could not load {path!r}: {error}. {RESAVE}.") from error


def weight_shapes(path):
    """`{variable path in the file: shape}` of a `.weights.h5` file, optimizer
    state and random state (`kzoo.layers.Dropout`'s) left out; a `ValueError`
    for a corrupt or truncated file.

    Args:
        path: str. The `.weights.h5` file.

    Returns:
        A dict of tuples.
    """
    shapes = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and not name.startswith("optimizer/") and not name.endswith(SEED_STATE):
            shapes[name] = tuple(item.shape)

    try:
        with h5py.File(path, "r") as f:
            f.visititems(visit)
    except (OSError, RuntimeError, KeyError, ValueError) as error:
        raise ValueError(
            f"Cannot read the weights file {path!r} ({error}): it is corrupt or truncated "
            f"(an interrupted save or copy?). {RESAVE}, or copy the file again."
        ) from error
    return shapes


def _shape_differences(model, found):
    """One line per variable whose shape differs between `model` and the file."""
    with tempfile.TemporaryDirectory() as scratch:
        reference = os.path.join(scratch, "reference.weights.h5")
        save_weights(model, reference)
        expected = weight_shapes(reference)
    return [
        f"variable {name!r}: "
        + (f"expected shape {expected[name]}" if name in expected else "not in the model")
        + (f", found {found[name]}" if name in found else ", not in the file")
        for name in sorted(expected.keys() | found.keys())
        if expected.get(name) != found.get(name)
    ]
