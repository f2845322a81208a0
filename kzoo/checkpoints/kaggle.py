"""`kaggle://` handles: KerasHub presets on Kaggle Models, fetched with `kagglehub`.

`kaggle://<owner>/<model>/<framework>/<variation>/<version>` (KerasHub's
own BERT presets are `kaggle://keras/bert/keras/<preset>/<version>`, e.g.
`kaggle://keras/bert/keras/bert_tiny_en_uncased/2`) is downloaded once with
`kagglehub.model_download` into kagglehub's cache (`$KAGGLEHUB_CACHE`, else
`~/.cache/kagglehub`, read at each call) and read as the KerasHub preset
directory it is (`kzoo.checkpoints.keras_hub`). kagglehub comes with
KerasHub: `pip install "kzoo[keras-hub]"`.

Offline first, as for built-in names (`kzoo.presets.sources`): a versioned
handle that kagglehub's cache holds completely loads without the network,
whether it was downloaded whole (`kagglehub.model_download(handle)`, what
kzoo does) or file by file (what KerasHub's own `from_preset` does). With
nothing cached and no network, the `ValueError` names the handle, the cache
and the ways out, before anything is built. A handle without a version (as
KerasHub accepts) asks Kaggle for the latest version each time: offline it
cannot be resolved, and the error names the versions the cache holds.
"""

import importlib
import os

from kzoo.presets.sources import unavailable_error

KAGGLE_PREFIX = "kaggle://"
# A KerasHub BERT preset's files that kzoo reads: a version KerasHub cached
# file by file is complete when kagglehub marks each of them complete.
PRESET_FILES = (
    "config.json", "model.weights.h5", "tokenizer.json", os.path.join("assets", "tokenizer", "vocabulary.txt"),
)
EXAMPLE = "kaggle://keras/bert/keras/bert_tiny_en_uncased/2"


def is_handle(path):
    """Whether `path` is a `kaggle://` handle.

    Args:
        path: str or os.PathLike. What `from_preset` was given.

    Returns:
        True for a str starting with `kaggle://`.

    Example:

    >>> is_handle("kaggle://keras/bert/keras/bert_tiny_en_uncased/2"), is_handle("bert_tiny")
    (True, False)
    """
    return isinstance(path, str) and path.startswith(KAGGLE_PREFIX)


def parse_handle(handle):
    """The parts of a `kaggle://` model handle, checked as KerasHub and
    kagglehub check them: four parts and an optional positive version.

    Args:
        handle: str. `kaggle://owner/model/framework/variation[/version]`.

    Returns:
        A tuple `(owner/model/framework/variation, version)`, the version an
        int or None.

    Example:

    >>> parse_handle("kaggle://keras/bert/keras/bert_tiny_en_uncased/2")
    ('keras/bert/keras/bert_tiny_en_uncased', 2)
    >>> parse_handle("kaggle://keras/bert")
    Traceback (most recent call last):
    ...
    ValueError: 'kaggle://keras/bert' is not a Kaggle model handle: write kaggle://<owner>/<model>/<framework>/<variation>/<version>, e.g. kaggle://keras/bert/keras/bert_tiny_en_uncased/2 (the version may be left out: the latest, which needs the network).
    """
    parts = handle[len(KAGGLE_PREFIX):].strip("/").split("/")
    version = parts[4] if len(parts) == 5 else None
    if len(parts) not in (4, 5) or not all(parts) or not (version is None or (version.isdigit() and int(version) > 0)):
        raise ValueError(
            f"{handle!r} is not a Kaggle model handle: write kaggle://<owner>/<model>/<framework>/"
            f"<variation>/<version>, e.g. {EXAMPLE} (the version may be left out: the latest, which "
            "needs the network)."
        )
    return "/".join(parts[:4]), None if version is None else int(version)


