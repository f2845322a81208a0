"""Exporting kzoo BERT models as Hugging Face directories: the weight table
read backwards (the names of `modeling_bert.py`).

`save_huggingface` writes `config.json`, `model.safetensors` and, with a
tokenizer, `vocab.txt` + `tokenizer_config.json`; `transformers` loads the
directory with the class that has the same heads (`BertForPreTraining` for a
`kzoo.BertPretrainer`, ...). It is the "huggingface" format's `export`, so
`save_to_preset(path, format="huggingface")` reaches it through
`kzoo.presets`.
"""

import json
import os

import keras
import safetensors.numpy
from tqdm.auto import tqdm

from kzoo.checkpoints.bert_weights import POOLER, encoder_rows, task_for
from kzoo.checkpoints.huggingface import (
    CONFIG_FILE,
    SAFETENSORS_FILE,
    TOKENIZER_CONFIG_FILE,
    VOCABULARY_FILE,
)
from kzoo.presets import atomic

# kzoo activation -> Hugging Face `hidden_act` (the inverse of `huggingface.ACTIVATIONS`).
EXPORTED_ACTIVATIONS = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu"}


def save_huggingface(model, path, tokenizer=None, progress=False):
    """Writes `model` (a `kzoo.BertBackbone` or BERT task) as a Hugging Face
    directory: `config.json`, `model.safetensors`, and `vocab.txt` +
    `tokenizer_config.json` for its tokenizer (the task's, or `tokenizer`).
    `transformers.BertModel.from_pretrained(path)` loads it, and the class
    with the same heads (`BertForPreTraining` for a `kzoo.BertPretrainer`, ...)
    loads the heads too.

    Args:
        model: keras.Model. A `kzoo.BertBackbone` or a kzoo BERT task.
        path: str or os.PathLike. A new or empty directory, or an earlier export.
        tokenizer: kzoo.BertTokenizer. Written as `vocab.txt`. Defaults to
            `None`: the model's own tokenizer (or its preprocessor's), if any.
        progress: bool. Show a progress bar over the tensors. Defaults to `False`.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> path = tempfile.mkdtemp()
    >>> save_huggingface(backbone, path)
    >>> sorted(os.listdir(path))
    ['config.json', 'model.safetensors']
    """
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
    tokenizer = tokenizer or getattr(model, "tokenizer", None) or getattr(
        getattr(model, "preprocessor", None), "tokenizer", None
    )
    variables = {variable.path: variable for variable in model.weights}
    prefix = "" if name == "BertBackbone" else "bert."  # Hugging Face's base_model_prefix
    rows = [(prefix, row) for row in encoder_rows(backbone.num_layers) + (POOLER if task.uses_pooler else ())]
    rows += [("", row) for head in task.heads for row in head.rows]
    tensors = {
        prefix + row.huggingface: row.layout.from_kzoo(
            keras.ops.convert_to_numpy(variables[row.kzoo]).astype("float32"), "huggingface"
        )
        for prefix, row in tqdm(rows, desc="Writing tensors", unit="tensor", disable=not progress)
    }
    write_directory(path, config_from(model, backbone, task, tokenizer), tensors, tokenizer)


def config_from(model, backbone, task, tokenizer):
    """The Hugging Face `config.json` of a kzoo model (the inverse of
    `huggingface.backbone_config`; BERT's L, H, A as `num_hidden_layers`, ...).

    Args:
        model: keras.Model. The backbone or task exported.
        backbone: kzoo.BertBackbone. Its backbone.
        task: TaskHeads. Its entry of `bert_weights.TASKS`.
        tokenizer: kzoo.BertTokenizer or None. Gives `pad_token_id` (else 0).

    Returns:
        A dict, with `id2label` / `label2id` for a model with `num_classes`:
        its `class_names` (or `tags`), else `LABEL_0`, `LABEL_1`, ...

    Example:

    >>> from kzoo import BertBackbone
    >>> from kzoo.checkpoints.bert_weights import TASKS
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, activation="gelu_approximate")
    >>> config_from(backbone, backbone, TASKS["BertBackbone"], None)["hidden_act"]
    'gelu_new'
    """
    config = {
        "architectures": [task.hf_architecture],
        "model_type": "bert",
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": EXPORTED_ACTIVATIONS[backbone.activation],
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout,
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "layer_norm_eps": backbone.layer_norm_epsilon,
        "initializer_range": 0.02,
        "pad_token_id": tokenizer.pad_token_id if tokenizer is not None else 0,
        "position_embedding_type": "absolute",
        "dtype": "float32",
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


def write_directory(path, config, tensors, tokenizer):
    """Writes config.json, model.safetensors and the tokenizer files, after
    checking the directory holds nothing else (as `transformers` reads them):
    beside it, renamed into place once complete (`kzoo.presets.atomic`), so
    an export that fails leaves the previous one as it was.

    Args:
        path: str or os.PathLike. The directory.
        config: dict. The `config.json` contents (see `config_from`).
        tensors: dict. `{Hugging Face tensor name: np.ndarray}`.
        tokenizer: kzoo.BertTokenizer or None. Written as `vocab.txt` and
            `tokenizer_config.json`; an earlier export's are dropped either way.

    Example:

    >>> import os, tempfile, numpy as np
    >>> directory = tempfile.mkdtemp()
    >>> write_directory(directory, {"model_type": "bert"}, {"x": np.zeros(2, "float32")}, None)
    >>> sorted(os.listdir(directory))
    ['config.json', 'model.safetensors']
    """
    directory = os.path.expanduser(os.fspath(path))
    ours = {CONFIG_FILE, SAFETENSORS_FILE, VOCABULARY_FILE, TOKENIZER_CONFIG_FILE}
    foreign = sorted(set(os.listdir(directory)) - ours) if os.path.isdir(directory) else []
    if os.path.exists(directory) and not os.path.isdir(directory) or foreign:
        raise ValueError(
            f"Refusing to write a Hugging Face checkpoint to {directory!r}: it is a file or holds "
            f"{foreign[:5]}. Export into a new or empty directory."
        )
    with atomic.replacing_directory(directory) as scratch:  # stale tokenizer files are not carried over
        with open(os.path.join(scratch, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
        safetensors.numpy.save_file(tensors, os.path.join(scratch, SAFETENSORS_FILE), metadata={"format": "pt"})
        if tokenizer is not None:
            _write_tokenizer(tokenizer, scratch, config["max_position_embeddings"])


def _write_tokenizer(tokenizer, directory, max_length):
    with open(os.path.join(directory, VOCABULARY_FILE), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(token + "\n" for token in tokenizer.get_vocabulary()))
    settings = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": tokenizer.lowercase,
        "strip_accents": tokenizer.strip_accents,
        "tokenize_chinese_chars": True,
        "unk_token": tokenizer.unknown_token,
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
        "model_max_length": max_length,
    }
    with open(os.path.join(directory, TOKENIZER_CONFIG_FILE), "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=2)
