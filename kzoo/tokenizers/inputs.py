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
    >>> to_string_tensor([1, 2], caller="MyTokenizer")
    Traceback (most recent call last):
    ...
    ValueError: MyTokenizer expected strings, got object input: [1, 2]
    """
    if isinstance(inputs, (tf.Tensor, tf.RaggedTensor)):
        if inputs.dtype != tf.string:
            raise ValueError(
                f"{caller} expected strings (tf.string), got a {inputs.dtype.name} tensor."
            )
        return inputs
    if isinstance(inputs, (str, bytes)):
        return tf.constant(inputs)
    array = np.asarray(inputs, dtype=object) if not isinstance(inputs, np.ndarray) else inputs
    if array.dtype.kind in ("U", "S") or (
        array.dtype == object and all(isinstance(x, (str, bytes)) for x in array.reshape(-1))
    ):
        return tf.constant(array.astype(object) if array.dtype.kind == "U" else array, dtype=tf.string)
    raise ValueError(f"{caller} expected strings, got {array.dtype} input: {inputs!r:.80}")
