"""Loading BERT checkpoints of other formats into kzoo objects: the one loop
that reads the weight table forwards.

A format's reader (`kzoo.checkpoints.huggingface`, `.google`, `.keras_hub`)
opens a checkpoint as a `CheckpointSource`; `load_from_source` builds the kzoo
object the caller asked for around its config, and `assign_weights` checks
every tensor's shape against `kzoo.checkpoints.bert_weights`, reads every
array, and only then assigns. `load` is what those formats register with
`kzoo.presets`, so `from_preset(path)` reaches it.
"""

import inspect
import warnings

from tqdm.auto import tqdm

from kzoo.checkpoints import google, huggingface, keras_hub
from kzoo.checkpoints.bert_weights import POOLER, TASKS, Head, encoder_rows, task_for
from kzoo.models import bert as bert_models
from kzoo.models import label_names
from kzoo.presets import detect_format, pop_backbone_kwargs, takes_argument

# The readers of the formats this module loads: `reader(path)` -> a CheckpointSource.
READERS = {
    "huggingface": huggingface.open_huggingface,
    "google": google.open_google,
    "keras_hub": keras_hub.open_keras_hub,
}


def open_source(path, format=None):
    """Opens a checkpoint as a `CheckpointSource`.

    Args:
        path: str or os.PathLike. A checkpoint directory, .zip or `hf://` handle.
        format: str. One of `READERS`. Defaults to `None`: the format
            `kzoo.presets.detect_format` finds.

    Returns:
        A `CheckpointSource`.

    Example:

    >>> import tempfile
    >>> from kzoo import BertBackbone
    >>> path = tempfile.mkdtemp()
    >>> BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...              intermediate_dim=16).save_to_preset(path, format="huggingface")
    >>> open_source(path).shapes["embeddings.word_embeddings.weight"]
    (50, 8)
    """
    format = format or detect_format(path)
    if format not in READERS:
        raise ValueError(
            f"{path!r} is a {format!r} preset, not a BERT checkpoint of another format: "
            f"kzoo converts {list(READERS)}. Load it with `from_preset`."
        )
    return READERS[format](path)


def load(cls, path, /, progress=False, **kwargs):
    """A kzoo BERT object `cls` from a checkpoint in another format: the
    `load` the Hugging Face, google-research and KerasHub formats register
    with `kzoo.presets`, so `cls.from_preset(path)` calls it.

    - `kzoo.BertTokenizer` / a preprocessor: the source's vocabulary and casing.
    - `kzoo.BertBackbone`: the encoder with its weights (the pooler where present).
    - a task: the backbone, the task's heads where the source has them (MLM and
      NSP heads, a Hugging Face `BertForSequenceClassification` classifier, ...;
      freshly initialised otherwise) and the source's tokenizer.

    Every tensor's shape is checked, and every array read, before the first
    weight is assigned.

    Args:
        cls: type. A kzoo BERT class.
        path: str or os.PathLike. A checkpoint directory, .zip or `hf://` handle.
        progress: bool. Show a progress bar over the tensors. Defaults to `False`.
        **kwargs: override the object's config (`dtype` goes to the backbone).

    Returns:
        A `cls`.

    Example (a tiny Hugging Face directory written by kzoo itself):

    >>> import tempfile, numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> path = tempfile.mkdtemp()
    >>> backbone.save_to_preset(path, format="huggingface")
    >>> restored = load(BertBackbone, path)
    >>> bool(np.array_equal(restored.pooled_dense.kernel, backbone.pooled_dense.kernel))
    True
    """
    return load_from_source(cls, open_source(path), progress, **kwargs)


def load_from_source(cls, source, /, progress=False, **kwargs):
    """`load` from an open `CheckpointSource` (see `open_source`), e.g. to
    pick the class with `source_class` first.

    Args:
        cls: type. A kzoo BERT class.
        source: CheckpointSource. The opened checkpoint.
        progress: bool. Show a progress bar over the tensors. Defaults to `False`.
        **kwargs: override the object's config (`dtype` goes to the backbone).

    Returns:
        A `cls`.

    Example:

    >>> import tempfile
    >>> from kzoo import BertBackbone
    >>> path = tempfile.mkdtemp()
    >>> BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...              intermediate_dim=16).save_to_preset(path, format="huggingface")
    >>> source = open_source(path, "huggingface")
    >>> load_from_source(source_class(source), source).num_layers
    1
    """
    if issubclass(cls, bert_models.BertTokenizer):
        return tokenizer_from(source, kwargs)
    task = task_for(cls)
    if task is None and takes_argument(cls, "tokenizer"):  # a preprocessor
        default = _default(cls, "sequence_length")
        length = min(default, (source.backbone_config or {}).get("max_sequence_length", default))
        return cls(tokenizer_from(source, {}), **{"sequence_length": length, **kwargs})
    if task is None:
        raise ValueError(
            f"{source.location!r} is a BERT checkpoint ({source.format}); kzoo loads it as a "
            f"BertBackbone, BertTokenizer, a BERT preprocessor or a BERT task, not a {cls.__name__}."
        )
    name, task = task
    if name == "BertBackbone":
        model = cls(**{**_config(source), **kwargs})
        backbone = model
    else:
        backbone = bert_models.BertBackbone(**_config(source), **pop_backbone_kwargs(kwargs))
        model = _task(cls, task, backbone, source, kwargs)
    assign_weights(model, _rows_to_load(model, name, task, backbone, source), source, progress)
    return model


