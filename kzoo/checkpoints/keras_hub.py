"""KerasHub BERT presets (read by KerasHub itself), and `kaggle://` handles fetched with
kagglehub, offline first: a version its cache holds completely needs no network.
KerasHub's NFKC case-folding is not reproduced."""

import importlib
import os

import keras

from kzoo.checkpoints.bert_weights import CheckpointSource
from kzoo.checkpoints.huggingface import main_json, read_json, unavailable_error

SUPPORTED_BACKBONES = ("keras_hub>BertBackbone",)
SUPPORTED_TOKENIZERS = ("keras_hub>BertTokenizer",)
VOCABULARY_ASSET = os.path.join("assets", "tokenizer", "vocabulary.txt")
KAGGLE_PREFIX = "kaggle://"
# A KerasHub BERT preset's files that kzoo reads: a version KerasHub cached
# file by file is complete when kagglehub marks each of them complete.
PRESET_FILES = ("config.json", "model.weights.h5", "tokenizer.json", VOCABULARY_ASSET)
EXAMPLE = "kaggle://keras/bert/keras/bert_tiny_en_uncased/2"
BACKBONE_FIELDS = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim", "dropout",
                   "max_sequence_length", "num_segments")  # the same in kzoo.BertBackbone


def detect(path):
    """Whether `path` is a `kaggle://` handle, or a directory whose `config.json` (`tokenizer.json`)
    names a `keras_hub` class."""
    if is_handle(path):
        return True
    config = main_json(path) or {}
    return str(config.get("registered_name") or config.get("module") or "").startswith("keras_hub")


def open_checkpoint(path):
    """Opens a KerasHub BERT preset directory or `kaggle://` handle as a `CheckpointSource`."""
    directory = download(path) if is_handle(path) else os.path.expanduser(os.fspath(path))
    if is_handle(path) and not detect(directory):
        raise ValueError(
            f"{path!r} (downloaded to {directory!r}) is not a KerasHub preset: no config.json or "
            "tokenizer.json naming a keras_hub class. kzoo reads KerasHub's BERT presets, e.g. "
            f"{EXAMPLE}."
        )
    config_path = os.path.join(directory, "config.json")
    config = read_json(config_path) if os.path.isfile(config_path) else None
    arrays = {} if config is None else _weights(directory, config, config_path)
    return CheckpointSource(
        format="keras_hub", location=path if is_handle(path) else directory,
        backbone_config=None if config is None else {  # KerasHub's BERT: the tanh GELU, epsilon 1e-12
            **{field: config["config"][field] for field in BACKBONE_FIELDS},
            "activation": "gelu_approximate", "layer_norm_epsilon": 1e-12},
        tokenizer_config=tokenizer_config(directory),
        shapes={name: tuple(array.shape) for name, array in arrays.items()}, read=arrays.__getitem__,
    )


def tokenizer_config(directory):
    """`kzoo.BertTokenizer` arguments from KerasHub's `tokenizer.json`, or None without one."""
    path = os.path.join(directory, "tokenizer.json")
    if not os.path.isfile(path):
        return None
    saved = read_json(path)
    _check_class(saved, SUPPORTED_TOKENIZERS, path)
    config = saved["config"]
    vocabulary = config.get("vocabulary")
    if not isinstance(vocabulary, list):
        vocabulary = os.path.join(directory, VOCABULARY_ASSET)
    return {"vocabulary": vocabulary, "lowercase": config.get("lowercase", False),
            "strip_accents": config.get("strip_accents", False), "unknown_token": config.get("oov_token", "[UNK]"),
            "suffix_indicator": config.get("suffix_indicator", "##")}


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


def is_handle(path):
    """Whether `path` is a `kaggle://` handle."""
    return isinstance(path, str) and path.startswith(KAGGLE_PREFIX)


def parse_handle(handle):
    """`(owner/model/framework/variation, version or None)` of a `kaggle://` handle, checked."""
    parts = handle[len(KAGGLE_PREFIX):].strip("/").split("/")
    version = parts[4] if len(parts) == 5 else None
    if len(parts) not in (4, 5) or not all(parts) or not (version is None or (version.isdigit() and int(version) > 0)):
        raise ValueError(
            f"{handle!r} is not a Kaggle model handle: write kaggle://<owner>/<model>/<framework>/"
            f"<variation>/<version>, e.g. {EXAMPLE} (the version may be left out: the latest, which "
            "needs the network)."
        )
    return "/".join(parts[:4]), None if version is None else int(version)


