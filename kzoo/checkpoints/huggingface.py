"""Reading Hugging Face BERT directories (the names of `modeling_bert.py`).

A directory holds `config.json` (`model_type: "bert"`), the weights as
`model.safetensors` (read with the `safetensors` library) or
`pytorch_model.bin` (read with `torch.load(weights_only=True)`), and the
tokenizer as `vocab.txt` and/or `tokenizer.json` with `tokenizer_config.json`.
`hf://owner/name` handles are downloaded with `huggingface_hub`.

Tensor names are those of the table in `kzoo.checkpoints.bert_weights`
without the `bert.` prefix that task classes add; old checkpoints'
`LayerNorm.gamma`/`beta` are read as `weight`/`bias`. Writing is
`kzoo.checkpoints.huggingface_export`.
"""

import json
import os
import pickle
import re

import safetensors

from kzoo.checkpoints.source import CheckpointSource, local_path, main_json, read_json

HF_PREFIX = "hf://"
CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
PYTORCH_FILE = "pytorch_model.bin"
VOCABULARY_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SUPPORTED_MODEL_TYPES = ("bert",)
# Files fetched for an `hf://` handle: a Hugging Face, KerasHub or kzoo preset.
DOWNLOADED = (
    CONFIG_FILE, SAFETENSORS_FILE, PYTORCH_FILE, VOCABULARY_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE,
    "model.weights.h5", "task.json", "task.weights.h5", "preprocessor.json", "metadata.json", "assets/*",
)
# Hugging Face `hidden_act` -> kzoo activation. "gelu" is the exact erf GELU;
# "gelu_new", "gelu_fast" and "gelu_pytorch_tanh" are the tanh approximation.
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "relu": "relu",
}


def detect(path):
    """Whether `path` is a Hugging Face BERT checkpoint: an `hf://` handle, or
    a directory whose `config.json` has a `model_type` (or whose
    `tokenizer.json` has a `model`), or that holds only `vocab.txt`.

    Args:
        path: str or os.PathLike. What `from_preset` was given.

    Returns:
        True for a Hugging Face checkpoint.

    Example:

    >>> import tempfile
    >>> detect("hf://google-bert/bert-base-uncased"), detect(tempfile.mkdtemp())
    (True, False)
    """
    if isinstance(path, str) and path.startswith(HF_PREFIX):
        return True
    config = main_json(path)
    if config is None:
        directory = local_path(path)
        return directory is not None and os.path.isfile(os.path.join(directory, VOCABULARY_FILE))
    return "model_type" in config or "model" in config


def download(handle):
    """The local directory of `hf://owner/name`, fetched with `huggingface_hub`.

    Args:
        handle: str. `hf://owner/name`.

    Returns:
        The directory `huggingface_hub` downloaded the files into.

    Example:

    >>> download("hf://")
    Traceback (most recent call last):
    ...
    ValueError: 'hf://' names no repository: write hf://owner/name, e.g. hf://google-bert/bert-base-uncased.
    """
    repository = handle[len(HF_PREFIX):].strip("/")
    if not repository:
        raise ValueError(
            f"{handle!r} names no repository: write hf://owner/name, e.g. hf://google-bert/bert-base-uncased."
        )
    import huggingface_hub  # noqa: PLC0415 (a kzoo dependency, imported when a handle needs it)

    try:
        return huggingface_hub.snapshot_download(repository, allow_patterns=list(DOWNLOADED))
    except Exception as error:  # offline, unknown repository, gated model, ...
        raise ValueError(
            f"Could not download {handle!r} from the Hugging Face Hub ({type(error).__name__}: "
            f"{str(error)[:300]}). Check the network and the repository name (and HF_TOKEN for a "
            "gated model), or download it yourself and pass the directory."
        ) from error


