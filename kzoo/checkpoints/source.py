"""What every checkpoint reader returns (`CheckpointSource`), and the file
checks the readers share: reading a checkpoint's JSON, and telling formats
apart by the files a directory holds."""

import dataclasses
import json
import os


@dataclasses.dataclass
class CheckpointSource:
    """A checkpoint opened by a format's reader: what kzoo needs from it.

    Attributes:
        format: str. The registered format's name ("huggingface", "google",
            "keras_hub").
        location: str. The path (or handle) it was opened from, for messages.
        backbone_config: dict or None. `kzoo.BertBackbone` arguments, or None
            for a tokenizer-only directory.
        tokenizer_config: dict or None. `kzoo.BertTokenizer` arguments
            (`vocabulary`, `lowercase`, ...; `lowercase=None` when the source
            does not say), or None without a vocabulary.
        shapes: dict. `{source tensor name: shape}`, read without loading the
            arrays.
        read: callable. `read(name)` returns the array (a `ValueError` for a
            damaged file).
        architectures: tuple of str. The Hugging Face classes that wrote it
            (their heads). Defaults to `()`.
        head_config: dict. Task arguments the source fixes (`num_classes`,
            and the label names as `class_names` and `tags`). Defaults to `{}`.
        keep_alive: object. Files the source needs while it is read (an
            unzipped copy). Defaults to `None`.

    Example:

    >>> import numpy as np
    >>> source = CheckpointSource("huggingface", "example", None, None,
    ...     shapes={"pooler.dense.bias": (8,)}, read=lambda name: np.zeros(8))
    >>> source.shapes["pooler.dense.bias"], source.read("pooler.dense.bias").shape
    ((8,), (8,))
    """

    format: str
    location: str
    backbone_config: dict
    tokenizer_config: dict
    shapes: dict
    read: object
    architectures: tuple = ()
    head_config: dict = dataclasses.field(default_factory=dict)
    keep_alive: object = None

    def has_head(self, head):
        """Whether the checkpoint holds `head` (a `kzoo.checkpoints.bert_weights.Head`):
        its first tensor, written by the right Hugging Face class.

        Args:
            head: Head. A head of the weight table.

        Returns:
            True when the checkpoint has the head's weights.
        """
        name = head.rows[0].name(self.format)
        written_by = self.format != "huggingface" or head.hf_architecture is None or (
            head.hf_architecture in self.architectures
        )
        return name is not None and name in self.shapes and written_by


def read_json(path):
    """A checkpoint's JSON file; a `ValueError` says which file is damaged.

    Args:
        path: str. The JSON file.

    Returns:
        The parsed JSON.

    Example:

    >>> read_json("/nonexistent/config.json")
    Traceback (most recent call last):
    ...
    ValueError: Cannot read '/nonexistent/config.json' as JSON ([Errno 2] No such file or directory: '/nonexistent/config.json'). Copy the checkpoint again.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        raise ValueError(f"Cannot read {path!r} as JSON ({error}). Copy the checkpoint again.") from error


def local_path(path):
    """`path` as a str with `~` expanded, or None when it is not a path.

    Args:
        path: object. What `from_preset` was given.

    Returns:
        A str, or None.

    Example:

    >>> local_path("~/bert").startswith("~"), local_path(3)
    (False, None)
    """
    if not isinstance(path, (str, os.PathLike)):
        return None
    return os.path.expanduser(os.fspath(path))


def main_json(path):
    """The JSON that says what a directory holds: the first of `config.json`
    and `tokenizer.json` in it.

    Format detectors read it: Hugging Face's has `model_type` (or, for
    `tokenizer.json`, `model`), KerasHub's names a `keras_hub` class, kzoo's
    a `kzoo` one.

    Args:
        path: str or os.PathLike. The path `from_preset` was given.

    Returns:
        A dict; `{}` when the file is damaged or not a JSON object (kzoo's
        own loader reports it); None when `path` is not a directory or holds
        neither file.

    Example:

    >>> import json, os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> main_json(directory) is None
    True
    >>> with open(os.path.join(directory, "tokenizer.json"), "w") as f:
    ...     json.dump({"model": {"vocab": {}}}, f)
    >>> main_json(directory)
    {'model': {'vocab': {}}}
    """
    directory = local_path(path)
    if directory is None or not os.path.isdir(directory):
        return None
    for name in ("config.json", "tokenizer.json"):
        if os.path.isfile(os.path.join(directory, name)):
            try:
                config = read_json(os.path.join(directory, name))
            except ValueError:
                return {}
            return config if isinstance(config, dict) else {}
    return None
