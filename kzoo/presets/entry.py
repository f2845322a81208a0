"""The two entry points every kzoo class's presets go through: `load` (the
body of `from_preset`) and `save` (of `save_to_preset`).

`load` takes a built-in name or a path, and reads the path with the
registered format that claims it (`kzoo.presets.registry`); `save` writes with
the format asked for. kzoo's own preset directories are registered here as
the format "kzoo".
"""

from kzoo.presets import atomic
from kzoo.presets.builtin import is_builtin_name
from kzoo.presets.names import load_name
from kzoo.presets.reading import load_directory
from kzoo.presets.registry import DEFAULT_FORMAT, detect_format, get_format, register_format
from kzoo.presets.writing import role_of, save_directory

register_format(DEFAULT_FORMAT, load=load_directory, export=save_directory)


def load(cls, preset, /, load_weights=True, **kwargs):
    """A `cls` from a built-in preset name, a preset directory, or a
    checkpoint in a registered format.

    - A name (see `kzoo.list_presets`) with released weights fetches them
      once (Hugging Face Hub, or an installed package; see
      `kzoo.presets.sources`) and loads them, vocabulary and casing included,
      as the directory they are in would load; an architecture-only name
      gives random weights and a warning. `kwargs` override the config; a
      task class (one that takes a `backbone`) gets `cls(backbone=<the
      preset's backbone>, **kwargs)`, with `dtype` and the backbone's config
      fields (e.g. `max_sequence_length`) going to the backbone. See
      `kzoo.presets.names`.
    - A directory (str or `os.PathLike`) written by `save_to_preset` gives
      the saved object with its weights; a task class gets the saved task,
      or the saved backbone with a fresh head.
    - A checkpoint in another registered format (a Hugging Face directory or
      `hf://owner/name`, a google-research directory or .zip, a KerasHub
      preset directory or `kaggle://` handle; see `kzoo.checkpoints`) is
      converted on the fly.

    A name is looked up first: write `./bert_tiny` for a directory of that
    name.

    Args:
        cls: type. The kzoo class asked for.
        preset: str or os.PathLike. A built-in name, or a path.
        load_weights: bool. For a name: `False` builds its architecture with
            random weights, without a warning and without the network (a task
            gets the preset's tokenizer only if its files are already on this
            machine). A path always loads its weights. Defaults to `True`.
        **kwargs: the class's arguments, or overrides of the saved config.

    Returns:
        A `cls`.

    Example:

    >>> import tempfile
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> path = tempfile.mkdtemp()
    >>> save(backbone, path)
    >>> load(BertBackbone, path).num_layers
    1
    >>> load(BertBackbone, "bert_tiny", load_weights=False).hidden_dim  # no download
    128
    >>> load(BertBackbone, "bert_tinny")
    Traceback (most recent call last):
    ...
    ValueError: Unknown preset 'bert_tinny'. Did you mean: 'bert_tiny'... It is not a directory either: a preset directory must contain config.json (write one with `save_to_preset`).
    """
    if not isinstance(load_weights, bool):
        raise ValueError(f"load_weights is True or False; got {load_weights!r}.")
    if is_builtin_name(preset):
        return load_name(cls, preset, load_weights, **kwargs)
    if not load_weights:
        raise ValueError(
            f"load_weights=False builds a built-in preset name's architecture with random weights; "
            f"{preset!r} is a path, whose weights are part of it. Load it as it is, or build "
            f"kzoo.{cls.__name__}(...) from its arguments for random weights."
        )
    atomic.recover(preset)  # a directory whose save was killed between its two renames
    return get_format(detect_format(preset), "load").load(cls, preset, **kwargs)


def save(obj, path, format=DEFAULT_FORMAT):
    """Writes a backbone, task, preprocessor or tokenizer in a registered format.

    The "kzoo" format is a preset directory in KerasHub's layout, with every
    part `obj` holds (a task's backbone and preprocessor too); "huggingface"
    writes BERT models as `transformers` reads them (see `kzoo.checkpoints`).

    Args:
        obj: object. What to save.
        path: str or os.PathLike. A new or empty directory (or one written
            earlier in the same format).
        format: str. A registered format that writes (`format_names("export")`).
            Defaults to `"kzoo"`.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> path = tempfile.mkdtemp()
    >>> save(backbone, path, format="huggingface")
    >>> sorted(os.listdir(path))
    ['config.json', 'model.safetensors']
    """
    get_format(format, "export").export(obj, path)


def save_backbone(backbone, path, format=DEFAULT_FORMAT):
    """`save` for a backbone (a `keras.Model` without a `backbone`).

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny")
    >>> save_backbone(backbone, path)
    >>> sorted(os.listdir(path))
    ['config.json', 'metadata.json', 'model.weights.h5']
    """
    _save_as("backbone", backbone, path, format)


def save_task(task, path, format=DEFAULT_FORMAT):
    """`save` for a task: a `keras.Model` with a `backbone` attribute (a
    `keras.Model`) whose `get_config` serializes it (and its `preprocessor`,
    if any) with `keras.saving.serialize_keras_object`.

    Example:

    >>> import json, os, tempfile
    >>> from kzoo import BertBackbone, BertPretrainer
    >>> model = BertPretrainer(BertBackbone(vocabulary_size=50, num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16))
    >>> path = tempfile.mkdtemp()
    >>> save_task(model, path, format="huggingface")
    >>> with open(os.path.join(path, "config.json")) as f:
    ...     json.load(f)["architectures"]
    ['BertForPreTraining']
    """
    _save_as("task", task, path, format)


def save_preprocessor(preprocessor, path, format=DEFAULT_FORMAT):
    """`save` for a preprocessor (an object with a `tokenizer`).

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertPreprocessor, BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> path = tempfile.mkdtemp()
    >>> save_preprocessor(BertPreprocessor(tokenizer, sequence_length=8), path)
    >>> sorted(os.listdir(path))
    ['assets', 'metadata.json', 'preprocessor.json', 'tokenizer.json']
    """
    _save_as("preprocessor", preprocessor, path, format)


def save_tokenizer(tokenizer, path, format=DEFAULT_FORMAT):
    """`save` for a tokenizer.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> path = tempfile.mkdtemp()
    >>> save_tokenizer(tokenizer, path)
    >>> sorted(os.listdir(path)), os.listdir(os.path.join(path, "assets", "tokenizer"))
    (['assets', 'metadata.json', 'tokenizer.json'], ['vocabulary.txt'])
    """
    _save_as("tokenizer", tokenizer, path, format)


def _save_as(role, obj, path, format):
    """`save(obj, path, format)` after checking `obj` is a `role`."""
    found = role_of(obj)
    if found != role:
        if role == "task":
            raise ValueError(
                f"save_task saves a keras.Model with a `backbone` attribute (a keras.Model); "
                f"got a {type(obj).__name__} whose backbone is {type(getattr(obj, 'backbone', None)).__name__}. "
                "Save a bare backbone with `save_backbone`."
            )
        raise ValueError(
            f"save_{role} saves a {role}; got a {type(obj).__name__}, which is a {found}. "
            f"Save it with `save_{found}` (or `save`, which tells them apart)."
        )
    save(obj, path, format)
