"""BERT checkpoints of other formats read into kzoo objects (Hugging Face ones also written):
`google` releases, `huggingface` directories and `hf://` handles, `keras_hub` presets and
`kaggle://` handles, each opened as a `bert_weights.CheckpointSource` that `load` reads into the
kzoo class asked for (Keras's registered `kzoo>...` class: this package imports no model).
"""

import inspect
import warnings

import keras
from tqdm.auto import tqdm

from kzoo.checkpoints import bert_weights, google, huggingface, keras_hub
from kzoo.checkpoints.bert_weights import POOLER, TASKS, Head, encoder_rows, task_for

# Detected in this order: a directory with bert_config.json and config.json is google-research's.
FORMATS = {"google": google, "huggingface": huggingface, "keras_hub": keras_hub}
LABEL_ARGUMENTS = ("class_names", "tags")  # the task arguments naming a head's labels


def detect(path):
    """The checkpoint format of `path`, or None (a kzoo preset directory, or no such path).

    Example:

    >>> detect("hf://google-bert/bert-base-uncased")
    'huggingface'
    """
    return next((name for name, module in FORMATS.items() if module.detect(path)), None)


def open_source(path, format=None):
    """Opens a checkpoint of `format` (default: the detected one) as a `CheckpointSource`.

    Example:

    >>> import tempfile, kzoo
    >>> kzoo.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...              intermediate_dim=16).save_to_preset(path := tempfile.mkdtemp(), format="huggingface")
    >>> open_source(path).shapes["embeddings.word_embeddings.weight"]
    (50, 8)
    """
    format = format or detect(path)
    if format not in FORMATS:
        raise ValueError(
            f"{path!r} is not a BERT checkpoint of another format: kzoo converts {list(FORMATS)}. "
            "Load it with `from_preset`."
        )
    return FORMATS[format].open_checkpoint(path)


def load(cls, path, /, progress=False, **kwargs):
    """A kzoo BERT object `cls` from a checkpoint in another format, as `cls.from_preset(path)`:
    its vocabulary and casing, encoder, pooler and the task's heads it has (fresh ones otherwise;
    missing pre-training heads warn), every shape checked before the first weight is assigned.

    Args:
        cls: type. A kzoo BERT class.
        path: str or os.PathLike. A checkpoint directory, .zip or handle.
        progress: bool. Show a progress bar over the tensors. Defaults to `False`.
        **kwargs: override the object's config (`dtype` goes to the backbone).

    Example:

    >>> import tempfile, kzoo
    >>> kzoo.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...              intermediate_dim=16).save_to_preset(path := tempfile.mkdtemp(), format="huggingface")
    >>> load(kzoo.BertBackbone, path).vocabulary_size
    50
    """
    return load_from_source(cls, open_source(path), progress, **kwargs)


def load_from_source(cls, source, /, progress=False, **kwargs):
    """`load` from an opened `CheckpointSource` (e.g. of the class `source_class` picks).

    Example:

    >>> import tempfile, kzoo
    >>> kzoo.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...              intermediate_dim=16).save_to_preset(path := tempfile.mkdtemp(), format="huggingface")
    >>> source = open_source(path, "huggingface")
    >>> load_from_source(source_class(source), source).num_layers
    1
    """
    if any(c.__name__ == "BertTokenizer" for c in cls.__mro__):
        return tokenizer_from(source, kwargs)
    task = task_for(cls)
    if task is None and bert_weights.takes_argument(cls, "tokenizer"):  # a preprocessor
        default = inspect.signature(cls.__init__).parameters["sequence_length"].default
        length = min(default, (source.backbone_config or {}).get("max_sequence_length", default))
        return cls(tokenizer_from(source, {}), **{"sequence_length": length, **kwargs})
    if task is None:
        raise ValueError(
            f"{source.location!r} is a BERT checkpoint ({source.format}); kzoo loads it as a "
            f"BertBackbone, BertTokenizer, a BERT preprocessor or a BERT task, not a {cls.__name__}."
        )
    if source.backbone_config is None:
        raise ValueError(
            f"{source.location!r} holds a tokenizer only (no model config.json): load it with "
            "kzoo.BertTokenizer.from_preset, or pass a directory with the model."
        )
    name, task = task
    if name == "BertBackbone":
        model = backbone = cls(**{**source.backbone_config, **kwargs})
    else:
        backbone = _registered("BertBackbone")(**source.backbone_config, **bert_weights.pop_backbone_kwargs(kwargs))
        if not task.heads or any(source.has_head(head) for head in task.heads):
            kwargs = {**_head_arguments(cls, source.head_config, kwargs), **kwargs}
        if bert_weights.takes_argument(cls, "pooling") and source.head_config.get("unsupported"):
            raise ValueError(
                f"{source.location!r} is a sentence-transformers model with "
                f"{', '.join(source.head_config['unsupported'])}, which kzoo's {cls.__name__} does not "
                "build (it pools the token states, then normalises). Load its encoder with "
                "kzoo.BertBackbone.from_preset and add the rest yourself."
            )
        part = bert_weights.tokenizer_argument(cls)
        if part and part not in kwargs and source.tokenizer_config is not None:
            kwargs[part] = tokenizer_from(source, {})
        model = cls(backbone=backbone, **kwargs)
    assign_weights(model, _rows_to_load(name, task, backbone, source), source, progress)
    length = source.head_config.get("sequence_length")  # sentence-transformers' max_seq_length
    if length and bert_weights.takes_argument(cls, "pooling") and getattr(model, "preprocessor", None) is not None:
        model.set_sequence_length(min(length, backbone.max_sequence_length))
    return model


