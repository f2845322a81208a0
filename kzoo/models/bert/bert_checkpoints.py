"""BERT checkpoints in other formats: the conversion table and its loop (BERT sec. 3, Appendix A).

Released BERT parameters come in three formats besides kzoo's own preset
directories. Each is read by its own small module into a `CheckpointSource`
(a kzoo `BertBackbone` config, a tokenizer config, and named arrays):

| format          | files                                                        | module                          |
|-----------------|--------------------------------------------------------------|---------------------------------|
| `"huggingface"` | `config.json` (`model_type: bert`), `model.safetensors` or   | `kzoo.checkpoints.huggingface`  |
|                 | `pytorch_model.bin`, `vocab.txt` and/or `tokenizer.json`     |                                 |
| `"google"`      | `bert_config.json`, `bert_model.ckpt.*`, `vocab.txt` (or .zip)| `kzoo.checkpoints.google`       |
| `"keras_hub"`   | KerasHub's `config.json` + `model.weights.h5` + tokenizer    | `kzoo.checkpoints.keras_hub`    |

The table below (`EMBEDDINGS`, `ENCODER_LAYER`, `POOLER` and the heads in
`TASKS`) names every kzoo variable in each format, with the `Layout` rule that
turns the source's array into kzoo's; `assign_weights` is the one loop that
checks every shape, reads every array, and only then assigns. The same table,
read backwards, writes Hugging Face directories (`save_huggingface`).
"""

import dataclasses
import inspect
import json
import os
import warnings
import zipfile

import keras
import numpy as np
from tqdm.auto import tqdm

from kzoo.preset_directories import pop_backbone_kwargs, takes_argument

FORMATS = ("huggingface", "google", "keras_hub")
EXPORT_FORMATS = ("kzoo", "huggingface")
HF_PREFIX = "hf://"


# === Layouts: how a kzoo variable is stored elsewhere ===


def _same(shape):
    return shape


def _merge_heads_out(shape):
    """(H, A, H/A) -> (H, H) for the Q/K/V kernels; (A, H/A) -> (H,) for their biases."""
    return shape[:-2] + (shape[-2] * shape[-1],)


def _merge_heads_in(shape):
    """(A, H/A, H) -> (H, H): the attention output kernel."""
    return (shape[0] * shape[1],) + shape[2:]


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a source stores a kzoo variable: `matrix_shape` maps kzoo's shape to
    the TensorFlow-style `(in, out)` matrix (attention heads merged), and
    `transposed_in` lists the formats that store that matrix as `(out, in)`
    (PyTorch's `nn.Linear`; google-research's `output_weights`). KerasHub
    stores kzoo's own shapes.

    >>> HEADS_KERNEL.source_shape((32, 2, 16), "huggingface")
    (32, 32)
    >>> OUTPUT_WEIGHTS.source_shape((32, 2), "google")
    (2, 32)
    """

    matrix_shape: object = _same
    transposed_in: frozenset = frozenset()

    def source_shape(self, shape, format):
        """The shape a `format` file holds for a kzoo variable of `shape`."""
        if format == "keras_hub":
            return tuple(shape)
        matrix = self.matrix_shape(tuple(shape))
        return matrix[::-1] if format in self.transposed_in else matrix

    def to_kzoo(self, array, shape, format):
        """The source's `array` as kzoo's variable value of `shape`."""
        return np.reshape(array.T if format in self.transposed_in else array, shape)

    def from_kzoo(self, value, format):
        """kzoo's `value` as a `format` file stores it."""
        matrix = np.reshape(value, self.matrix_shape(tuple(value.shape)))
        return np.ascontiguousarray(matrix.T if format in self.transposed_in else matrix)


TORCH = frozenset({"huggingface"})
VECTOR = Layout()  # embeddings, biases, LayerNorm gamma/beta: stored alike everywhere
KERNEL = Layout(transposed_in=TORCH)  # a Dense kernel (in, out); nn.Linear stores (out, in)
HEADS_KERNEL = Layout(_merge_heads_out, TORCH)  # Q/K/V kernels (H, A, H/A)
HEADS_BIAS = Layout(_merge_heads_out)  # Q/K/V biases (A, H/A)
HEADS_OUTPUT = Layout(_merge_heads_in, TORCH)  # attention output kernel (A, H/A, H)
OUTPUT_WEIGHTS = Layout(transposed_in=frozenset({"huggingface", "google"}))  # heads' `output_weights` (out, in)


