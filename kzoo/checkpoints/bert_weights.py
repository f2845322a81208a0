"""BERT's weight table: each kzoo variable's name in every format and how the format
lays out its array, read forwards by `kzoo.checkpoints`, backwards by `huggingface.save`;
`CheckpointSource`, a checkpoint as a format's reader opens it; and what kzoo classes take (`takes_argument`)."""

import dataclasses
import inspect

import numpy as np


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a format stores a kzoo variable: KerasHub as kzoo; the others as the `matrix_shape`
    matrix (heads merged), transposed in the `transposed_in` formats (`nn.Linear`, `output_weights`)."""

    matrix_shape: object = tuple
    transposed_in: frozenset = frozenset()

    def source_shape(self, shape, format):
        """The shape a `format` file holds for a kzoo variable of `shape`."""
        if format == "keras_hub":
            return tuple(shape)
        matrix = self.matrix_shape(tuple(shape))
        return matrix[::-1] if format in self.transposed_in else matrix

    def to_kzoo(self, array, shape, format):
        """The `format` source's `array` as kzoo's value of `shape`."""
        return np.reshape(array.T if format in self.transposed_in else array, shape)

    def from_kzoo(self, value, format):
        """kzoo's `value` as a `format` file stores it (contiguous)."""
        matrix = np.reshape(value, self.matrix_shape(tuple(value.shape)))
        return np.ascontiguousarray(matrix.T if format in self.transposed_in else matrix)


TORCH = frozenset({"huggingface"})
VECTOR = Layout()  # embeddings, biases, LayerNorm gamma/beta: stored alike everywhere
KERNEL = Layout(transposed_in=TORCH)  # a Dense kernel (in, out); nn.Linear stores (out, in)
HEADS_KERNEL = Layout(lambda shape: shape[:-2] + (shape[-2] * shape[-1],), TORCH)  # Q/K/V (H, A, H/A) -> (H, H)
HEADS_BIAS = Layout(HEADS_KERNEL.matrix_shape)  # Q/K/V biases (A, H/A) -> (H,)
HEADS_OUTPUT = Layout(lambda shape: (shape[0] * shape[1],) + shape[2:], TORCH)  # attention output (A, H/A, H) -> (H, H)
OUTPUT_WEIGHTS = Layout(transposed_in=frozenset({"huggingface", "google"}))  # heads' `output_weights` (out, in)


@dataclasses.dataclass(frozen=True)
class Row:
    """One tensor: its kzoo path and its name in each format, an attribute named after it (None: not
    there); `{i}` is the encoder layer."""

    kzoo: str
    huggingface: str
    google: str
    keras_hub: str
    layout: Layout


DENSE = {"kernel": KERNEL, "bias": VECTOR}
LAYER_NORM = {"gamma": VECTOR, "beta": VECTOR}
_HUGGINGFACE_PARAMETER = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}


def _layer(kzoo, huggingface, google, keras_hub, **layouts):
    """The rows of one layer's parameters (`**layouts` by name): `.../kernel`, but Hugging Face's `....weight`."""
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


# One encoder layer: kzoo, Hugging Face, google-research and KerasHub names after the layer's prefix.
_ENCODER_LAYER = (
    *((f"self_attention/{part}", f"attention.self.{part}", f"attention/self/{part}", f"self_attention_layer/{part}",
       {"kernel": HEADS_KERNEL, "bias": HEADS_BIAS}) for part in ("query", "key", "value")),
    ("self_attention/attention_output", "attention.output.dense", "attention/output/dense",
     "self_attention_layer/attention_output", {"kernel": HEADS_OUTPUT, "bias": VECTOR}),
    ("self_attention_layer_norm", "attention.output.LayerNorm", "attention/output/LayerNorm",
     "self_attention_layer_norm", LAYER_NORM),
    ("feed_forward/intermediate_dense", "intermediate.dense", "intermediate/dense",
     "feedforward_intermediate_dense", DENSE),
    ("feed_forward/output_dense", "output.dense", "output/dense", "feedforward_output_dense", DENSE),
    ("feed_forward_layer_norm", "output.LayerNorm", "output/LayerNorm", "feedforward_layer_norm", LAYER_NORM),
)
ENCODER_LAYER = tuple(
    row for kzoo, hf, google, hub, layouts in _ENCODER_LAYER for row in _layer(
        f"transformer_layer_{{i}}/{kzoo}", f"encoder.layer.{{i}}.{hf}", f"bert/encoder/layer_{{i}}/{google}",
        f"transformer_layer_{{i}}/{hub}", **layouts)
)
# tanh(W C + b) on the final [CLS] state (sec. 3, NSP and classification)
POOLER = _layer("pooled_dense", "pooler.dense", "bert/pooler/dense", "pooled_dense", **DENSE)
MASKED_LM_HEAD = (  # sec. 3.1 Task #1; the output projection is the tied word embedding
    *_layer("mlm_head/transform_dense", "cls.predictions.transform.dense",
            "cls/predictions/transform/dense", None, **DENSE),
    *_layer("mlm_head/transform_layer_norm", "cls.predictions.transform.LayerNorm",
            "cls/predictions/transform/LayerNorm", None, **LAYER_NORM),
    Row("mlm_head/bias", "cls.predictions.bias", "cls/predictions/output_bias", None, VECTOR),
)