def download(handle):
    """The local directory of a `kaggle://` handle: kagglehub's complete cached copy, else downloaded."""
    model, version = parse_handle(handle)
    kagglehub = _kagglehub()
    # A complete cached copy straight from kagglehub's cache code: `model_download` would return the
    # same folder, but works out its user agent first by walking the call stack with
    # `inspect.stack()` six times per call (0.1-0.5 s each, once per file).
    cached = _cached_directory(model, version) if version is not None else None
    if cached is not None:
        return cached
    try:
        # The whole version, downloaded once (or the latest version, which only Kaggle can name).
        return kagglehub.model_download(model if version is None else f"{model}/{version}")
    except Exception as error:  # no network, unknown handle, a gated model: the message names the cause
        reason = f"the download failed ({type(error).__name__}: {str(error)[:200]})"
        raise _unavailable(handle, model, version, reason) from error


def _cached_directory(model, version):
    """The folder of `model/version` when kagglehub's cache holds it completely, asking its cache
    code, not the network: as `model_download(handle)` leaves it (the whole version, one marker)
    or as KerasHub's `from_preset` does (each file of PRESET_FILES marked complete); else None."""
    cache_module, handle_module = _kagglehub("cache"), _kagglehub("handle")
    try:
        cache, parsed = cache_module.Cache(), handle_module.parse_model_handle(f"{model}/{version}")
        bundle = cache.load_from_cache(parsed)
        if bundle:
            return bundle
        files = [cache.load_from_cache(parsed, name) for name in PRESET_FILES]
        return os.path.dirname(files[0]) if all(files) else None
    except Exception:  # noqa: BLE001 (another kagglehub's cache API: let model_download look)
        return None


def _unavailable(handle, model, version, reason):
    """The error for a handle that is neither cached nor downloadable."""
    cache = _kagglehub("config").get_cache_folder()  # as kagglehub reads it now
    folder = os.path.join("models", *model.split("/"))
    versioned = f"{model}/{version}" if version is not None else model
    ways_out = [
        f"on a machine with a network, run `python -c \"import kagglehub; print(kagglehub.model_download("
        f"'{versioned}'))\"`, then copy the folder {folder} of that machine's kagglehub cache (it holds the "
        f"version folder and its <version>.complete marker) to {os.path.join(cache, folder)} here (or point "
        "KAGGLEHUB_CACHE at a copy of that cache)",
        "or put the preset's files (config.json, model.weights.h5, tokenizer.json, assets/) in a directory "
        "and pass that directory to from_preset",
    ]
    if version is None:  # the versions the cache holds completely
        names = os.listdir(os.path.join(cache, folder)) if os.path.isdir(os.path.join(cache, folder)) else []
        cached = sorted(int(n) for n in names if n.isdigit() and int(n) > 0 and _cached_directory(model, int(n)))
        reason = f"it names no version, which only Kaggle can resolve to the latest one; {reason}"
        ways_out.insert(0, "write the version: " + (
            " or ".join(f"{KAGGLE_PREFIX}{model}/{v}" for v in cached) + " (cached here)" if cached
            else f"{KAGGLE_PREFIX}{model}/<version> (none is cached here)"
        ))
    return unavailable_error(f"{handle!r} is a KerasHub preset on Kaggle Models", f"kagglehub's cache ({cache})",
                             reason, ways_out)


def _kagglehub(module=None):
    """kagglehub (or one of its modules), or an `ImportError` saying what to install."""
    try:  # comes with keras-hub, an optional dependency: imported when a handle needs it
        return importlib.import_module("kagglehub" if module is None else f"kagglehub.{module}")
    except ImportError as error:
        raise ImportError(
            f"kaggle:// handles are downloaded with kagglehub, which comes with KerasHub: "
            f'pip install "kzoo[keras-hub]" (or pip install kagglehub). ({error})'
        ) from error