# === The table ===


@dataclasses.dataclass(frozen=True)
class Row:
    """One tensor of the table: its kzoo variable path, its name in each format
    (None where a format has no such tensor), and its layout. `{i}` stands for
    the encoder layer (BERT sec. 3).

    >>> POOLER[0].name("google")
    'bert/pooler/dense/kernel'
    """

    kzoo: str
    huggingface: str
    google: str
    keras_hub: str
    layout: Layout

    def name(self, format):
        return getattr(self, format)


DENSE = {"kernel": KERNEL, "bias": VECTOR}
LAYER_NORM = {"gamma": VECTOR, "beta": VECTOR}
_HUGGINGFACE_PARAMETER = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}


def _layer(kzoo, huggingface, google, keras_hub, **layouts):
    """The rows of one layer's parameters (`**DENSE`, `**LAYER_NORM`, or their
    layouts by name): kzoo, google-research and KerasHub name them alike
    (`.../kernel`, `.../gamma`), Hugging Face as PyTorch does (`....weight`).
    `google` / `keras_hub` None: the format has no such layer.

    >>> [row.huggingface for row in _layer("pooled_dense", "pooler.dense", None, None, **DENSE)]
    ['pooler.dense.weight', 'pooler.dense.bias']
    """
    return tuple(
        Row(f"{kzoo}/{name}", f"{huggingface}.{_HUGGINGFACE_PARAMETER[name]}",
            None if google is None else f"{google}/{name}",
            None if keras_hub is None else f"{keras_hub}/{name}", layout)
        for name, layout in layouts.items()
    )


EMBEDDINGS = (
    Row("token_embedding/embeddings", "embeddings.word_embeddings.weight",
        "bert/embeddings/word_embeddings", "token_embedding/embeddings", VECTOR),
    Row("position_embedding/embeddings", "embeddings.position_embeddings.weight",
        "bert/embeddings/position_embeddings", "position_embedding/embeddings", VECTOR),
    Row("segment_embedding/embeddings", "embeddings.token_type_embeddings.weight",
        "bert/embeddings/token_type_embeddings", "segment_embedding/embeddings", VECTOR),
    *_layer("embeddings_layer_norm", "embeddings.LayerNorm", "bert/embeddings/LayerNorm",
            "embeddings_layer_norm", **LAYER_NORM),
)


def _encoder_layer_rows():
    """Rows of one encoder layer (sec. 3: self-attention, then the GELU feed-forward)."""
    kzoo, hf, google, hub = (
        "transformer_layer_{i}/", "encoder.layer.{i}.", "bert/encoder/layer_{i}/", "transformer_layer_{i}/"
    )
    rows = ()
    for part in ("query", "key", "value"):
        rows += _layer(f"{kzoo}self_attention/{part}", f"{hf}attention.self.{part}",
                       f"{google}attention/self/{part}", f"{hub}self_attention_layer/{part}",
                       kernel=HEADS_KERNEL, bias=HEADS_BIAS)
    return rows + (
        *_layer(f"{kzoo}self_attention/attention_output", f"{hf}attention.output.dense",
                f"{google}attention/output/dense", f"{hub}self_attention_layer/attention_output",
                kernel=HEADS_OUTPUT, bias=VECTOR),
        *_layer(f"{kzoo}self_attention_layer_norm", f"{hf}attention.output.LayerNorm",
                f"{google}attention/output/LayerNorm", f"{hub}self_attention_layer_norm", **LAYER_NORM),
        *_layer(f"{kzoo}feed_forward/intermediate_dense", f"{hf}intermediate.dense",
                f"{google}intermediate/dense", f"{hub}feedforward_intermediate_dense", **DENSE),
        *_layer(f"{kzoo}feed_forward/output_dense", f"{hf}output.dense",
                f"{google}output/dense", f"{hub}feedforward_output_dense", **DENSE),
        *_layer(f"{kzoo}feed_forward_layer_norm", f"{hf}output.LayerNorm",
                f"{google}output/LayerNorm", f"{hub}feedforward_layer_norm", **LAYER_NORM),
    )