def open_huggingface(path):
    """Opens a Hugging Face BERT directory or `hf://` handle.

    Args:
        path: str or os.PathLike. The directory, or `hf://owner/name`.

    Returns:
        A `CheckpointSource` of format "huggingface".

    Example:

    >>> import tempfile
    >>> from kzoo import BertBackbone
    >>> path = tempfile.mkdtemp()
    >>> BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...              intermediate_dim=16).save_to_preset(path, format="huggingface")
    >>> source = open_huggingface(path)
    >>> source.backbone_config["num_layers"], source.shapes["pooler.dense.weight"]
    (1, (8, 8))
    """
    location = path
    directory = download(path) if isinstance(path, str) and path.startswith(HF_PREFIX) else (
        os.path.expanduser(os.fspath(path))
    )
    config_path = os.path.join(directory, CONFIG_FILE)
    config = read_json(config_path) if os.path.isfile(config_path) else None
    shapes, read = ({}, None) if config is None else _weights(directory)
    return CheckpointSource(
        format="huggingface",
        location=str(location),
        backbone_config=None if config is None else backbone_config(config, config_path),
        tokenizer_config=tokenizer_config(directory),
        shapes=shapes,
        read=read,
        architectures=tuple((config or {}).get("architectures") or ()),
        head_config=_head_config(config or {}),
    )


def backbone_config(config, location):
    """`kzoo.BertBackbone` arguments from a Hugging Face `BertConfig` dict
    (defaults as `transformers.BertConfig`), every field mapped exactly.

    Args:
        config: dict. The contents of `config.json`.
        location: str. The file, for error messages.

    Returns:
        A dict of `kzoo.BertBackbone` arguments.

    Example:

    >>> backbone_config({"model_type": "bert", "vocab_size": 99, "hidden_act": "gelu_new"}, "x")["activation"]
    'gelu_approximate'
    >>> backbone_config({"model_type": "roberta"}, "x")
    Traceback (most recent call last):
    ...
    ValueError: x has model_type 'roberta': kzoo loads Hugging Face checkpoints with model_type in ['bert'].
    """
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"{location} has model_type {model_type!r}: kzoo loads Hugging Face checkpoints with "
            f"model_type in {list(SUPPORTED_MODEL_TYPES)}."
        )
    activation = config.get("hidden_act", "gelu")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{location} has hidden_act {activation!r}; kzoo's BERT supports {sorted(ACTIVATIONS)}."
        )
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute" or config.get("is_decoder"):
        raise ValueError(
            f"{location} is a BERT variant kzoo does not build (position_embedding_type="
            f"{position_type!r}, is_decoder={config.get('is_decoder', False)}); kzoo's BERT is "
            "the paper's encoder with absolute learned positions."
        )
    return {
        "vocabulary_size": config["vocab_size"],
        "num_layers": config.get("num_hidden_layers", 12),
        "num_heads": config.get("num_attention_heads", 12),
        "hidden_dim": config.get("hidden_size", 768),
        "intermediate_dim": config.get("intermediate_size", 3072),
        "dropout": config.get("hidden_dropout_prob", 0.1),
        "max_sequence_length": config.get("max_position_embeddings", 512),
        "num_segments": config.get("type_vocab_size", 2),
        "activation": ACTIVATIONS[activation],
        "layer_norm_epsilon": config.get("layer_norm_eps", 1e-12),
    }


def _head_config(config):
    """Task arguments a fine-tuned checkpoint fixes: its number of labels and
    their names from `id2label` (none when they are all transformers'
    `LABEL_i`), as `class_names` and as `tags`: a task takes the one it has."""
    labels = config.get("id2label")
    if not labels:
        return {}
    names = [labels[key] for key in sorted(labels, key=int)]
    named = any(name != f"LABEL_{i}" for i, name in enumerate(names))
    return {"num_classes": len(names), **({"class_names": names, "tags": names} if named else {})}


def tokenizer_config(directory):
    """`kzoo.BertTokenizer` arguments from `vocab.txt` / `tokenizer.json` and
    `tokenizer_config.json` (`do_lower_case`, `strip_accents`), or None.

    Args:
        directory: str. The checkpoint directory.

    Returns:
        A dict of `kzoo.BertTokenizer` arguments, or None without a vocabulary.

    Example:

    >>> import json, os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> with open(os.path.join(directory, "tokenizer.json"), "w") as f:
    ...     json.dump({"normalizer": {"type": "BertNormalizer", "lowercase": False},
    ...                "model": {"vocab": {"[PAD]": 0, "[UNK]": 1, "hi": 2}}}, f)
    >>> config = tokenizer_config(directory)
    >>> config["vocabulary"], config["lowercase"]
    (['[PAD]', '[UNK]', 'hi'], False)
    """
    settings = {}
    config_path = os.path.join(directory, TOKENIZER_CONFIG_FILE)
    if os.path.isfile(config_path):
        settings = read_json(config_path)
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
    lowercase = settings.get("do_lower_case", normalizer.get("lowercase", True))
    return {
        "vocabulary": vocabulary,
        "lowercase": lowercase,
        "strip_accents": settings.get("strip_accents", normalizer.get("strip_accents")),
        "unknown_token": settings.get("unk_token", "[UNK]"),
    }


