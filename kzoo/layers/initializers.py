"""Initializer helpers shared by the layers."""

import keras


def clone_initializer(initializer):
    """A fresh copy of `initializer` for one sub-layer.

    Reusing one seeded initializer object for several weights would give them
    identical values; each sub-layer gets its own copy instead.

    Example:

    >>> init = keras.initializers.TruncatedNormal(stddev=0.02)
    >>> copy = clone_initializer(init)
    >>> copy is init, copy.get_config() == init.get_config()
    (False, True)
    """
    return keras.initializers.get(keras.initializers.serialize(initializer))