ENCODER_LAYER = _encoder_layer_rows()
# tanh(W C + b) on the final [CLS] state (sec. 3, NSP and classification)
POOLER = _layer("pooled_dense", "pooler.dense", "bert/pooler/dense", "pooled_dense", **DENSE)
MASKED_LM_HEAD = (  # sec. 3.1 Task #1; the output projection is the tied word embedding
    *_layer("mlm_head/transform_dense", "cls.predictions.transform.dense",
            "cls/predictions/transform/dense", None, **DENSE),
    *_layer("mlm_head/transform_layer_norm", "cls.predictions.transform.LayerNorm",
            "cls/predictions/transform/LayerNorm", None, **LAYER_NORM),
    Row("mlm_head/bias", "cls.predictions.bias", "cls/predictions/output_bias", None, VECTOR),
)
NEXT_SENTENCE_HEAD = (  # sec. 3.1 Task #2 (NSP)
    Row("next_sentence_dense/kernel", "cls.seq_relationship.weight",
        "cls/seq_relationship/output_weights", None, OUTPUT_WEIGHTS),
    Row("next_sentence_dense/bias", "cls.seq_relationship.bias", "cls/seq_relationship/output_bias", None, VECTOR),
)


def _dense_head(kzoo, huggingface, google=None):
    """A fine-tuning head (sec. 4, Figure 4): one Dense layer; google-research's
    `run_classifier.py` / `run_squad.py` call it `output_weights`, `output_bias`."""
    return (
        Row(f"{kzoo}/kernel", f"{huggingface}.weight",
            None if google is None else f"{google}output_weights", None, OUTPUT_WEIGHTS),
        Row(f"{kzoo}/bias", f"{huggingface}.bias",
            None if google is None else f"{google}output_bias", None, VECTOR),
    )


@dataclasses.dataclass(frozen=True)
class Head:
    """A task head's rows. `hf_architecture`: the Hugging Face class that must
    have written it (`classifier` is the name of three different heads);
    `pretrained`: part of pre-training (sec. 3.1), so expected in a pre-trained
    checkpoint (a missing one is reported).

    >>> MLM.pretrained, MLM.rows[-1].google
    (True, 'cls/predictions/output_bias')
    """

    rows: tuple
    hf_architecture: str = None
    pretrained: bool = False


MLM = Head(MASKED_LM_HEAD, pretrained=True)
NSP = Head(NEXT_SENTENCE_HEAD, pretrained=True)


@dataclasses.dataclass(frozen=True)
class Task:
    """What a kzoo class holds beyond the encoder: its heads, the Hugging Face
    class with the same heads, and whether it uses the pooler (BERT sec. 3.2, Figure 4).

    >>> TASKS["BertQuestionAnswerer"].uses_pooler
    False
    """

    heads: tuple
    hf_architecture: str
    uses_pooler: bool = True


TASKS = {
    "BertBackbone": Task((), "BertModel"),
    "BertFeatureExtractor": Task((), "BertModel"),
    "BertPretrainer": Task((MLM, NSP), "BertForPreTraining"),
    "BertMaskedLM": Task((MLM,), "BertForMaskedLM", uses_pooler=False),
    "BertClassifier": Task(
        (Head(_dense_head("logits", "classifier", ""), "BertForSequenceClassification"),),
        "BertForSequenceClassification",
    ),
    "BertTokenClassifier": Task(
        (Head(_dense_head("logits", "classifier"), "BertForTokenClassification"),),
        "BertForTokenClassification", uses_pooler=False,
    ),
    "BertQuestionAnswerer": Task(
        (Head(_dense_head("span_logits", "qa_outputs", "cls/squad/")),),
        "BertForQuestionAnswering", uses_pooler=False,
    ),
    "BertMultipleChoice": Task(
        (Head(_dense_head("choice_score", "classifier"), "BertForMultipleChoice"),),
        "BertForMultipleChoice",
    ),
}