def source_class(source):
    """The kzoo class that holds everything in `source`: the first BERT task
    whose heads it has (a `BertForPreTraining` checkpoint gives
    `kzoo.BertPretrainer`), else `kzoo.BertBackbone`.

    Args:
        source: CheckpointSource. The opened checkpoint.

    Returns:
        A kzoo BERT class.

    Example:

    >>> import tempfile
    >>> from kzoo import BertBackbone, BertMaskedLM
    >>> path = tempfile.mkdtemp()
    >>> BertMaskedLM(BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)).save_to_preset(path, format="huggingface")
    >>> source_class(open_source(path, "huggingface")).__name__
    'BertMaskedLM'
    """
    name = next(
        (name for name, task in TASKS.items() if task.heads and all(map(source.has_head, task.heads))),
        "BertBackbone",
    )
    return getattr(bert_models, name)


def _task(cls, task, backbone, source, kwargs):
    """The task model around `backbone`, with the source's head sizes and tokenizer."""
    if any(source.has_head(head) for head in task.heads):
        kwargs = {**_head_arguments(cls, source.head_config, kwargs), **kwargs}
    part = next((p for p in ("preprocessor", "tokenizer") if takes_argument(cls, p)), None)
    if part and part not in kwargs and source.tokenizer_config is not None:
        kwargs[part] = tokenizer_from(source, {})
    return cls(backbone=backbone, **kwargs)


def _head_arguments(cls, fixed, kwargs):
    """The source's head arguments (`source.head_config`) that `cls` takes,
    less those `kwargs` replace: label names given replace the source's names
    and its number of labels, and a `num_classes` other than the source's
    drops its names (the head's shape is then checked against the weights)."""
    fixed = {k: v for k, v in fixed.items() if takes_argument(cls, k)}
    renamed = any(k in kwargs for k in label_names.ARGUMENTS)
    if renamed or kwargs.get("num_classes", fixed.get("num_classes")) != fixed.get("num_classes"):
        dropped = label_names.ARGUMENTS + (("num_classes",) if renamed else ())
        fixed = {k: v for k, v in fixed.items() if k not in dropped}
    return fixed


def _rows_to_load(model, name, task, backbone, source):
    """The table rows of `model` that `source` holds, missing pieces reported."""
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
            f"use, or load a checkpoint that has {them} "
            f"(a Hugging Face {task.hf_architecture}).",
            UserWarning,
            stacklevel=4,
        )
    return rows


def assign_weights(model, rows, source, progress=False):
    """The conversion loop: every row's shape checked, every array read, then
    every variable assigned (so a bad checkpoint leaves `model` untouched).

    A shape mismatch raises a `ValueError` naming the tensor, the expected and
    the found shape; a damaged file raises one from `source.read`.

    Args:
        model: keras.Model. The kzoo model to fill.
        rows: tuple of Row. The table rows to read (`model`'s variables).
        source: CheckpointSource. The opened checkpoint.
        progress: bool. Show a progress bar over the tensors. Defaults to `False`.

    Example:

    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> from kzoo.checkpoints.source import CheckpointSource
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> source = CheckpointSource("huggingface", "example", None, None,
    ...     shapes={"pooler.dense.weight": (8, 8), "pooler.dense.bias": (4,)},
    ...     read=lambda name: np.ones((8, 8), "float32"))
    >>> assign_weights(backbone, POOLER, source)
    Traceback (most recent call last):
    ...
    ValueError: The checkpoint 'example' does not match the model its config describes (1 tensor(s)):
      pooler.dense.bias: expected shape (8,), found (4,) (kzoo's pooled_dense/bias)
    Was its config edited, ...
    """
    variables = {variable.path: variable for variable in model.weights}
    plan, problems = [], []
    for row in rows:
        variable, name = variables[row.kzoo], row.name(source.format)
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
    """A `kzoo.BertTokenizer` with the source's vocabulary and casing,
    `overrides` applied; unknown casing warns and assumes uncased.

    Args:
        source: CheckpointSource. The opened checkpoint.
        overrides: dict. `kzoo.BertTokenizer` arguments to replace.

    Returns:
        A `kzoo.BertTokenizer`.

    Example:

    >>> from kzoo.checkpoints.source import CheckpointSource
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
            "for a cased model.",
            UserWarning,
            stacklevel=4,
        )
        config["lowercase"] = True
    return bert_models.BertTokenizer(**config)


def _config(source):
    if source.backbone_config is None:
        raise ValueError(
            f"{source.location!r} holds a tokenizer only (no model config.json): load it with "
            "kzoo.BertTokenizer.from_preset, or pass a directory with the model."
        )
    return source.backbone_config


def _default(cls, name):
    return inspect.signature(cls.__init__).parameters[name].default
