"""What a tokenizer is given, checked and converted: its vocabulary (BERT sec. 3:
a WordPiece vocabulary, one token per line) and the text it tokenizes."""

import os

import numpy as np
import tensorflow as tf


def read_vocabulary(vocabulary):
    """A vocabulary as a list of tokens, in id order (BERT sec. 3).

    A file holds one token per line; only "\\n" and "\\r\\n" end a line, as in
    Hugging Face, so Unicode line separators stay inside tokens.

    Args:
        vocabulary: str, `os.PathLike` or list of str. A vocabulary file, or
            the tokens themselves (a list, tuple or numpy array of str or bytes).

    Returns:
        A list of str.

    Example:

    >>> read_vocabulary(["[PAD]", b"a"])
    ['[PAD]', 'a']
    """
    if isinstance(vocabulary, (str, os.PathLike)):
        path = os.fspath(vocabulary)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Vocabulary file not found: {path!r}")
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]
    if isinstance(vocabulary, (list, tuple, np.ndarray)):
        tokens = [t.decode("utf-8") if isinstance(t, bytes) else t for t in list(vocabulary)]
        if not all(isinstance(t, str) for t in tokens):
            raise ValueError("`vocabulary` must be a file path or a list of strings.")
        return tokens
    raise ValueError(
        f"`vocabulary` must be a file path or a list of strings, got {type(vocabulary).__name__}."
    )


def check_strings(values, caller, name="inputs"):
    """A `ValueError` naming the first item of `values` that is not a string
    (None, a number, NaN from an empty pandas cell): text is never made from
    them silently (`str(None)` would be the text "None").

    Args:
        values: str, bytes, a (nested) list or tuple, or a NumPy array. Text
            in memory; NumPy arrays of `str` or `bytes` dtype are text by type.
        caller: str. Who expects strings, for the message.
        name: str. The argument's name, for the message. Defaults to `"inputs"`.

    Example:

    >>> check_strings(["a", ["b", "c"]], "MyTokenizer")
    >>> check_strings(["a", None], "MyTokenizer", "x")
    Traceback (most recent call last):
    ...
    ValueError: MyTokenizer expected strings, but x[1] is None (NoneType). A missing value (None, or NaN ...
    """
    found = _first_non_string(values, ())
    if found is None:
        return
    path, value = found
    kind = type(value).__name__
    value = value.item() if isinstance(value, np.generic) else value  # 1, not np.int64(1)
    where = name + "".join(f"[{i}]" for i in path)
    missing = value is None or (isinstance(value, (float, np.floating)) and np.isnan(value))
    if missing:
        hint = (
            " A missing value (None, or NaN from an empty pandas cell) is not text: drop those "
            'examples or fill them with strings, e.g. `column.fillna("")`.'
        )
    elif isinstance(value, (int, float, complex, np.number, np.bool_)):
        hint = " Numbers are not turned into text silently: convert them yourself (str(value)) if they are text."
    else:
        hint = ""
    raise ValueError(f"{caller} expected strings, but {where} is {value!r:.40} ({kind}).{hint}")


def _first_non_string(value, path):
    """`(path, item)` of the first leaf of `value` that is not str or bytes, or None."""
    if isinstance(value, (str, bytes)):
        return None
    if isinstance(value, np.ndarray) and value.dtype.kind in "US":
        return None
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
        for i, item in enumerate(value):
            found = _first_non_string(item, (*path, i))
            if found is not None:
                return found
        return None
    return path, value


def to_string_tensor(inputs, caller="BertTokenizer"):
    """Text as a `tf.string` tensor, or a `ValueError` for anything that is
    not text (BERT sec. 3's input is text).

    Args:
        inputs: str, bytes, list, numpy array or `tf.string` tensor. The text:
            a (nested) list or numpy array of str or bytes, or a dense or
            ragged `tf.string` tensor (passed through).
        caller: str. The name the error message starts with. Defaults to
            `"BertTokenizer"` (the BERT preprocessors' tokenizer).

    Returns:
        A `tf.Tensor` or `tf.RaggedTensor` of dtype `tf.string`.

    Example:

    >>> to_string_tensor(["a b"]).dtype.name
    'string'
    >>> to_string_tensor(["a", 2], caller="MyTokenizer")
    Traceback (most recent call last):
    ...
    ValueError: MyTokenizer expected strings, but inputs[1] is 2 (int). Numbers are not turned into text ...
    """
    if isinstance(inputs, (tf.Tensor, tf.RaggedTensor)):
        if inputs.dtype != tf.string:
            values = tf.reshape(inputs.flat_values if isinstance(inputs, tf.RaggedTensor) else inputs, [-1])
            example = ""
            if tf.executing_eagerly() and int(tf.size(values)) > 0:
                example = f" such as {values[0].numpy().item()!r}"
            raise ValueError(
                f"{caller} expected strings (tf.string), got a {inputs.dtype.name} tensor{example}. "
                "Numbers are not turned into text silently: convert them yourself if they are text."
            )
        return inputs
    if isinstance(inputs, (str, bytes)):
        return tf.constant(inputs)
    check_strings(inputs, caller)
    array = np.asarray(inputs, dtype=object) if not isinstance(inputs, np.ndarray) else inputs
    return tf.constant(array.astype(object) if array.dtype.kind == "U" else array, dtype=tf.string)
