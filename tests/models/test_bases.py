"""The structure of kzoo's models: a role (`Backbone`, `Task`) over one shared
base, at most one mixin of methods, config and presets written once per role, one forward definition, no reaching into
another object's private attributes."""

import importlib
import inspect
import pkgutil
import re

import keras
import numpy as np
import pytest

import kzoo
from kzoo.models import Backbone, Preprocessor, Task
from kzoo.models.base_model import BaseModel

ROLES = (Backbone, Task, Preprocessor)
WRITTEN_ONCE = {  # method -> the only classes that write it
    "get_config": {BaseModel, Preprocessor},
    "from_config": {BaseModel, Preprocessor},
    "from_preset": {Backbone, Task, Preprocessor},
    "save_to_preset": {Backbone, Task, Preprocessor},
}


def kzoo_classes():
    """Every Keras layer or model class defined in kzoo."""
    found = {}
    for info in pkgutil.walk_packages(kzoo.__path__, prefix="kzoo."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and obj.__module__ == module.__name__ and issubclass(obj, keras.layers.Layer):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


CLASSES = kzoo_classes()


def _defines_code(cls):
    """Whether `cls`'s own body defines a function (method, property, classmethod)."""
    for value in vars(cls).values():
        function = getattr(value, "fget", None) or getattr(value, "__func__", value)
        if inspect.isfunction(function) and function.__qualname__.startswith(cls.__qualname__ + "."):
            return True
    return False


def kzoo_levels(cls):
    """The kzoo layer classes in `cls`'s MRO that define code: a subclass that
    only sets data (e.g. `BertMaskedLM`, the pre-trainer without its NSP head)
    is a variant, not a level."""
    return [c for c in cls.__mro__ if c.__module__.startswith("kzoo.") and _defines_code(c)
            and issubclass(c, keras.layers.Layer)]


def test_the_classes_were_found():
    names = {cls.__name__ for cls in CLASSES.values()}
    assert {"BertBackbone", "BertClassifier", "BertPreprocessor", "Transformer", "TransformerEncoderBlock"} <= names


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_at_most_three_kzoo_levels(name):
    # A model, its role and the shared base (KerasHub's BertTextClassifier has five).
    cls = CLASSES[name]
    levels = kzoo_levels(cls)
    assert len(levels) <= 3, f"{name}: {[c.__name__ for c in levels]}"
    mixins = [c for c in cls.__mro__ if c.__module__.startswith("kzoo.") and not issubclass(c, keras.layers.Layer)]
    assert len(mixins) <= 1, f"{name}: {[c.__name__ for c in mixins]}"


def test_every_model_is_a_backbone_or_a_task():
    models = [cls for cls in CLASSES.values() if issubclass(cls, keras.Model) and cls not in (*ROLES, BaseModel)]
    assert models
    for cls in models:
        assert issubclass(cls, (Backbone, Task)), cls


@pytest.mark.parametrize("method", sorted(WRITTEN_ONCE))
def test_config_and_presets_are_written_once_per_role(method):
    defining = {cls for cls in CLASSES.values() if method in vars(cls) and issubclass(cls, (BaseModel, Preprocessor))}
    assert defining == WRITTEN_ONCE[method], sorted(c.__name__ for c in defining)


@pytest.mark.parametrize("name", sorted(n for n, cls in CLASSES.items() if issubclass(cls, Task)))
def test_no_task_reads_private_attributes_of_another_object(name):
    source = inspect.getsource(inspect.getmodule(CLASSES[name]))
    reached = re.findall(r"\b(?!self\b)\w+\._[a-z]\w*", source)
    assert not [r for r in reached if r.split(".")[0] in ("backbone", "preprocessor", "tokenizer", "model")], reached


def tiny_backbone():
    return kzoo.BertBackbone(vocabulary_size=20, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16)


@pytest.mark.parametrize(
    "build",
    [
        tiny_backbone,
        lambda: kzoo.Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8, intermediate_dim=16, num_heads=2),
        lambda: kzoo.BertClassifier(tiny_backbone(), num_classes=3),
        lambda: kzoo.BertPretrainer(tiny_backbone()),
        lambda: kzoo.BertTokenClassifier(tiny_backbone(), num_classes=2, tags=["O", "B-X"]),
        lambda: kzoo.BertPreprocessor(kzoo.BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]), 8),
    ],
    ids=["BertBackbone", "Transformer", "BertClassifier", "BertPretrainer", "BertTokenClassifier", "BertPreprocessor"],
)
def test_get_config_is_the_constructor_arguments(build):
    obj = build()
    parameters = set(inspect.signature(type(obj).__init__).parameters) - {"self", "kwargs"}
    assert set(obj.get_config()) - {"name", "trainable"} == parameters
    revived = type(obj).from_config(obj.get_config())
    assert revived.get_config() == obj.get_config()


def test_bert_graph_and_eager_forward_are_one_definition():
    backbone = tiny_backbone()
    inputs = backbone.complete_inputs(np.array([[2, 7, 9, 4, 3, 0]]))
    inputs["padding_mask"] = np.array([[1, 1, 1, 1, 1, 0]])
    graph = backbone(inputs)  # the functional graph of __init__
    eager = backbone.encode(backbone.embed(inputs), inputs["padding_mask"])
    hidden = backbone(inputs, return_hidden_states=True)
    positions = np.array([[1, 3]])
    rows = backbone.encode(backbone.embed(inputs), inputs["padding_mask"], output_positions=positions)
    for name in ("sequence_output", "pooled_output"):
        expected = keras.ops.convert_to_numpy(graph[name])
        np.testing.assert_allclose(keras.ops.convert_to_numpy(eager[name]), expected, atol=1e-6)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(hidden[name]), expected, atol=1e-6)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(rows["sequence_output"]),
        keras.ops.convert_to_numpy(graph["sequence_output"])[:, [1, 3]],
        atol=1e-5,
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(rows["pooled_output"]), keras.ops.convert_to_numpy(graph["pooled_output"]), atol=1e-5
    )


def test_layers_set_before_keras_init_are_the_graphs_layers():
    backbone = tiny_backbone()
    for name in ("token_embedding", "segment_embedding", "position_embedding", "pooled_dense"):
        assert getattr(backbone, name) is backbone.get_layer(name)
    assert [layer.name for layer in backbone.transformer_layers] == ["transformer_layer_0", "transformer_layer_1"]
    tracked = backbone._flatten_layers(include_self=False, recursive=False)
    assert len({id(layer) for layer in tracked}) == len(tracked) == len(backbone.layers)
    assert len(backbone.trainable_weights) == len({id(v) for v in backbone.trainable_weights})
