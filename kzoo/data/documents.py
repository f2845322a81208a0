"""Document-level corpora for BERT pre-training (BERT sec. 3.1: "it is critical
to use a document-level corpus rather than a shuffled sentence-level corpus").

A corpus is a list of documents, each a list of sentences (str). It can come
from Python iterables, from text files in the google-research/bert format
(one sentence per line, a blank line between documents), or from a
`tf.data.Dataset`. Pair generation for next sentence prediction needs random
access to every document, so `read_documents` holds the corpus in memory;
`stream_text_file` yields one file's documents one at a time, for
`kzoo.data.write_pretraining_shards` at corpus scale.
"""

import glob
import os

import numpy as np
import tensorflow as tf


def read_text_files(patterns):
    """Documents from text files in the google-research/bert format (BERT sec. 3.1).

    One sentence (or line) per line; a blank line ends a document; documents
    never span two files. Leading and trailing white space is stripped.

    Args:
        patterns: str, `os.PathLike` or list of them. Paths or glob patterns.

    Returns:
        A list of documents, each a list of sentences, in file order.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("First sentence.\\nSecond one.\\n\\nAnother document.\\n")
    >>> read_text_files(path)
    [['First sentence.', 'Second one.'], ['Another document.']]
    """
    return [document for path in text_files(patterns) for document in stream_text_file(path)]


def text_files(patterns):
    """The files that paths or glob patterns name, sorted within each pattern.

    Args:
        patterns: str, `os.PathLike` or list of them. Paths or glob patterns.

    Returns:
        A list of paths (str), in pattern order; a pattern that matches
        nothing is an error.

    Example:

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> for name in ("b.txt", "a.txt"):
    ...     open(os.path.join(folder, name), "w").close()
    >>> [os.path.basename(path) for path in text_files(os.path.join(folder, "*.txt"))]
    ['a.txt', 'b.txt']
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    files = []
    for pattern in patterns:
        matches = sorted(glob.glob(os.fspath(pattern)))
        if not matches:
            raise ValueError(
                f"No file matches {os.fspath(pattern)!r}. Give existing text files or glob "
                "patterns; to pass text directly, give a list of documents, each a list "
                "of sentences."
            )
        files.extend(matches)
    return files


def stream_text_file(path):
    """Yields the documents of one text file in the google-research/bert
    format (see `read_text_files`), one at a time: memory holds one document,
    whatever the size of the file (BERT sec. 3.1).

    Args:
        path: str or `os.PathLike`. A UTF-8 text file.

    Yields:
        Documents, each a list of sentences.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("One.\\nTwo.\\n\\n\\nThree.")
    >>> list(stream_text_file(path))
    [['One.', 'Two.'], ['Three.']]
    """
    with open(path, encoding="utf-8") as f:
        current = []
        for line in f:
            line = line.strip()
            if line:
                current.append(line)
            elif current:
                yield current
                current = []
        if current:
            yield current


def _from_dataset(dataset):
    spec = dataset.element_spec
    if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string or spec.shape.rank not in (0, 1):
        raise ValueError(
            "A tf.data corpus must yield one document per element: a scalar string "
            f"(sentences on separate lines) or a 1-D tensor of sentences; got {spec}."
        )
    documents = []
    for element in dataset.as_numpy_iterator():
        if spec.shape.rank == 0:
            sentences = element.decode("utf-8").splitlines()
        else:
            sentences = [s.decode("utf-8") for s in element]
        sentences = [s.strip() for s in sentences if s.strip()]
        if sentences:
            documents.append(sentences)
    return documents


def _is_path_like(source):
    return isinstance(source, (str, os.PathLike))


def read_documents(source):
    """A corpus as a list of documents, each a list of sentences (BERT sec. 3.1).

    Args:
        source: str, list of str, iterable or `tf.data.Dataset`. One of
            - a path or glob pattern, or a list of them: text files in the
              google-research/bert format (see `read_text_files`);
            - an iterable of documents, each a list (or tuple or 1-D array)
              of sentence strings;
            - a `tf.data.Dataset` of documents: scalar strings with one
              sentence per line, or 1-D string tensors of sentences.

    Empty sentences and empty documents are dropped; document boundaries are kept.

    Returns:
        A list of documents, each a list of `str` sentences.

    Example:

    >>> import tensorflow as tf
    >>> read_documents([["A first.", "A second."], ("B only.",)])
    [['A first.', 'A second.'], ['B only.']]
    >>> read_documents(tf.data.Dataset.from_tensor_slices(["one\\ntwo", "three"]))
    [['one', 'two'], ['three']]
    """
    if isinstance(source, tf.data.Dataset):
        return _from_dataset(source)
    if _is_path_like(source):
        return read_text_files(source)
    source = list(source)
    if source and all(_is_path_like(item) for item in source):
        return read_text_files(source)
    documents = []
    for index, document in enumerate(source):
        if _is_path_like(document) or not isinstance(document, (list, tuple, np.ndarray)):
            raise ValueError(
                f"Document {index} is a {type(document).__name__}; a corpus is a list of "
                "documents, each a list of sentences (or a list of file paths, or a "
                "tf.data.Dataset)."
            )
        sentences = [_as_text(s).strip() for s in document]
        sentences = [s for s in sentences if s]
        if sentences:
            documents.append(sentences)
    return documents


def _as_text(sentence):
    if isinstance(sentence, (bytes, np.bytes_)):
        return sentence.decode("utf-8")
    if isinstance(sentence, (str, np.str_)):
        return str(sentence)
    raise ValueError(f"Sentences must be strings; got {type(sentence).__name__} {sentence!r}.")