def _normalized(name):
    """A tensor name as the table in `kzoo.checkpoints.bert_weights` writes it."""
    name = name[len("bert."):] if name.startswith("bert.") else name
    if "LayerNorm." in name:
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    return name


def _weights(directory):
    """(shapes, read) for model.safetensors or else pytorch_model.bin."""
    safetensors_path = os.path.join(directory, SAFETENSORS_FILE)
    pytorch_path = os.path.join(directory, PYTORCH_FILE)
    if os.path.isfile(safetensors_path):
        return _safetensors(safetensors_path)
    if os.path.isfile(pytorch_path):
        return _pytorch(pytorch_path)
    raise ValueError(
        f"{directory!r} has a config.json but no weights: kzoo reads {SAFETENSORS_FILE} or "
        f"{PYTORCH_FILE} (sharded checkpoints are not supported). Download the weights file too."
    )


def _safetensors(path):
    """The header checked against the file's length (a truncated download is
    caught here, before any tensor is read), then the tensors by name."""
    header = _safetensors_header(path)
    names = {_normalized(name): name for name in header if name != "__metadata__"}
    shapes = {name: tuple(header[original]["shape"]) for name, original in names.items()}

    def read(name):
        with safetensors.safe_open(path, framework="np") as f:
            return f.get_tensor(names[name])

    return shapes, read


def _safetensors_header(path):
    size = os.path.getsize(path)
    truncated = (
        f"{path!r} is truncated or corrupt (an interrupted download or copy?): download it again."
    )
    with open(path, "rb") as f:
        prefix = f.read(8)
        header_size = int.from_bytes(prefix, "little") if len(prefix) == 8 else size
        if 8 + header_size > size:
            raise ValueError(f"{truncated} Its header says {header_size} bytes, the file has {size}.")
        try:
            header = json.loads(f.read(header_size))
        except ValueError as error:
            raise ValueError(f"{truncated} Its header is not JSON ({error}).") from error
    end = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0)
    if 8 + header_size + end != size:
        raise ValueError(f"{truncated} Its header describes {8 + header_size + end} bytes, the file has {size}.")
    return header


def _pytorch(path):
    """pytorch_model.bin through `torch.load(weights_only=True)` (no code runs)."""
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
        refused = _refused_global(error)
        if refused is not None:
            raise ValueError(
                f"Refused to read {path!r} as unsafe: besides tensors, its pickle calls or builds "
                f"{refused}, which could run code, so nothing in it was run. If you trust where the "
                "file comes from, convert it to model.safetensors, e.g. with transformers: "
                "`transformers.AutoModel.from_pretrained(d).save_pretrained(d, safe_serialization=True)` "
                "for its directory d (then delete pytorch_model.bin), and load the directory again."
            ) from error
        raise ValueError(
            f"Cannot read {path!r} ({type(error).__name__}: {str(error)[:200]}): it is truncated "
            "or corrupt (an interrupted download or copy?). Download it again."
        ) from error
    arrays = {_normalized(name): tensor.float().numpy() for name, tensor in state.items() if tensor.is_floating_point()}
    return {name: tuple(array.shape) for name, array in arrays.items()}, arrays.__getitem__


def _refused_global(error):
    """What `torch.load(weights_only=True)` refused to call or build (e.g.
    "posix.system"), or None when `error` is not such a refusal (a damaged file)."""
    if not isinstance(error, pickle.UnpicklingError):
        return None
    found = re.search(r"GLOBAL (\S+)|allowlisted via `add_safe_globals`(?: but got|, but got) (.+?)$", str(error), re.M)
    return None if found is None else (found.group(1) or found.group(2)).rstrip(".")
