"""google-research/bert releases (a directory or its .zip: `bert_config.json`,
`bert_model.ckpt.*` read with TensorFlow, `vocab.txt`); the casing comes from
the name (`uncased_...`) or `lowercase=`."""

import glob
import os
import re
import tempfile
import zipfile

from kzoo.checkpoints.bert_weights import CheckpointSource
from kzoo.checkpoints.bert_config import backbone_config
from kzoo.checkpoints.huggingface import local_path, read_json

CONFIG_FILE = "bert_config.json"
VOCABULARY_FILE = "vocab.txt"
CHECKPOINT_PREFIX = "bert_model.ckpt"


def detect(path):
    """Whether `path` is a google-research release: a .zip, or a directory with `bert_config.json`."""
    location = local_path(path)
    if location is None:
        return False
    if os.path.isfile(location):
        return location.lower().endswith(".zip") or zipfile.is_zipfile(location)
    return os.path.isfile(os.path.join(location, CONFIG_FILE))


def open_checkpoint(path):
    """Opens a release directory or .zip (unzipped while the source lives) as a `CheckpointSource`."""
    location = os.path.expanduser(os.fspath(path))
    keep_alive = tempfile.TemporaryDirectory(prefix="kzoo-bert-") if os.path.isfile(location) else None
    directory = _unzip(location, keep_alive.name) if keep_alive else location
    # LayerNorm epsilon is fixed in google-research's modeling.py; 16 segment types by default.
    config = {"type_vocab_size": 16, **read_json(os.path.join(directory, CONFIG_FILE)), "model_type": "bert",
              "layer_norm_eps": 1e-12}
    shapes, read = _checkpoint(directory)
    vocabulary = os.path.join(directory, VOCABULARY_FILE)
    return CheckpointSource(
        format="google", location=location,
        backbone_config=backbone_config(config, os.path.join(location, CONFIG_FILE)),
        tokenizer_config={"vocabulary": vocabulary, "lowercase": _lowercase_from_name(location)}
        if os.path.isfile(vocabulary) else None,
        shapes=shapes, read=read,
        head_config={"num_classes": shapes["output_bias"][0]} if "output_bias" in shapes else {},
        keep_alive=keep_alive,
    )


def _lowercase_from_name(path):
    """Whether a release lower-cases its text, from its name (`uncased_...`); None when it says neither."""
    name = os.path.basename(os.path.normpath(path)).lower()
    if "uncased" in name:
        return True
    return False if re.search(r"(^|[^a-z])cased", name) else None


def _unzip(path, target):
    """Extracts a release .zip; returns the folder in it that holds bert_config.json."""
    try:
        with zipfile.ZipFile(path) as archive:
            archive.extractall(target)
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise ValueError(
            f"Cannot extract {path!r} ({error}): the .zip is truncated or corrupt. Download it again."
        ) from error
    found = sorted(glob.glob(os.path.join(target, "**", CONFIG_FILE), recursive=True), key=len)
    if not found:
        raise ValueError(f"{path!r} holds no {CONFIG_FILE}: it is not a google-research BERT release.")
    return os.path.dirname(found[0])


def _checkpoint(directory):
    """(shapes, read) of bert_model.ckpt, else the `checkpoint` file's latest, else the only *.index,
    every data shard checked to be there."""
    import tensorflow as tf  # noqa: PLC0415 (only these checkpoints need it)

    prefix = os.path.join(directory, CHECKPOINT_PREFIX)
    prefix = prefix if os.path.isfile(prefix + ".index") else tf.train.latest_checkpoint(directory)
    if not prefix:
        indexes = glob.glob(os.path.join(directory, "*.index"))
        if len(indexes) != 1:
            raise ValueError(
                f"{directory!r} has {len(indexes)} TensorFlow checkpoints (*.index files) and no "
                f"{CHECKPOINT_PREFIX}.index: keep only the one to load, or add a `checkpoint` file."
            )
        prefix = indexes[0][: -len(".index")]
    shards = glob.glob(glob.escape(prefix) + ".data-*-of-*")
    expected = {int(re.search(r"-of-(\d+)$", shard).group(1)) for shard in shards}
    count = expected.pop() if len(expected) == 1 else None
    missing = [
        f"{prefix}.data-{i:05d}-of-{count:05d}" for i in range(count or 0)
        if not os.path.isfile(f"{prefix}.data-{i:05d}-of-{count:05d}")
    ]
    if not shards or count is None or missing:
        raise ValueError(
            f"The checkpoint {prefix!r} is incomplete: data shard(s) "
            f"{[os.path.basename(m) for m in missing] or os.path.basename(prefix) + '.data-*'} missing. "
            "Copy every bert_model.ckpt.* file (index and data) again."
        )
    damaged = f"The checkpoint {prefix!r} is truncated or corrupt"
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as error:
        raise ValueError(f"{damaged} ({error}). Copy it again.") from error

    def read(name):
        try:
            return reader.get_tensor(name)
        except Exception as error:  # OpError, IndexError ("Read less bytes than requested"), ...
            raise ValueError(f"{damaged}: reading {name!r} failed ({str(error)[:200]}). Copy it again.") from error

    return {name: tuple(shape) for name, shape in reader.get_variable_to_shape_map().items()}, read