def encoder_rows(num_layers):
    """The rows of BERT's encoder (sec. 3): embeddings, then every layer.

    >>> rows = encoder_rows(2)
    >>> len(rows), rows[-1].huggingface
    (37, 'encoder.layer.1.output.LayerNorm.bias')
    """
    layers = tuple(
        dataclasses.replace(row, **{
            field: getattr(row, field).format(i=i) for field in ("kzoo", "huggingface", "google", "keras_hub")
        })
        for i in range(num_layers)
        for row in ENCODER_LAYER
    )
    return EMBEDDINGS + layers


def task_for(cls):
    """`(name, Task)` for a kzoo BERT class or a subclass; None for other classes.

    >>> from kzoo import BertClassifier
    >>> task_for(BertClassifier)[1].hf_architecture
    'BertForSequenceClassification'
    """
    return next(((c.__name__, TASKS[c.__name__]) for c in cls.__mro__ if c.__name__ in TASKS), None)


# === Sources ===


@dataclasses.dataclass
class CheckpointSource:
    """A checkpoint opened by a format module: what kzoo needs from it.

    Attributes:
        format: one of `FORMATS`.
        location: the path (or handle) it was opened from, for messages.
        backbone_config: `kzoo.BertBackbone` arguments (sec. 3: L, H, A, ...),
            or None for a tokenizer-only directory.
        tokenizer_config: `kzoo.BertTokenizer` arguments (`vocabulary`,
            `lowercase`, ...; `lowercase=None` when the source does not say),
            or None without a vocabulary.
        shapes: `{source tensor name: shape}`, read without loading the arrays.
        read: `read(name)` -> the array (a `ValueError` for a damaged file).
        architectures: the Hugging Face classes that wrote it (their heads).
        head_config: task arguments the source fixes (`num_classes`, `tags`).
        keep_alive: files the source needs while it is read (an unzipped copy).
    """

    format: str
    location: str
    backbone_config: dict
    tokenizer_config: dict
    shapes: dict
    read: object
    architectures: tuple = ()
    head_config: dict = dataclasses.field(default_factory=dict)
    keep_alive: object = None

    def has_head(self, head):
        """Whether the checkpoint holds `head`: its tensors, written by the right class."""
        name = head.rows[0].name(self.format)
        written_by = self.format != "huggingface" or head.hf_architecture is None or (
            head.hf_architecture in self.architectures
        )
        return name is not None and name in self.shapes and written_by