def kagglehub_cache():
    """kagglehub's cache directory: `$KAGGLEHUB_CACHE`, else
    `~/.cache/kagglehub` (read at each call, as kagglehub reads it).

    Returns:
        A str.

    Example:

    >>> import os
    >>> os.environ["KAGGLEHUB_CACHE"] = "/tmp/kagglehub-example"
    >>> kagglehub_cache()
    '/tmp/kagglehub-example'
    >>> del os.environ["KAGGLEHUB_CACHE"]
    """
    return _kagglehub("config").get_cache_folder()


def download(handle):
    """The local directory of a `kaggle://` handle: kagglehub's cached copy
    when complete (no network), else downloaded with `kagglehub.model_download`.

    Args:
        handle: str. `kaggle://owner/model/framework/variation[/version]`.

    Returns:
        The directory, as a str.

    Raises:
        ValueError: a malformed handle, or one neither cached nor
            downloadable; the message names the cache and the ways out.
        ImportError: kagglehub is not installed.

    Example (a preset in kagglehub's cache, as a download leaves it):

    >>> import os, tempfile, keras_hub
    >>> os.environ["KAGGLEHUB_CACHE"] = cache = tempfile.mkdtemp()
    >>> folder = os.path.join(cache, "models", "me", "bert", "keras", "tiny")
    >>> keras_hub.models.BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16).save_to_preset(os.path.join(folder, "1"))
    >>> open(os.path.join(folder, "1.complete"), "w").close()  # kagglehub's mark of a complete download
    >>> download("kaggle://me/bert/keras/tiny/1") == os.path.join(folder, "1")  # no network
    True
    >>> del os.environ["KAGGLEHUB_CACHE"]
    """
    model, version = parse_handle(handle)
    kagglehub = _kagglehub()
    try:
        if version is not None and _cached_layout(model, version) == "files":  # as KerasHub left them
            paths = [kagglehub.model_download(f"{model}/{version}", name) for name in PRESET_FILES]
            return os.path.dirname(paths[0])
        # The whole version: from the cache when complete there, else downloaded once.
        return kagglehub.model_download(model if version is None else f"{model}/{version}")
    except Exception as error:  # no network, unknown handle, a gated model: the message names the cause
        reason = f"the download failed ({type(error).__name__}: {str(error)[:200]})"
        raise _unavailable(handle, model, version, reason) from error


def cached_versions(model):
    """The versions of `model` that kagglehub's cache holds completely.

    Args:
        model: str. `owner/model/framework/variation`.

    Returns:
        A sorted list of int.

    Example:

    >>> import tempfile, os
    >>> os.environ["KAGGLEHUB_CACHE"] = tempfile.mkdtemp()
    >>> cached_versions("keras/bert/keras/bert_tiny_en_uncased")
    []
    >>> del os.environ["KAGGLEHUB_CACHE"]
    """
    folder = os.path.join(kagglehub_cache(), "models", *model.split("/"))
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted(int(n) for n in names if n.isdigit() and int(n) > 0 and _cached_layout(model, int(n)) is not None)


def _cached_layout(model, version):
    """How kagglehub's cache holds `model/version` completely: "bundle" (the
    whole version, as `model_download(handle)` leaves it), "files" (each of
    `PRESET_FILES`, as KerasHub's `from_preset` leaves them) or None (not
    completely). Asks kagglehub's own cache code, never the network."""
    cache_module, handle_module = _kagglehub("cache"), _kagglehub("handle")
    try:
        cache, parsed = cache_module.Cache(), handle_module.parse_model_handle(f"{model}/{version}")
        if cache.load_from_cache(parsed):
            return "bundle"
        return "files" if all(cache.load_from_cache(parsed, name) for name in PRESET_FILES) else None
    except Exception:  # another kagglehub's cache API: let model_download look
        return None


def _unavailable(handle, model, version, reason):
    """The error for a handle that is neither cached nor downloadable."""
    cache = kagglehub_cache()
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
    if version is None:
        cached = cached_versions(model)
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