def _dense_head(kzoo, huggingface, google=None):
    """One Dense layer as google-research's heads name it (`output_weights`, `output_bias`)."""
    google = (None, None) if google is None else (f"{google}output_weights", f"{google}output_bias")
    return (Row(f"{kzoo}/kernel", f"{huggingface}.weight", google[0], None, OUTPUT_WEIGHTS),
            Row(f"{kzoo}/bias", f"{huggingface}.bias", google[1], None, VECTOR))


NEXT_SENTENCE_HEAD = _dense_head("next_sentence_dense", "cls.seq_relationship", "cls/seq_relationship/")  # sec. 3.1


@dataclasses.dataclass(frozen=True)
class Head:
    """A task head's rows; `hf_architecture`, the Hugging Face class that must have written it
    (`classifier` names three heads), None for any; `pretrained`: a missing one is reported.

    Example:

    >>> MLM.pretrained, MLM.rows[-1].google
    (True, 'cls/predictions/output_bias')
    """

    rows: tuple
    hf_architecture: str = None
    pretrained: bool = False


MLM = Head(MASKED_LM_HEAD, pretrained=True)
NSP = Head(NEXT_SENTENCE_HEAD, pretrained=True)


@dataclasses.dataclass(frozen=True)
class TaskHeads:
    """A kzoo BERT class's heads, the Hugging Face class with the same, and whether it reads the pooler."""

    heads: tuple
    hf_architecture: str
    uses_pooler: bool = True


def _dense_task(architecture, kzoo, huggingface, google=None, uses_pooler=True):
    """A fine-tuning task (sec. 4): one Dense head; `classifier` names three, told apart by their writer."""
    head = Head(_dense_head(kzoo, huggingface, google), architecture if huggingface == "classifier" else None)
    return TaskHeads((head,), architecture, uses_pooler)


TASKS = {
    "BertBackbone": TaskHeads((), "BertModel"),
    "BertFeatureExtractor": TaskHeads((), "BertModel"),
    "BertTextEmbedder": TaskHeads((), "BertModel", uses_pooler=False),
    "BertPretrainer": TaskHeads((MLM, NSP), "BertForPreTraining"),
    "BertMaskedLM": TaskHeads((MLM,), "BertForMaskedLM", uses_pooler=False),
    "BertClassifier": _dense_task("BertForSequenceClassification", "logits", "classifier", ""),
    "BertReranker": _dense_task("BertForSequenceClassification", "logits", "classifier", ""),  # one label
    "BertTokenClassifier": _dense_task("BertForTokenClassification", "logits", "classifier", uses_pooler=False),
    "BertQuestionAnswerer": _dense_task("BertForQuestionAnswering", "span_logits", "qa_outputs", "cls/squad/",
                                        uses_pooler=False),
    "BertMultipleChoice": _dense_task("BertForMultipleChoice", "choice_score", "classifier"),
}


def encoder_rows(num_layers):
    """The rows of a `num_layers`-layer encoder: embeddings, then every layer.

    Example:

    >>> rows = encoder_rows(2)
    >>> len(rows), rows[-1].huggingface
    (37, 'encoder.layer.1.output.LayerNorm.bias')
    """
    names = ("kzoo", "huggingface", "google", "keras_hub")
    return EMBEDDINGS + tuple(dataclasses.replace(row, **{f: getattr(row, f).format(i=i) for f in names})
                              for i in range(num_layers) for row in ENCODER_LAYER)


def task_for(cls):
    """`(name, TaskHeads)` of the first `TASKS` class in `cls.__mro__`, or None.

    Example:

    >>> from kzoo import BertClassifier
    >>> task_for(BertClassifier)[1].hf_architecture
    'BertForSequenceClassification'
    """
    return next(((c.__name__, TASKS[c.__name__]) for c in cls.__mro__ if c.__name__ in TASKS), None)


def takes_argument(cls, name):
    """Whether `cls(...)` takes `name`: a class taking a `backbone` is a task."""
    return name in inspect.signature(cls.__init__).parameters


def tokenizer_argument(cls):
    """The argument `cls` takes its tokenizer by: "preprocessor", "tokenizer" or None."""
    return next((p for p in ("preprocessor", "tokenizer") if takes_argument(cls, p)), None)


def pop_backbone_kwargs(kwargs):
    """Removes and returns the task arguments that go to its backbone: `dtype`, as in KerasHub."""
    return {"dtype": kwargs.pop("dtype")} if "dtype" in kwargs else {}


@dataclasses.dataclass
class CheckpointSource:
    """A checkpoint as a format's reader opens it: `format` ("huggingface", "google", "keras_hub"),
    `location` (for messages), `backbone_config` and `tokenizer_config` (kzoo arguments; None for
    none, `lowercase=None` if unknown), `shapes` (`{name: shape}`), `read(name)` (an array),
    `architectures` (the Hugging Face classes that wrote it), `head_config` (task arguments it
    fixes: `num_classes`, label names) and `keep_alive` (files it needs: an unzipped copy)."""

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
        """Whether it holds `head`'s first tensor, written by the right Hugging Face class."""
        name = getattr(head.rows[0], self.format)
        written_by = self.format != "huggingface" or head.hf_architecture in (None, *self.architectures)
        return name is not None and name in self.shapes and written_by