def read_json(path):
    """A checkpoint's JSON file; a `ValueError` says which file is damaged.

    >>> read_json("/nonexistent/config.json")
    Traceback (most recent call last):
    ...
    ValueError: Cannot read '/nonexistent/config.json' as JSON ([Errno 2] No such file or directory: '/nonexistent/config.json'). Copy the checkpoint again.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        raise ValueError(f"Cannot read {path!r} as JSON ({error}). Copy the checkpoint again.") from error


def detect_format(path):
    """The format of a checkpoint path: one of `FORMATS`, "kzoo" for a kzoo
    preset directory, or None when `path` is neither a directory nor a .zip.

    Example:

    >>> import tempfile
    >>> from kzoo import BertBackbone
    >>> path = tempfile.mkdtemp()
    >>> BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...              intermediate_dim=16).save_to_preset(path)
    >>> detect_format(path), detect_format("hf://google-bert/bert-base-uncased")
    ('kzoo', 'huggingface')
    """
    if isinstance(path, str) and path.startswith(HF_PREFIX):
        return "huggingface"
    if not isinstance(path, (str, os.PathLike)):
        return None
    path = os.path.expanduser(os.fspath(path))
    if os.path.isfile(path) and (path.lower().endswith(".zip") or zipfile.is_zipfile(path)):
        return "google"
    if not os.path.isdir(path):
        return None
    if os.path.isfile(os.path.join(path, "bert_config.json")):
        return "google"
    for name in ("config.json", "tokenizer.json"):
        if os.path.isfile(os.path.join(path, name)):
            try:
                config = read_json(os.path.join(path, name))
            except ValueError:  # damaged: kzoo's loader reports it in its own words
                return "kzoo"
            if not isinstance(config, dict):
                return "kzoo"
            if "model_type" in config or "model" in config:  # HF model config / tokenizers file
                return "huggingface"
            owner = str(config.get("registered_name") or config.get("module") or "")
            return "keras_hub" if owner.startswith("keras_hub") else "kzoo"
    return "huggingface" if os.path.isfile(os.path.join(path, "vocab.txt")) else "kzoo"


def open_source(path, format):
    """Opens a checkpoint of `format` (see `detect_format`) as a `CheckpointSource` (BERT sec. 3).

    >>> import tempfile
    >>> from kzoo import BertBackbone
    >>> path = tempfile.mkdtemp()
    >>> save_huggingface(BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                               hidden_dim=8, intermediate_dim=16), path)
    >>> open_source(path, "huggingface").shapes["embeddings.word_embeddings.weight"]
    (50, 8)
    """
    from kzoo.checkpoints import google, huggingface, keras_hub  # noqa: PLC0415 (each imports optional readers)

    opener = {
        "huggingface": huggingface.open_huggingface,
        "google": google.open_google,
        "keras_hub": keras_hub.open_keras_hub,
    }[format]
    return opener(path)


# === Loading ===


def load(cls, path, /, progress=False, **kwargs):
    """A kzoo BERT object `cls` from a checkpoint in another format (BERT sec.
    3.2: fine-tuning starts from the pre-trained parameters); the body of
    `from_preset` for such paths, through `kzoo.presets.from_preset_for`.

    - `kzoo.BertTokenizer` / a preprocessor: the source's vocabulary and casing.
    - `kzoo.BertBackbone`: the encoder with its weights (the pooler where present).
    - a task: the backbone, the task's heads where the source has them (MLM and
      NSP heads, a Hugging Face `BertForSequenceClassification` classifier, ...;
      freshly initialised otherwise) and the source's tokenizer.

    `kwargs` override the object's config (`dtype` goes to the backbone);
    `progress` shows a progress bar over the tensors. Every tensor's shape is
    checked, and every array read, before the first weight is assigned.

    Example (a tiny Hugging Face directory written by kzoo itself):

    >>> import tempfile, numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> path = tempfile.mkdtemp()
    >>> save_huggingface(backbone, path)
    >>> restored = load(BertBackbone, path)
    >>> bool(np.array_equal(restored.pooled_dense.kernel, backbone.pooled_dense.kernel))
    True
    """
    return load_from_source(cls, open_source(path, detect_format(path)), progress, **kwargs)


def load_from_source(cls, source, /, progress=False, **kwargs):
    """`load` from an open `CheckpointSource` (see `open_source`), e.g. to
    pick the class with `source_class` first (BERT sec. 3.2).

    Example:

    >>> import tempfile
    >>> from kzoo import BertBackbone
    >>> path = tempfile.mkdtemp()
    >>> save_huggingface(BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                               hidden_dim=8, intermediate_dim=16), path)
    >>> source = open_source(path, "huggingface")
    >>> load_from_source(source_class(source), source).num_layers
    1
    """
    from kzoo.models.bert.bert_backbone import BertBackbone  # noqa: PLC0415 (imports presets)
    from kzoo.models.bert.bert_tokenizer import BertTokenizer  # noqa: PLC0415

    if issubclass(cls, BertTokenizer):
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
        backbone = BertBackbone(**_config(source), **pop_backbone_kwargs(kwargs))
        model = _task(cls, task, backbone, source, kwargs)
    assign_weights(model, _rows_to_load(model, name, task, backbone, source), source, progress)
    return model


def source_class(source):
    """The kzoo class that holds everything in `source`: the first BERT task
    whose heads it has (a `BertForPreTraining` checkpoint gives
    `kzoo.BertPretrainer`, sec. 3.1), else `kzoo.BertBackbone`.

    >>> import tempfile
    >>> from kzoo import BertBackbone, BertMaskedLM
    >>> path = tempfile.mkdtemp()
    >>> save_huggingface(BertMaskedLM(BertBackbone(vocabulary_size=50, num_layers=1,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16)), path)
    >>> source_class(open_source(path, "huggingface")).__name__
    'BertMaskedLM'
    """
    import kzoo  # noqa: PLC0415 (the public classes)

    name = next(
        (name for name, task in TASKS.items() if task.heads and all(map(source.has_head, task.heads))),
        "BertBackbone",
    )
    return getattr(kzoo, name)


def _task(cls, task, backbone, source, kwargs):
    """The task model around `backbone`, with the source's head sizes and tokenizer."""
    if any(source.has_head(head) for head in task.heads):
        kwargs = {**{k: v for k, v in source.head_config.items() if takes_argument(cls, k)}, **kwargs}
    part = next((p for p in ("preprocessor", "tokenizer") if takes_argument(cls, p)), None)
    if part and part not in kwargs and source.tokenizer_config is not None:
        kwargs[part] = tokenizer_from(source, {})
    return cls(backbone=backbone, **kwargs)


