"""KerasHub BERT preset directories, as `keras_hub.models.BertBackbone.save_to_preset` writes them.

The file layout is the one kzoo's own presets use (`config.json`,
`model.weights.h5`, `tokenizer.json`, `assets/tokenizer/vocabulary.txt`), but
the classes, config fields and variable names are KerasHub's; its
`config.json` names `keras_hub>BertBackbone`. KerasHub's own loader reads the
weights (its `.weights.h5` paths follow its class structure), and
the table in `kzoo.checkpoints.bert_weights` maps its variable paths to kzoo's.
`kaggle://` handles (KerasHub's presets on Kaggle Models) are fetched with
kagglehub into its cache and read as the directory they are
(`kzoo.checkpoints.kaggle`).

Faithful to KerasHub: its encoder uses the tanh-approximate GELU (kzoo's
`"gelu_approximate"`) with LayerNorm epsilon 1e-12, and its uncased tokenizer
lower-cases without stripping accents unless `strip_accents` is saved (pass
`strip_accents=True` to `kzoo.BertTokenizer.from_preset` for the original
BERT's behaviour). KerasHub also case-folds with NFKC, which kzoo does not
reproduce (e.g. "ﬁ" stays one character).
"""

import os

import keras

from kzoo.checkpoints import kaggle
from kzoo.checkpoints.source import CheckpointSource, main_json, read_json

SUPPORTED_BACKBONES = ("keras_hub>BertBackbone",)
SUPPORTED_TOKENIZERS = ("keras_hub>BertTokenizer",)
VOCABULARY_ASSET = os.path.join("assets", "tokenizer", "vocabulary.txt")


def detect(path):
    """Whether `path` is a KerasHub preset: a `kaggle://` handle, or a
    directory whose `config.json` (or `tokenizer.json`) names a `keras_hub` class.

    Args:
        path: str or os.PathLike. What `from_preset` was given.

    Returns:
        True for a KerasHub preset.

    Example:

    >>> import tempfile
    >>> detect(tempfile.mkdtemp()), detect("kaggle://keras/bert/keras/bert_tiny_en_uncased/2")
    (False, True)
    """
    if kaggle.is_handle(path):
        return True
    config = main_json(path) or {}
    return str(config.get("registered_name") or config.get("module") or "").startswith("keras_hub")


def open_keras_hub(path):
    """Opens a KerasHub BERT preset directory or `kaggle://` handle (fetched
    first, or found in kagglehub's cache: see `kzoo.checkpoints.kaggle`).

    Args:
        path: str or os.PathLike. The preset directory, or
            `kaggle://owner/model/framework/variation[/version]`.

    Returns:
        A `CheckpointSource` of format "keras_hub".

    Example:

    >>> import tempfile, warnings, keras_hub
    >>> path = tempfile.mkdtemp()
    >>> keras_hub.models.BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
    ...     hidden_dim=8, intermediate_dim=16, max_sequence_length=16).save_to_preset(path)
    >>> source = open_keras_hub(path)
    >>> source.backbone_config["activation"], source.shapes["transformer_layer_0/self_attention_layer/query/kernel"]
    ('gelu_approximate', (8, 2, 4))
    """
    directory = kaggle.download(path) if kaggle.is_handle(path) else os.path.expanduser(os.fspath(path))
    if kaggle.is_handle(path) and not detect(directory):
        raise ValueError(
            f"{path!r} (downloaded to {directory!r}) is not a KerasHub preset: no config.json or "
            "tokenizer.json naming a keras_hub class. kzoo reads KerasHub's BERT presets, e.g. "
            f"{kaggle.EXAMPLE}."
        )
    config_path = os.path.join(directory, "config.json")
    config = read_json(config_path) if os.path.isfile(config_path) else None
    arrays = {} if config is None else _weights(directory, config, config_path)
    return CheckpointSource(
        format="keras_hub",
        location=path if kaggle.is_handle(path) else directory,
        backbone_config=None if config is None else backbone_config(config["config"]),
        tokenizer_config=tokenizer_config(directory),
        shapes={name: tuple(array.shape) for name, array in arrays.items()},
        read=arrays.__getitem__,
    )


def backbone_config(config):
    """`kzoo.BertBackbone` arguments from KerasHub's `BertBackbone` config.

    Args:
        config: dict. The `config` of KerasHub's `config.json`.

    Returns:
        A dict of `kzoo.BertBackbone` arguments.

    Example:

    >>> backbone_config({"vocabulary_size": 30, "num_layers": 1, "num_heads": 2,
    ...     "hidden_dim": 8, "intermediate_dim": 16, "dropout": 0.1,
    ...     "max_sequence_length": 16, "num_segments": 2})["layer_norm_epsilon"]
    1e-12
    """
    fields = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
              "dropout", "max_sequence_length", "num_segments")
    return {
        **{field: config[field] for field in fields},
        "activation": "gelu_approximate",  # keras_hub.src.utils.keras_utils.gelu_approximate
        "layer_norm_epsilon": 1e-12,
    }


def tokenizer_config(directory):
    """`kzoo.BertTokenizer` arguments from KerasHub's `tokenizer.json`, or None
    (KerasHub keeps accents by default).

    Args:
        directory: str. The preset directory.

    Returns:
        A dict of `kzoo.BertTokenizer` arguments, or None without `tokenizer.json`.

    Example:

    >>> import tempfile
    >>> tokenizer_config(tempfile.mkdtemp()) is None
    True
    """
    path = os.path.join(directory, "tokenizer.json")
    if not os.path.isfile(path):
        return None
    saved = read_json(path)
    _check_class(saved, SUPPORTED_TOKENIZERS, path)
    config = saved["config"]
    vocabulary = config.get("vocabulary")
    if not isinstance(vocabulary, list):
        vocabulary = os.path.join(directory, VOCABULARY_ASSET)
    return {
        "vocabulary": vocabulary,
        "lowercase": config.get("lowercase", False),
        "strip_accents": config.get("strip_accents", False),
        "unknown_token": config.get("oov_token", "[UNK]"),
        "suffix_indicator": config.get("suffix_indicator", "##"),
    }


def _weights(directory, config, config_path):
    """{KerasHub variable path: array}, loaded by KerasHub's BertBackbone."""
    _check_class(config, SUPPORTED_BACKBONES, config_path)
    try:
        import keras_hub  # noqa: PLC0415 (an optional dependency, imported only for these presets)
    except ImportError as error:
        raise ImportError(
            f"{directory!r} is a KerasHub preset, which kzoo reads with KerasHub itself: "
            'pip install "kzoo[keras-hub]" (or pip install keras-hub).'
        ) from error

    try:
        backbone = keras_hub.models.BertBackbone.from_preset(directory)
    except Exception as error:  # KerasHub reports damaged files in many ways
        raise ValueError(
            f"KerasHub could not load {directory!r} ({type(error).__name__}: {str(error)[:300]}): "
            "model.weights.h5 is missing, truncated or corrupt. Copy the preset again."
        ) from error
    return {variable.path: keras.ops.convert_to_numpy(variable) for variable in backbone.weights}


def _check_class(saved, supported, path):
    name = saved.get("registered_name") or saved.get("class_name")
    if name not in supported:
        raise ValueError(f"{path!r} holds a KerasHub {name!r}; kzoo reads KerasHub's {list(supported)}.")
