"""The registry of preset formats: how `from_preset` reads, and
`save_to_preset` writes, each kind of directory.

kzoo's own preset directories are the format "kzoo", registered by
`kzoo.presets` itself; it is the fallback for a path no other format claims.
Checkpoint formats (Hugging Face, google-research, KerasHub) register
themselves from `kzoo.checkpoints`, which `import kzoo` imports: this package
imports no model and no checkpoint format.
"""

import dataclasses
from typing import Callable, Optional

DEFAULT_FORMAT = "kzoo"

_FORMATS = {}


@dataclasses.dataclass(frozen=True)
class PresetFormat:
    """A registered preset format (see `register_format`).

    Attributes:
        name: str. The format's name, as `save_to_preset(path, format=name)`
            takes it.
        detect: callable or None. `detect(path) -> bool`: whether `path` is
            in this format. None for the fallback format.
        load: callable or None. `load(cls, path, **kwargs)`: a `cls` read
            from `path`, `kwargs` overriding its config.
        export: callable or None. `export(obj, path)`: writes `obj` in this
            format.
    """

    name: str
    detect: Optional[Callable] = None
    load: Optional[Callable] = None
    export: Optional[Callable] = None


def register_format(name, *, detect=None, load=None, export=None):
    """Registers a preset format, replacing any earlier one of the same name.

    `from_preset(path)` asks the formats' `detect` functions in registration
    order and loads `path` with the first that claims it (the fallback
    format "kzoo" when none does); `save_to_preset(path, format=name)`
    writes with the format's `export`.

    Args:
        name: str. The format's name.
        detect: callable. `detect(path) -> bool`, given a str or
            `os.PathLike` path (or a handle such as `hf://owner/name`); it
            must not raise for paths of other formats. Defaults to `None`: the
            format is never detected (only the fallback format has none).
        load: callable. `load(cls, path, /, **kwargs)` returns a `cls`.
            Defaults to `None`: the format is write-only.
        export: callable. `export(obj, path)` writes a model (or tokenizer,
            preprocessor) in the format. Defaults to `None`: read-only.

    Returns:
        The registered `PresetFormat`.

    Example:

    >>> import os, tempfile
    >>> fmt = register_format("example_text", detect=lambda path: str(path).endswith(".txt"),
    ...                       load=lambda cls, path, **kwargs: cls(open(path).read()))
    >>> path = os.path.join(tempfile.mkdtemp(), "name.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("hello")
    >>> detect_format(path), get_format(detect_format(path)).load(str, path)
    ('example_text', 'hello')
    >>> unregister_format("example_text")
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"A preset format's name is a non-empty str; got {name!r}.")
    _FORMATS[name] = PresetFormat(name, detect, load, export)
    return _FORMATS[name]


def unregister_format(name):
    """Removes format `name` from the registry (e.g. a test's own format).

    Args:
        name: str. A registered format's name.
    """
    _FORMATS.pop(name)


def detect_format(path):
    """The name of the registered format that reads `path`.

    Args:
        path: str or os.PathLike. A directory, file or handle.

    Returns:
        The first format (in registration order) whose `detect` claims
        `path`, else "kzoo" (kzoo's own preset directories, whose loader
        reports a path that is none).

    Example:

    >>> import tempfile
    >>> from kzoo import BertBackbone
    >>> path = tempfile.mkdtemp()
    >>> BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...              intermediate_dim=16).save_to_preset(path)
    >>> detect_format(path), detect_format("hf://google-bert/bert-base-uncased")
    ('kzoo', 'huggingface')
    """
    return next(
        (fmt.name for fmt in _FORMATS.values() if fmt.detect is not None and fmt.detect(path)),
        DEFAULT_FORMAT,
    )


def get_format(name, purpose=None):
    """The registered format `name`.

    Args:
        name: str. A format's name.
        purpose: str. "load" or "export": the format must be able to do it.
            Defaults to `None`, no check.

    Returns:
        A `PresetFormat`.

    Raises:
        ValueError: no such format (or it cannot do `purpose`); the message
            lists the formats that can.

    Example:

    >>> get_format("huggingface", "export").name
    'huggingface'
    >>> get_format("onnx", "export")
    Traceback (most recent call last):
    ...
    ValueError: Unknown preset format 'onnx': save_to_preset writes ['kzoo', 'huggingface'].
    """
    fmt = _FORMATS.get(name)
    if fmt is None or (purpose is not None and getattr(fmt, purpose) is None):
        if purpose == "export":
            raise ValueError(f"Unknown preset format {name!r}: save_to_preset writes {format_names('export')}.")
        raise ValueError(f"Unknown preset format {name!r}: kzoo reads {format_names(purpose or 'load')}.")
    return fmt


def format_names(purpose=None):
    """The registered formats' names, in registration order.

    Args:
        purpose: str. "load" or "export": only the formats that can.
            Defaults to `None`, all formats.

    Returns:
        A list of str.

    Example:

    >>> format_names("export")
    ['kzoo', 'huggingface']
    """
    return [name for name, fmt in _FORMATS.items() if purpose is None or getattr(fmt, purpose) is not None]