def _rows_to_load(model, name, task, backbone, source):
    """The table rows of `model` that `source` holds, missing pieces reported."""
    rows = encoder_rows(backbone.num_layers)
    missing = []
    if source.has_head(Head(POOLER)):
        rows += POOLER
    elif task.uses_pooler:
        missing.append("the pooler (pooled_output)")
    for head in task.heads:
        if source.has_head(head):
            rows += head.rows
        elif head.pretrained:
            missing.append(f"the {head.rows[0].kzoo.split('/')[0]} head")
    if missing:
        warnings.warn(
            f"{source.location!r} has no {' and no '.join(missing)}: freshly initialised in the "
            f"{name}. Train it before use, or load a checkpoint that has it "
            f"(a Hugging Face {task.hf_architecture}).",
            UserWarning,
            stacklevel=4,
        )
    return rows


def assign_weights(model, rows, source, progress=False):
    """The conversion loop: every row's shape checked, every array read, then
    every variable assigned (so a bad checkpoint leaves `model` untouched).

    A shape mismatch raises a `ValueError` naming the tensor, the expected and
    the found shape; a damaged file raises one from `source.read`. BERT sec. 3.2:
    the pre-trained parameters, exactly.

    >>> import numpy as np
    >>> from kzoo import BertBackbone
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
    """A `kzoo.BertTokenizer` with the source's vocabulary and casing (BERT
    sec. 3), `overrides` applied; unknown casing warns and assumes uncased.

    >>> source = CheckpointSource("google", "bert", None, {"vocabulary": ["[PAD]", "[UNK]",
    ...     "[CLS]", "[SEP]", "[MASK]"], "lowercase": None}, {}, None)
    >>> tokenizer_from(source, {"lowercase": False}).lowercase
    False
    """
    from kzoo.models.bert.bert_tokenizer import BertTokenizer  # noqa: PLC0415

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
    return BertTokenizer(**config)


def _config(source):
    if source.backbone_config is None:
        raise ValueError(
            f"{source.location!r} holds a tokenizer only (no model config.json): load it with "
            "kzoo.BertTokenizer.from_preset, or pass a directory with the model."
        )
    return source.backbone_config


def _default(cls, name):
    return inspect.signature(cls.__init__).parameters[name].default


# === Exporting ===


def save_huggingface(model, path, tokenizer=None, progress=False):
    """Writes `model` (a `kzoo.BertBackbone` or BERT task) as a Hugging Face
    directory: `config.json`, `model.safetensors`, and `vocab.txt` +
    `tokenizer_config.json` for its tokenizer (the task's, or `tokenizer`).
    `transformers.BertModel.from_pretrained(path)` loads it, and the class
    with the same heads (`BertForPreTraining` for a `kzoo.BertPretrainer`, ...)
    loads the heads too (BERT sec. 3, Appendix A). The directory must be new,
    empty, or an earlier export. `progress` shows a progress bar over the tensors.

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
    from kzoo.checkpoints import huggingface as hf  # noqa: PLC0415

    found = task_for(type(model))
    if found is None:
        raise ValueError(
            f"Hugging Face export writes BERT models (BertBackbone and the BERT tasks); got a "
            f"{type(model).__name__}. Save it with save_to_preset(path) (format='kzoo')."
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
    hf.write_directory(path, hf.config_from(model, backbone, task, tokenizer), tensors, tokenizer)
