"""Hugging Face BERT directories read and written (`config.json`, `model.safetensors`
or `pytorch_model.bin`, `vocab.txt` / `tokenizer.json`), and `hf://owner/name` handles;
tensor names are the weight table's, less task classes' `bert.` prefix."""

import json
import os
import pickle
import re

import keras
import safetensors
import safetensors.numpy
from tqdm.auto import tqdm

from kzoo import atomic
from kzoo.checkpoints import sentence_transformers
from kzoo.checkpoints.bert_config import EXPORTED_ACTIVATIONS, FIELDS, backbone_config
from kzoo.checkpoints.bert_weights import POOLER, CheckpointSource, encoder_rows, task_for

HF_PREFIX = "hf://"
CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
PYTORCH_FILE = "pytorch_model.bin"
VOCABULARY_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# The files kzoo reads of a Hugging Face BERT directory, less pytorch_model.bin.
HF_FILES = (CONFIG_FILE, SAFETENSORS_FILE, VOCABULARY_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE,
            sentence_transformers.MODULES_FILE, sentence_transformers.SETTINGS_FILE, sentence_transformers.CONFIG_FILE,
            "1_Pooling/*")
DOWNLOADED = (*HF_FILES, PYTORCH_FILE)  # for an `hf://` handle


def read_json(path):
    """A checkpoint's JSON file; a `ValueError` says which file is damaged."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        raise ValueError(f"Cannot read {path!r} as JSON ({error}). Copy the checkpoint again.") from error


def local_path(path):
    """`path` expanded, or None when it is no path (a model object, ...)."""
    return os.path.expanduser(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else None


def main_json(path):
    """The first of `config.json`, `tokenizer.json` in directory `path`: `{}` if damaged, None if neither."""
    directory = local_path(path)
    if directory is None or not os.path.isdir(directory):
        return None
    for name in (CONFIG_FILE, TOKENIZER_FILE):
        if os.path.isfile(os.path.join(directory, name)):
            try:
                config = read_json(os.path.join(directory, name))
            except ValueError:
                return {}
            return config if isinstance(config, dict) else {}
    return None


def unavailable_error(subject, cache, reason, ways_out):
    """The `ValueError` for files neither (completely) cached nor downloadable, with the `ways_out`."""
    return ValueError(
        f"{subject}, which is not (completely) in {cache} and cannot be downloaded: {reason}. Ways out:\n"
        + ";\n".join(f"  - {way}" for way in ways_out) + "."
    )


def detect(path):
    """Whether `path` is an `hf://` handle, or a directory with a `config.json` with a `model_type` (a
    `tokenizer.json` with a `model`), or with only `vocab.txt`."""
    if isinstance(path, str) and path.startswith(HF_PREFIX):
        return True
    config = main_json(path)
    if config is None:
        directory = local_path(path)
        return directory is not None and os.path.isfile(os.path.join(directory, VOCABULARY_FILE))
    return "model_type" in config or "model" in config


def _download(handle):
    """The local directory of `hf://owner/name`, fetched with `huggingface_hub`."""
    repository = handle[len(HF_PREFIX):].strip("/")
    if not repository:
        raise ValueError(
            f"{handle!r} names no repository: write hf://owner/name, e.g. hf://google-bert/bert-base-uncased."
        )
    import huggingface_hub  # noqa: PLC0415 (imported when a handle needs it)
    try:
        return huggingface_hub.snapshot_download(repository, allow_patterns=list(DOWNLOADED))
    except Exception as error:  # offline, unknown repository, gated model, ...
        raise ValueError(
            f"Could not download {handle!r} from the Hugging Face Hub ({type(error).__name__}: "
            f"{str(error)[:300]}). Check the network and the repository name (and HF_TOKEN for a "
            "gated model), or download it yourself and pass the directory."
        ) from error


def open_checkpoint(path):
    """Opens a Hugging Face BERT directory or `hf://` handle as a `CheckpointSource`."""
    is_handle = isinstance(path, str) and path.startswith(HF_PREFIX)
    directory = _download(path) if is_handle else os.path.expanduser(os.fspath(path))
    config_path = os.path.join(directory, CONFIG_FILE)
    config = read_json(config_path) if os.path.isfile(config_path) else None
    shapes, read = ({}, None) if config is None else _weights(directory)
    return CheckpointSource(
        format="huggingface", location=str(path),
        backbone_config=None if config is None else backbone_config(config, config_path),
        tokenizer_config=tokenizer_config(directory),
        shapes=shapes, read=read,
        architectures=tuple((config or {}).get("architectures") or ()),
        head_config={**_head_config(config or {}), **sentence_transformers.read(directory),
                     **sentence_transformers.cross_encoder_activation(directory, config or {})},
    )


def _head_config(config):
    """`num_classes`, and the label names as `class_names` and `tags` unless all are `LABEL_i`."""
    labels = config.get("id2label")
    if not labels:
        return {}
    names = [labels[key] for key in sorted(labels, key=int)]
    named = any(name != f"LABEL_{i}" for i, name in enumerate(names))
    return {"num_classes": len(names), **({"class_names": names, "tags": names} if named else {})}


def tokenizer_config(directory):
    """`kzoo.BertTokenizer` arguments from `vocab.txt` / `tokenizer.json` and
    `tokenizer_config.json`, or None without a vocabulary."""
    config_path = os.path.join(directory, TOKENIZER_CONFIG_FILE)
    settings = read_json(config_path) if os.path.isfile(config_path) else {}
    fast_path = os.path.join(directory, TOKENIZER_FILE)
    fast = read_json(fast_path) if os.path.isfile(fast_path) else {}
    normalizer = fast.get("normalizer") or {}
    vocabulary = os.path.join(directory, VOCABULARY_FILE)
    if not os.path.isfile(vocabulary):
        pieces = (fast.get("model") or {}).get("vocab")
        if not isinstance(pieces, dict):
            return None
        vocabulary = sorted(pieces, key=pieces.get)
        if [pieces[token] for token in vocabulary] != list(range(len(vocabulary))):
            raise ValueError(f"{fast_path!r} has a vocabulary with gaps or repeated ids. Copy it again.")
    return {"vocabulary": vocabulary, "lowercase": settings.get("do_lower_case", normalizer.get("lowercase", True)),
            "strip_accents": settings.get("strip_accents", normalizer.get("strip_accents")),
            "unknown_token": settings.get("unk_token", "[UNK]")}


def _normalized(name):
    """A tensor name as the weight table writes it."""
    name = name[len("bert."):] if name.startswith("bert.") else name
    return name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")


def _weights(directory):
    """(shapes, read) for model.safetensors or else pytorch_model.bin."""
    for name, reader in ((SAFETENSORS_FILE, _safetensors), (PYTORCH_FILE, _pytorch)):
        if os.path.isfile(os.path.join(directory, name)):
            return reader(os.path.join(directory, name))
    raise ValueError(
        f"{directory!r} has a config.json but no weights: kzoo reads {SAFETENSORS_FILE} or "
        f"{PYTORCH_FILE} (sharded checkpoints are not supported). Download the weights file too."
    )


def _safetensors(path):
    """(shapes, read) of a safetensors file, its header checked against its length first."""
    size = os.path.getsize(path)
    truncated = f"{path!r} is truncated or corrupt (an interrupted download or copy?): download it again."
    with open(path, "rb") as f:
        prefix = f.read(8)
        header_size = int.from_bytes(prefix, "little") if len(prefix) == 8 else size
        if 8 + header_size > size:
            raise ValueError(f"{truncated} Its header says {header_size} bytes, the file has {size}.")
        try:
            header = json.loads(f.read(header_size))
        except ValueError as error:
            raise ValueError(f"{truncated} Its header is not JSON ({error}).") from error
    header.pop("__metadata__", None)
    end = max((entry["data_offsets"][1] for entry in header.values()), default=0)
    if 8 + header_size + end != size:
        raise ValueError(f"{truncated} Its header describes {8 + header_size + end} bytes, the file has {size}.")
    names = {_normalized(name): name for name in header}

    def read(name):
        with safetensors.safe_open(path, framework="np") as f:
            return f.get_tensor(names[name])

    return {name: tuple(header[original]["shape"]) for name, original in names.items()}, read


def _pytorch(path):
    """pytorch_model.bin through `torch.load(weights_only=True)`: no code runs."""
    try:
        import torch  # noqa: PLC0415 (optional and heavy: only pytorch_model.bin files need it)
    except ImportError as error:
        raise ValueError(
            f"{path!r} is a PyTorch file: reading it needs torch (pip install torch). Or convert "
            "the checkpoint to model.safetensors where torch is installed."
        ) from error
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # refused code, truncated zip archives, unpickling errors
        found = isinstance(error, pickle.UnpicklingError) and re.search(
            r"GLOBAL (\S+)|allowlisted via `add_safe_globals`(?: but got|, but got) (.+?)$", str(error), re.M
        )
        if found:
            raise ValueError(
                f"Refused to read {path!r} as unsafe: besides tensors, its pickle calls or builds "
                f"{(found.group(1) or found.group(2)).rstrip('.')}, which could run code, so nothing in it "
                "was run. If you trust where the file comes from, convert it to model.safetensors, e.g. with "
                "transformers: `transformers.AutoModel.from_pretrained(d).save_pretrained(d, "
                "safe_serialization=True)` for its directory d (then delete pytorch_model.bin), and load the "
                "directory again."
            ) from error
        raise ValueError(
            f"Cannot read {path!r} ({type(error).__name__}: {str(error)[:200]}): it is truncated "
            "or corrupt (an interrupted download or copy?). Download it again."
        ) from error
    arrays = {_normalized(name): t.float().numpy() for name, t in state.items() if t.is_floating_point()}
    return {name: tuple(array.shape) for name, array in arrays.items()}, arrays.__getitem__


def save(model, path, tokenizer=None, progress=False):
    """Writes a `kzoo.BertBackbone` or BERT task `model` (and `tokenizer`, else its own) as a Hugging Face
    directory `transformers` loads with the class of the same heads (`BertForPreTraining`, ...)."""
    found = task_for(type(model))
    if found is None:
        raise ValueError(
            f"Hugging Face export writes BERT models (BertBackbone and the BERT tasks); got a "
            f"{type(model).__name__}. Save it with save_to_preset(path) (format='kzoo')."
        )
    if any(layer.quantization_mode for layer in model._flatten_layers()):
        raise ValueError(
            f"This {type(model).__name__} is quantized to int8, which Hugging Face's BERT checkpoints do "
            "not hold. Export the float model (e.g. reload it from the preset it was quantized from) and "
            "quantize after loading."
        )
    name, task = found
    backbone = model if name == "BertBackbone" else model.backbone
    preprocessor = getattr(model, "preprocessor", None)
    tokenizer = tokenizer or getattr(model, "tokenizer", None) or getattr(preprocessor, "tokenizer", None)
    variables = {variable.path: variable for variable in model.weights}
    prefix = "" if name == "BertBackbone" else "bert."  # Hugging Face's base_model_prefix
    # Hugging Face's BertModel has the pooler even where no loss of the task reaches it (an embedder).
    pooler = task.uses_pooler or task.hf_architecture == "BertModel"
    rows = [(prefix, row) for row in encoder_rows(backbone.num_layers) + (POOLER if pooler else ())]
    rows += [("", row) for head in task.heads for row in head.rows]
    tensors = {
        prefix + row.huggingface: row.layout.from_kzoo(
            keras.ops.convert_to_numpy(variables[row.kzoo]).astype("float32"), "huggingface"
        )
        for prefix, row in tqdm(rows, desc="Writing tensors", unit="tensor", disable=not progress)
    }
    directory = os.path.expanduser(os.fspath(path))
    ours = {CONFIG_FILE, SAFETENSORS_FILE, VOCABULARY_FILE, TOKENIZER_CONFIG_FILE, *sentence_transformers.WRITTEN}
    foreign = sorted(set(os.listdir(directory)) - ours) if os.path.isdir(directory) else []
    if os.path.exists(directory) and not os.path.isdir(directory) or foreign:
        raise ValueError(
            f"Refusing to write a Hugging Face checkpoint to {directory!r}: it is a file or holds "
            f"{foreign[:5]}. Export into a new or empty directory."
        )
    files = {CONFIG_FILE: _config_from(model, backbone, task, tokenizer)}
    if name == "BertReranker":  # CrossEncoder's activation, not a regression's problem_type
        del files[CONFIG_FILE]["problem_type"]
        files[CONFIG_FILE]["sentence_transformers"] = sentence_transformers.cross_encoder_config(model)
    if tokenizer is not None:
        files[TOKENIZER_CONFIG_FILE] = {
            "tokenizer_class": "BertTokenizer", "do_lower_case": tokenizer.lowercase,
            "strip_accents": tokenizer.strip_accents, "tokenize_chinese_chars": True,
            "unk_token": tokenizer.unknown_token, "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]",
            "mask_token": "[MASK]", "model_max_length": backbone.max_sequence_length,
        }
    with atomic.replacing_directory(directory) as scratch:  # an earlier export's tokenizer files are dropped
        for file, content in files.items():
            with open(os.path.join(scratch, file), "w", encoding="utf-8") as f:
                json.dump(content, f, indent=2)
        safetensors.numpy.save_file(tensors, os.path.join(scratch, SAFETENSORS_FILE), metadata={"format": "pt"})
        if tokenizer is not None:
            with open(os.path.join(scratch, VOCABULARY_FILE), "w", encoding="utf-8", newline="\n") as f:
                f.write("".join(token + "\n" for token in tokenizer.get_vocabulary()))
        if name == "BertTextEmbedder":  # so that sentence-transformers loads it as it is
            sentence_transformers.write(model, scratch)


def _config_from(model, backbone, task, tokenizer):
    """The Hugging Face `config.json` of a kzoo model, with `id2label` for one with `num_classes`."""
    config = {
        "architectures": [task.hf_architecture], "model_type": "bert",
        **{field: getattr(backbone, argument) for field, (argument, _, _) in FIELDS.items()},
        "hidden_act": EXPORTED_ACTIVATIONS[backbone.activation], "attention_probs_dropout_prob": backbone.dropout,
        "initializer_range": 0.02, "pad_token_id": tokenizer.pad_token_id if tokenizer is not None else 0,
        "position_embedding_type": "absolute", "dtype": "float32",
    }
    num_classes = getattr(model, "num_classes", None)
    if num_classes is not None:
        names = getattr(model, "class_names", None) or getattr(model, "tags", None)
        names = names or [f"LABEL_{i}" for i in range(num_classes)]  # transformers' defaults
        config["id2label"] = dict(enumerate(names))
        config["label2id"] = {name: i for i, name in enumerate(names)}
        if num_classes == 1:
            config["problem_type"] = "regression"
    return config
