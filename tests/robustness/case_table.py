"""The machinery of the bad-input tables: a case is a name, a
callable on the tiny models, and the outcome an expert expects, either an
error (its type and the key phrases its message must hold) or a valid result.

An expected error must come from kzoo's own code (the raising frame is in the
`kzoo` package: kzoo's words, not a library's), and must leave every model's
weights as they were (raised before any work).
"""

import dataclasses
import functools
import os
import types

import keras
import numpy as np
import pytest

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone

TRANSFORMER_VOCABULARY = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b", "c"]
KZOO_DIR = os.path.dirname(kzoo.__file__)


@dataclasses.dataclass(frozen=True)
class Raises:
    """The case must raise `error` from kzoo's code, its message holding every phrase."""

    error: type
    phrases: tuple

    def __init__(self, error, *phrases):
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "phrases", phrases)


@dataclasses.dataclass(frozen=True)
class Gives:
    """The case must return `value` (tensors compared as nested lists)."""

    value: object


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    run: object  # callable(models) -> result
    expected: object  # Raises or Gives


@functools.lru_cache(maxsize=None)
def tiny_models():
    """The models every case runs on, built once per process: a BERT
    tokenizer and preprocessor (length 8), a 1-layer backbone, a 3-class
    classifier with its preprocessor, and a 1-layer Transformer with its
    tokenizer and preprocessor (length 6)."""
    keras.utils.set_random_seed(0)
    tokenizer = kzoo.BertTokenizer(VOCABULARY)
    preprocessor = kzoo.BertPreprocessor(tokenizer, sequence_length=8)
    backbone = tiny_backbone(num_layers=1, hidden_dim=8, max_sequence_length=16)
    classifier_backbone = tiny_backbone(num_layers=1, hidden_dim=8)
    classifier = kzoo.BertClassifier(classifier_backbone, num_classes=3, preprocessor=preprocessor)
    transformer_tokenizer = kzoo.TransformerTokenizer(TRANSFORMER_VOCABULARY)
    transformer = kzoo.Transformer(
        vocabulary_size=len(TRANSFORMER_VOCABULARY), num_layers=1, hidden_dim=8, intermediate_dim=16,
        num_heads=2, max_sequence_length=16,
    )
    return types.SimpleNamespace(
        tokenizer=tokenizer,
        preprocessor=preprocessor,
        backbone=backbone,
        classifier=classifier,
        transformer_tokenizer=transformer_tokenizer,
        transformer_preprocessor=kzoo.TransformerPreprocessor(transformer_tokenizer, source_length=6, target_length=6),
        transformer=transformer,
    )


def plain(value):
    """Tensors, arrays and tuples as nested Python lists and numbers."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if hasattr(value, "to_list"):  # a tf.RaggedTensor
        return value.to_list()
    if hasattr(value, "shape") and not isinstance(value, (str, bytes)):
        return np.asarray(keras.ops.convert_to_numpy(value) if keras.ops.is_tensor(value) else value).tolist()
    return value


def _weights(models):
    return [w.copy() for model in (models.backbone, models.classifier, models.transformer) for w in model.get_weights()]


def check(case):
    """Runs `case` and asserts its expected outcome (see the module docstring)."""
    models = tiny_models()
    if isinstance(case.expected, Gives):
        assert plain(case.run(models)) == case.expected.value
        return
    before = _weights(models)
    with pytest.raises(case.expected.error) as info:
        case.run(models)
    message = str(info.value)
    for phrase in case.expected.phrases:
        assert phrase in message, f"{phrase!r} not in {message!r}"
    raised_in = str(info.traceback[-1].path)
    assert raised_in.startswith(KZOO_DIR), f"raised by {raised_in}, not by kzoo: {message!r}"
    after = _weights(models)
    assert all(np.array_equal(a, b) for a, b in zip(before, after)), "weights changed before the error"


def parametrize(cases):
    """`pytest.mark.parametrize` over a table, one test id per case name."""
    names = [case.name for case in cases]
    assert len(set(names)) == len(names), "case names must be unique"
    return pytest.mark.parametrize("case", cases, ids=names)