def source_class(source):
    """The kzoo class holding all of `source`: the first BERT task whose heads it has, else `BertBackbone`.

    Example:

    >>> import tempfile, kzoo
    >>> kzoo.BertMaskedLM(kzoo.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)).save_to_preset(path := tempfile.mkdtemp(), format="huggingface")
    >>> source_class(open_source(path)).__name__
    'BertMaskedLM'
    """
    held = (name for name, task in TASKS.items() if task.heads and all(map(source.has_head, task.heads)))
    return _registered(next(held, "BertBackbone"))


def assign_weights(model, rows, source, progress=False):
    """Fills `model` from `source` through the table `rows`, every shape checked and every
    array read before the first assignment: a bad checkpoint leaves `model` untouched.

    Example:

    >>> from kzoo import BertBackbone
    >>> from kzoo.checkpoints.bert_weights import CheckpointSource
    >>> source = CheckpointSource("huggingface", "example", None, None,
    ...     shapes={"pooler.dense.weight": (8, 8), "pooler.dense.bias": (4,)}, read=None)
    >>> assign_weights(BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                             intermediate_dim=16), POOLER, source)
    Traceback (most recent call last):
    ...
    ValueError: The checkpoint 'example' does not match the model its config describes (1 tensor(s)):
      pooler.dense.bias: expected shape (8,), found (4,) (kzoo's pooled_dense/bias)
    Was its config edited, ...
    """
    variables = {variable.path: variable for variable in model.weights}
    plan, problems = [], []
    for row in rows:
        variable, name = variables[row.kzoo], getattr(row, source.format)
        expected = row.layout.source_shape(tuple(variable.shape), source.format)
        found = source.shapes.get(name)
        if found is None:
            problems.append(f"{name}: missing (expected shape {expected}, for kzoo's {row.kzoo})")
        elif tuple(found) != expected:
            problems.append(f"{name}: expected shape {expected}, found {tuple(found)} (kzoo's {row.kzoo})")
        else:
            plan.append((variable, name, row.layout))
    if problems:
        raise ValueError(
            f"The checkpoint {source.location!r} does not match the model its config describes "
            f"({len(problems)} tensor(s)):\n  " + "\n  ".join(problems[:8])
            + "\nWas its config edited, or a task head size (e.g. num_classes) passed that differs "
            "from the checkpoint's? Load it with its own config and head sizes."
        )
    values = [
        layout.to_kzoo(source.read(name), tuple(variable.shape), source.format)
        for variable, name, layout in tqdm(plan, desc="Reading tensors", unit="tensor", disable=not progress)
    ]
    for (variable, _, _), value in zip(plan, values):
        variable.assign(value.astype(variable.dtype))


def tokenizer_from(source, overrides):
    """A `kzoo.BertTokenizer` of the source's vocabulary and casing (unknown: a warning, uncased), `overrides` applied.

    Example:

    >>> from kzoo.checkpoints.bert_weights import CheckpointSource
    >>> source = CheckpointSource("google", "bert", None, {"vocabulary": ["[PAD]", "[UNK]",
    ...     "[CLS]", "[SEP]", "[MASK]"], "lowercase": None}, {}, None)
    >>> tokenizer_from(source, {"lowercase": False}).lowercase
    False
    """
    if source.tokenizer_config is None:
        raise ValueError(
            f"{source.location!r} has no vocabulary (vocab.txt or tokenizer.json), so no tokenizer "
            "can be built from it. Pass a directory that has one, or build kzoo.BertTokenizer(vocabulary)."
        )
    config = {**source.tokenizer_config, **overrides}
    if config["lowercase"] is None:
        warnings.warn(
            f"Cannot tell whether {source.location!r} is cased or uncased (its name says neither): "
            "assuming uncased, as google-research's --do_lower_case default. Pass lowercase=False "
            "for a cased model.", UserWarning, stacklevel=4,
        )
        config["lowercase"] = True
    return _registered("BertTokenizer")(**config)


def _registered(name):
    return keras.saving.get_registered_object(f"kzoo>{name}")


def _head_arguments(cls, fixed, kwargs):
    """The source's head arguments `cls` takes, less those `kwargs` replace (label names, or `num_classes`)."""
    fixed = {k: v for k, v in fixed.items() if bert_weights.takes_argument(cls, k)}
    renamed = any(k in kwargs for k in LABEL_ARGUMENTS)
    if renamed or kwargs.get("num_classes", fixed.get("num_classes")) != fixed.get("num_classes"):
        dropped = LABEL_ARGUMENTS + (("num_classes",) if renamed else ())
        fixed = {k: v for k, v in fixed.items() if k not in dropped}
    return fixed


def _rows_to_load(name, task, backbone, source):
    """The table rows of the model that `source` holds; missing pre-trained pieces warn."""
    rows = encoder_rows(backbone.num_layers)
    missing = []
    if source.has_head(Head(POOLER)):
        rows += POOLER
    elif task.uses_pooler:
        missing.append("pooler (pooled_output)")
    for head in task.heads:
        if source.has_head(head):
            rows += head.rows
        elif head.pretrained:
            missing.append(f"{head.rows[0].kzoo.split('/')[0]} head")
    if missing:
        listed = " or ".join([", ".join(missing[:-1]), missing[-1]] if len(missing) > 1 else missing)
        them = "them" if len(missing) > 1 else "it"
        warnings.warn(
            f"{source.location!r} has no {listed}: freshly initialised in the {name}. Train {them} before "
            f"use, or load a checkpoint that has {them} (a Hugging Face {task.hf_architecture}).", UserWarning,
            stacklevel=4,
        )
    return rows
