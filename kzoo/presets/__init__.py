"""Presets behind every class's `from_preset` (`load`) and `save_to_preset` (`save_backbone`, ...):
built-in names (`builtin`, their weights in `released`), kzoo preset directories (`directory`) and
the formats of `kzoo.checkpoints`. No model is imported: classes come from the caller or Keras.
"""

import os

import keras

from kzoo import atomic, checkpoints
from kzoo.checkpoints import huggingface
from kzoo.layers import lora
from kzoo.presets import directory
from kzoo.presets.builtin import PresetInfo, get_preset, is_builtin_name, list_presets, load_name, print_presets
from kzoo.presets.released import cache_directory
from kzoo.presets.directory import saved_task_config

SAVE_FORMATS = ("kzoo", "huggingface")


def detect_format(path):
    """The format `from_preset` reads `path` in: one of `kzoo.checkpoints`, else "kzoo".

    Example:

    >>> import tempfile
    >>> detect_format(tempfile.mkdtemp()), detect_format("hf://google-bert/bert-base-uncased")
    ('kzoo', 'huggingface')
    """
    return checkpoints.detect(path) or "kzoo"


def load(cls, preset, /, load_weights=True, **kwargs):
    """A `cls` from a built-in preset name (looked up first: write `./bert_tiny` for such a
    directory), a kzoo preset directory, or a checkpoint of another format (Hugging Face,
    google-research, KerasHub; `hf://` and `kaggle://` handles), converted on the fly. A task
    class gets the saved task, or the saved backbone with a fresh head.

    Args:
        cls: type. The kzoo class asked for.
        preset: str or os.PathLike. A built-in name, or a path.
        load_weights: bool. For a name: `False` builds its architecture with
            random weights, without a warning or the network. A path always
            loads its weights. Defaults to `True`.
        **kwargs: the class's arguments, or overrides of the saved config.

    Example:

    >>> from kzoo import BertBackbone
    >>> load(BertBackbone, "bert_tiny", load_weights=False).hidden_dim  # no download
    128
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
    if checkpoints.detect(preset):
        return checkpoints.load(cls, preset, **kwargs)
    return directory.load_directory(cls, preset, **kwargs)


def save(obj, path, format="kzoo"):
    """Writes a backbone, task, preprocessor or tokenizer: "kzoo", a preset directory in KerasHub's
    layout with every part `obj` holds; "huggingface", a BERT directory `transformers` reads.

    Example:

    >>> import os, tempfile, kzoo
    >>> save(kzoo.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                   intermediate_dim=16), path := tempfile.mkdtemp(), format="huggingface")
    >>> sorted(os.listdir(path))
    ['config.json', 'model.safetensors']
    """
    if format == "kzoo":
        directory.save_directory(obj, path)
    elif format == "huggingface":
        huggingface.save(lora.merged(obj) if lora.adapted_layers(obj) else obj, path)
    else:
        raise ValueError(f"Unknown preset format {format!r}: save_to_preset writes {list(SAVE_FORMATS)}.")


def save_backbone(backbone, path, format="kzoo"):
    """`save` for a backbone (a `keras.Model` without a `backbone`).

    Example:

    >>> import os, tempfile, kzoo
    >>> save_backbone(kzoo.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                            intermediate_dim=16), path := tempfile.mkdtemp())
    >>> sorted(os.listdir(path))
    ['config.json', 'metadata.json', 'model.weights.h5']
    """
    _save_as("backbone", backbone, path, format)


def save_task(task, path, format="kzoo"):
    """`save` for a task: a `keras.Model` whose `backbone` is a `keras.Model`.

    Example:

    >>> import tempfile, kzoo
    >>> save_task(kzoo.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                        intermediate_dim=16), tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    ValueError: save_task saves a keras.Model with a `backbone` attribute (a keras.Model); got a BertBackbone ...
    """
    _save_as("task", task, path, format)


def save_preprocessor(preprocessor, path, format="kzoo"):
    """`save` for a preprocessor (an object with a `tokenizer`), its tokenizer included.

    Example:

    >>> import os, tempfile, kzoo
    >>> tokenizer = kzoo.BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> save_preprocessor(kzoo.BertPreprocessor(tokenizer, sequence_length=8), path := tempfile.mkdtemp())
    >>> sorted(os.listdir(path))
    ['assets', 'metadata.json', 'preprocessor.json', 'tokenizer.json']
    """
    _save_as("preprocessor", preprocessor, path, format)


def save_tokenizer(tokenizer, path, format="kzoo"):
    """`save` for a tokenizer: its JSON, and its vocabulary as an asset.

    Example:

    >>> import os, tempfile, kzoo
    >>> save_tokenizer(kzoo.BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]), path := tempfile.mkdtemp())
    >>> os.listdir(os.path.join(path, "assets", "tokenizer"))
    ['vocabulary.txt']
    """
    _save_as("tokenizer", tokenizer, path, format)


def _save_as(role, obj, path, format):
    found = directory.role_of(obj)
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


def convert(source, destination, format="kzoo", progress=True):
    """Converts a BERT checkpoint `from_preset` reads, heads and tokenizer included, into a kzoo
    preset or Hugging Face directory, written atomically (what `kzoo convert` runs); returns the
    kzoo model it went through.

    Args:
        source: str or os.PathLike. A checkpoint directory, .zip or handle.
        destination: str or os.PathLike. A new or empty directory.
        format: str. "kzoo" or "huggingface". Defaults to `"kzoo"`.
        progress: bool. Show progress bars over the tensors. Defaults to `True`.

    Example:

    >>> import os, tempfile, kzoo
    >>> kzoo.BertPretrainer(kzoo.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)).save_to_preset(source := tempfile.mkdtemp())
    >>> type(convert(source, exported := tempfile.mkdtemp(), format="huggingface", progress=False)).__name__
    'BertPretrainer'
    >>> sorted(os.listdir(exported))
    ['config.json', 'model.safetensors']
    """
    if format not in SAVE_FORMATS:
        raise ValueError(f"Unknown format {format!r}: kzoo convert writes {list(SAVE_FORMATS)}.")
    atomic.recover(source)
    if checkpoints.detect(source):
        opened = checkpoints.open_source(source)
        model = checkpoints.load_from_source(checkpoints.source_class(opened), opened, progress)
        tokenizer = checkpoints.tokenizer_from(opened, {}) if opened.tokenizer_config is not None else None
    else:  # a kzoo preset directory: its task, or else its backbone
        model = directory.load_directory(keras.Model, source)
        tokenizer_file = os.path.join(os.path.expanduser(source), directory.PART_FILES["tokenizer"])
        tokenizer_class = keras.saving.get_registered_object("kzoo>BertTokenizer")
        tokenizer = directory.load_directory(tokenizer_class, source) if os.path.isfile(tokenizer_file) else None
    if format == "huggingface":
        huggingface.save(model, destination, tokenizer, progress=progress)
    else:  # one write, so a failed conversion leaves no backbone without its tokenizer
        directory.save_directory(model, destination, tokenizer=None if hasattr(model, "backbone") else tokenizer)
    return model


__all__ = ["PresetInfo", "cache_directory", "convert", "detect_format", "get_preset", "list_presets", "load",
           "print_presets", "save", "save_backbone", "save_preprocessor", "save_task", "save_tokenizer",
           "saved_task_config"]
