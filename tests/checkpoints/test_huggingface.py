"""Hugging Face BERT checkpoints in and out (BERT sec. 3, Appendix A): parity with
`transformers` on the current backend, tokenizer ids, exact round trips, errors."""

import json
import os

import keras
import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file

import kzoo
from kzoo_cli import main as cli_main
from tests.models.bert import checkpoint_fixtures as fx

TOLERANCE = 1e-4
# Two configurations: the exact GELU with BERT's defaults, cased; the tanh
# GELU, another epsilon and three segments, uncased, saved as pytorch_model.bin.
CONFIGS = {
    "gelu_cased_safetensors": (dict(hidden_act="gelu"), fx.CASED, False, True),
    "gelu_new_uncased_bin": (
        dict(hidden_act="gelu_new", layer_norm_eps=1e-6, type_vocab_size=3), fx.UNCASED, True, False,
    ),
}


def _hf_directory(tmp_path, model_class, name="hf", vocabulary=fx.UNCASED, lowercase=True, safe=True, **config):
    """`save_pretrained` output; with `safe=False`, its tensors in pytorch_model.bin
    instead, under the LayerNorm names of the original PyTorch release (gamma, beta)."""
    model = fx.random_hf_model(model_class, vocab_size=len(vocabulary), **config)
    directory = tmp_path / name
    model.save_pretrained(directory)
    if not safe:  # transformers 5 writes safetensors only
        tensors = load_file(directory / "model.safetensors")
        legacy = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): torch.from_numpy(v) for k, v in tensors.items()}
        torch.save(legacy, directory / "pytorch_model.bin")
        os.remove(directory / "model.safetensors")
    fx.write_vocabulary(tmp_path, vocabulary)
    transformers.BertTokenizerFast(vocab=str(tmp_path / "vocab.txt"), do_lower_case=lowercase).save_pretrained(directory)
    return model, directory


def _saved_tensors(directory):
    """The tensors of a checkpoint file, LayerNorm names as transformers writes them today."""
    if os.path.isfile(directory / "model.safetensors"):
        return load_file(directory / "model.safetensors")
    state = torch.load(directory / "pytorch_model.bin", weights_only=True)
    return {k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias"): v.numpy() for k, v in state.items()}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def pretraining_checkpoint(request, tmp_path_factory):
    config, vocabulary, lowercase, safe = CONFIGS[request.param]
    tmp_path = tmp_path_factory.mktemp(request.param)
    model, directory = _hf_directory(
        tmp_path, transformers.BertForPreTraining, vocabulary=vocabulary, lowercase=lowercase, safe=safe, **config
    )
    return request.param, model, directory


def test_pretrainer_matches_transformers(pretraining_checkpoint):
    name, hf_model, directory = pretraining_checkpoint
    config = hf_model.config
    model = kzoo.BertPretrainer.from_preset(directory)
    backbone = model.backbone
    expected_activation = {"gelu": "gelu", "gelu_new": "gelu_approximate"}[config.hidden_act]
    assert (backbone.activation, backbone.layer_norm_epsilon) == (expected_activation, config.layer_norm_eps)
    assert (backbone.num_segments, backbone.max_sequence_length) == (config.type_vocab_size, 40)
    features, positions = fx.inputs(config.vocab_size, config.type_vocab_size)
    found = {**backbone(features), **model({**features, "mask_positions": positions})}
    differences = fx.max_differences(fx.hf_outputs(hf_model, features, positions), found, features["padding_mask"])
    print(f"{name} on {keras.backend.backend()}: max |kzoo - transformers| {differences}")
    assert set(differences) == {"sequence_output", "pooled_output", "mlm_logits", "nsp_logits"}
    assert max(differences.values()) < TOLERANCE, differences


@pytest.mark.backend_independent
def test_tokenizer_matches_transformers(pretraining_checkpoint):
    _, hf_model, directory = pretraining_checkpoint
    tokenizer = kzoo.BertTokenizer.from_preset(directory)
    reference = transformers.BertTokenizerFast.from_pretrained(directory)
    assert tokenizer.lowercase == reference.do_lower_case
    assert tokenizer.vocabulary_size() == hf_model.config.vocab_size
    fx.assert_tokenizers_agree(tokenizer, reference)
    preprocessor = kzoo.BertPreprocessor.from_preset(directory, padding="max_length")
    assert preprocessor.sequence_length == 40  # the position table's size
    expected = reference(fx.SENTENCES[:2], padding="max_length", max_length=40)["input_ids"]
    assert preprocessor(fx.SENTENCES[:2])["token_ids"].numpy().tolist() == expected


def test_round_trip_is_exact_and_transformers_loads_the_export(pretraining_checkpoint, tmp_path):
    _, hf_model, directory = pretraining_checkpoint
    model = kzoo.BertPretrainer.from_preset(directory)
    model.save_to_preset(tmp_path / "out", format="huggingface")
    exported = load_file(tmp_path / "out" / "model.safetensors")
    original = _saved_tensors(directory)
    assert sorted(exported) == sorted(original)
    assert all(np.array_equal(exported[k], original[k]) for k in original)
    # transformers finds every tensor it needs (BertModel leaves the heads out).
    reloaded, info = transformers.BertForPreTraining.from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert reloaded.config.hidden_act == hf_model.config.hidden_act
    _, info = transformers.BertModel.from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not info["missing_keys"], info
    tokenizer = transformers.BertTokenizerFast.from_pretrained(tmp_path / "out")
    fx.assert_tokenizers_agree(model.tokenizer, tokenizer)


def test_backbone_export_loads_in_transformers(tmp_path):
    _, directory = _hf_directory(tmp_path, transformers.BertModel)
    backbone = kzoo.BertBackbone.from_preset(directory)
    backbone.save_to_preset(tmp_path / "out", format="huggingface")
    assert sorted(os.listdir(tmp_path / "out")) == ["config.json", "model.safetensors"]
    reloaded, info = transformers.BertModel.from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    features, positions = fx.inputs(len(fx.UNCASED))
    differences = fx.max_differences(fx.hf_outputs(reloaded, features, positions), backbone(features), features["padding_mask"])
    assert max(differences.values()) < TOLERANCE, differences


@pytest.mark.parametrize(
    "hf_class,kzoo_class,outputs",
    [
        (transformers.BertForSequenceClassification, kzoo.BertClassifier, ["logits"]),
        (transformers.BertForQuestionAnswering, kzoo.BertQuestionAnswerer, ["start_logits", "end_logits"]),
        (transformers.BertForTokenClassification, kzoo.BertTokenClassifier, ["logits"]),
    ],
)
def test_fine_tuned_heads_load_into_the_matching_task(tmp_path, hf_class, kzoo_class, outputs):
    names = {kzoo.BertTokenClassifier: ["O", "B-LOC", "I-LOC"], kzoo.BertClassifier: ["neg", "neu", "pos"]}
    labels = {"id2label": dict(enumerate(names[kzoo_class]))} if kzoo_class in names else {}
    hf_model, directory = _hf_directory(tmp_path, hf_class, **labels)
    model = kzoo_class.from_preset(directory)  # the head size comes from the checkpoint
    features, positions = fx.inputs(len(fx.UNCASED))
    found = model(features)
    found = found if isinstance(found, dict) else {"logits": found}
    expected = fx.hf_outputs(hf_model, features, positions)
    differences = fx.max_differences({k: expected[k] for k in outputs}, found, features["padding_mask"])
    assert max(differences.values()) < TOLERANCE, differences
    if kzoo_class in names:  # read from id2label
        assert getattr(model, "tags" if kzoo_class is kzoo.BertTokenClassifier else "class_names") == names[kzoo_class]
    model.save_to_preset(tmp_path / "out", format="huggingface")
    exported, original = load_file(tmp_path / "out" / "model.safetensors"), _saved_tensors(directory)
    assert sorted(exported) == sorted(original)
    assert all(np.array_equal(exported[k], original[k]) for k in original)


@pytest.mark.parametrize(
    "kzoo_class,argument,hf_class",
    [
        (kzoo.BertClassifier, "class_names", transformers.BertForSequenceClassification),
        (kzoo.BertTokenClassifier, "tags", transformers.BertForTokenClassification),
    ],
)
def test_label_names_are_exported_as_id2label_and_read_back(tmp_path, monkeypatch, kzoo_class, argument, hf_class):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backbone = kzoo.BertBackbone(vocabulary_size=len(fx.UNCASED), num_layers=1, num_heads=2, hidden_dim=16,
                                 intermediate_dim=32, max_sequence_length=40)
    names = ["O", "B-LOC", "I-LOC"] if argument == "tags" else ["negative", "neutral", "positive"]
    kzoo_class(backbone, **{argument: names}).save_to_preset(tmp_path / "named", format="huggingface")
    config = json.loads((tmp_path / "named" / "config.json").read_text())
    assert config["id2label"] == {str(i): name for i, name in enumerate(names)}
    assert config["label2id"] == {name: i for i, name in enumerate(names)}
    assert hf_class.from_pretrained(tmp_path / "named").config.id2label == dict(enumerate(names))
    restored = kzoo_class.from_preset(tmp_path / "named")
    assert getattr(restored, argument) == names and restored.num_classes == 3
    # A checkpoint's names can be replaced by others of the same number; another number of
    # labels leaves the checkpoint's names out and is caught by the head's shape check.
    assert getattr(kzoo_class.from_preset(tmp_path / "named", **{argument: list("abc")}), argument) == list("abc")
    assert getattr(kzoo_class.from_preset(tmp_path / "named", num_classes=3), argument) == names
    with pytest.raises(ValueError, match=r"expected shape \(4, 16\), found \(3, 16\)"):
        kzoo_class.from_preset(tmp_path / "named", num_classes=4)
    # No names: transformers' LABEL_i in the export, and no names read back.
    kzoo_class(backbone, num_classes=3).save_to_preset(tmp_path / "unnamed", format="huggingface")
    config = json.loads((tmp_path / "unnamed" / "config.json").read_text())
    assert config["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    assert getattr(kzoo_class.from_preset(tmp_path / "unnamed"), argument) is None


def test_task_from_a_pretraining_checkpoint_gets_a_fresh_head_and_the_tokenizer(tmp_path):
    _, directory = _hf_directory(tmp_path, transformers.BertForPreTraining)
    model = kzoo.BertClassifier.from_preset(directory, num_classes=4)
    assert model.output.shape[-1] == 4
    assert model.preprocessor.tokenizer.vocabulary_size() == len(fx.UNCASED)
    reference = kzoo.BertBackbone.from_preset(directory)
    assert np.array_equal(keras.ops.convert_to_numpy(model.backbone.pooled_dense.kernel),
                          keras.ops.convert_to_numpy(reference.pooled_dense.kernel))


def test_fine_tuning_takes_the_steps_of_a_transformers_loop(tmp_path):
    """A `BertClassifier` fine-tuned with BERT's recipe (`bert_finetuning_optimizer`:
    AdamW without decay on biases and LayerNorm, 10% warm-up, linear decay,
    clipping at global norm 1) takes the steps of the PyTorch loop written for
    `BertForSequenceClassification` (`torch.optim.AdamW` in the Trainer's two
    groups, `get_linear_schedule_with_warmup`, `clip_grad_norm_`), dropout off:
    the same loss at each of 10 steps and the same logits after. Keras' own
    AdamW (epsilon added to sqrt(v)) is 3e-4 off in the loss within these steps."""
    steps, classes = 10, 3
    hf_model, directory = _hf_directory(tmp_path, transformers.BertForSequenceClassification, num_labels=classes,
                                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = kzoo.BertClassifier.from_preset(directory, num_classes=classes, dropout=0.0)
    model.compile(optimizer=kzoo.bert_finetuning_optimizer(total_steps=steps, learning_rate=1e-3))
    no_decay = [any(name in n for name in ("bias", "LayerNorm.weight")) for n, _ in hf_model.named_parameters()]
    parameters = [p for _, p in hf_model.named_parameters()]
    optimizer = torch.optim.AdamW([
        {"params": [p for p, skip in zip(parameters, no_decay) if not skip], "weight_decay": 0.01},
        {"params": [p for p, skip in zip(parameters, no_decay) if skip], "weight_decay": 0.0},
    ], lr=1e-3, eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, steps // 10, steps)
    rng = np.random.RandomState(0)
    hf_model.train()
    for _ in range(steps):
        padding_mask = (np.arange(12) < rng.randint(6, 13, (8, 1))).astype("int32")
        x = {"token_ids": rng.randint(5, len(fx.UNCASED), (8, 12)).astype("int32") * padding_mask,
             "segment_ids": np.zeros((8, 12), "int32"), "padding_mask": padding_mask}
        y = rng.randint(0, classes, 8)
        loss = hf_model(input_ids=torch.tensor(x["token_ids"]).long(), token_type_ids=torch.tensor(x["segment_ids"]).long(),
                        attention_mask=torch.tensor(padding_mask).long(), labels=torch.tensor(y).long()).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(hf_model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        ours = model.train_on_batch(x, y, return_dict=True)["loss"]
        np.testing.assert_allclose(float(ours), loss.item(), rtol=1e-5)
    with torch.no_grad():
        expected = hf_model.eval()(input_ids=torch.tensor(x["token_ids"]).long(), token_type_ids=torch.tensor(
            x["segment_ids"]).long(), attention_mask=torch.tensor(padding_mask).long()).logits.numpy()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.predict_on_batch(x)), expected, atol=2e-5)


def test_missing_pooler_and_heads_are_reported(tmp_path):
    _, directory = _hf_directory(tmp_path, transformers.BertForQuestionAnswering)  # no pooler
    with pytest.warns(UserWarning, match="has no pooler"):
        kzoo.BertBackbone.from_preset(directory)
    with pytest.warns(UserWarning, match=r"has no pooler \(pooled_output\), mlm_head head or next_sentence_dense head: .* Train them"):
        kzoo.BertPretrainer.from_preset(directory)


def test_conversion_command_round_trip(tmp_path, capsys):
    hf_model, directory = _hf_directory(tmp_path, transformers.BertForPreTraining)
    assert cli_main(["convert", str(directory), str(tmp_path / "kzoo")]) == 0
    assert "Wrote a BertPretrainer" in capsys.readouterr().out
    assert cli_main(["convert", str(tmp_path / "kzoo"), str(tmp_path / "back"), "--format", "huggingface"]) == 0
    exported, original = load_file(tmp_path / "back" / "model.safetensors"), _saved_tensors(directory)
    assert sorted(exported) == sorted(original)
    assert all(np.array_equal(exported[k], original[k]) for k in original)
    assert kzoo.BertTokenizer.from_preset(tmp_path / "back").get_vocabulary() == fx.UNCASED


# === Errors ===


def _edit_config(directory, **changes):
    path = directory / "config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, **changes}))


def test_shape_mismatch_names_tensor_and_shapes_and_assigns_nothing(tmp_path):
    _, directory = _hf_directory(tmp_path, transformers.BertModel)
    _edit_config(directory, max_position_embeddings=30)
    with pytest.raises(ValueError, match=r"embeddings\.position_embeddings\.weight: expected shape \(30, 32\), found \(40, 32\)"):
        kzoo.BertBackbone.from_preset(directory)
    classifier_directory = _hf_directory(tmp_path, transformers.BertForSequenceClassification, "cls", num_labels=3)[1]
    with pytest.raises(ValueError, match=r"(?s)classifier\.weight: expected shape \(5, 32\), found \(3, 32\).*num_classes"):
        kzoo.BertClassifier.from_preset(classifier_directory, num_classes=5)


def test_unsupported_model_type_lists_supported(tmp_path):
    _, directory = _hf_directory(tmp_path, transformers.BertModel)
    _edit_config(directory, model_type="roberta")
    with pytest.raises(ValueError, match=r"model_type 'roberta'.*model_type in \['bert'\]"):
        kzoo.BertBackbone.from_preset(directory)


@pytest.mark.parametrize("safe", [True, False])
def test_truncated_weights_file_is_detected(tmp_path, safe):
    _, directory = _hf_directory(tmp_path, transformers.BertModel, safe=safe)
    path = directory / ("model.safetensors" if safe else "pytorch_model.bin")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        kzoo.BertBackbone.from_preset(directory)


def _touch(path):  # what the pickle below would call, were it unpickled with code allowed
    open(path, "w").close()


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return _touch, (self.marker,)


def test_pickle_holding_code_is_refused_as_unsafe_not_reported_as_damaged(tmp_path):
    _, directory = _hf_directory(tmp_path, transformers.BertModel, safe=False)
    state = torch.load(directory / "pytorch_model.bin", weights_only=True)
    marker = tmp_path / "code_ran"
    torch.save({**state, "payload": _RunsCode(str(marker))}, directory / "pytorch_model.bin")
    with pytest.raises(ValueError) as raised:
        kzoo.BertBackbone.from_preset(directory)
    message = str(raised.value)
    assert message.startswith(f"Refused to read {str(directory / 'pytorch_model.bin')!r} as unsafe: besides "
                              f"tensors, its pickle calls or builds {__name__}._touch, which could run code, "
                              "so nothing in it was run."), message
    assert "`transformers.AutoModel.from_pretrained(d).save_pretrained(d, safe_serialization=True)`" in message
    assert "truncated" not in message and "Download it again" not in message
    assert not marker.exists()
    torch.save({**state, "payload": _SystemCall()}, directory / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"calls or builds posix\.system"):  # a blocked module
        kzoo.BertBackbone.from_preset(directory)


class _SystemCall:
    def __reduce__(self):
        return os.system, ("true",)


def test_pytorch_file_without_torch_says_what_to_install(tmp_path, monkeypatch):
    _, directory = _hf_directory(tmp_path, transformers.BertModel, safe=False)
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    with pytest.raises(ValueError, match=r"needs torch \(pip install torch\)"):
        kzoo.BertBackbone.from_preset(directory)


def test_hub_handle_offline_names_the_handle(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError, match=r"Could not download 'hf://kzoo-test/no-such-bert' from the Hugging Face Hub"):
        kzoo.BertBackbone.from_preset("hf://kzoo-test/no-such-bert")


def test_export_refuses_a_directory_with_other_files(tmp_path):
    backbone = kzoo.BertBackbone(vocabulary_size=len(fx.UNCASED), num_layers=2, num_heads=2, hidden_dim=32,
                                 intermediate_dim=64, max_sequence_length=40)  # the shapes compiled above
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"holds \['notes.txt'\]"):
        backbone.save_to_preset(tmp_path, format="huggingface")
    with pytest.raises(ValueError, match="Unknown preset format 'onnx'"):
        backbone.save_to_preset(tmp_path / "new", format="onnx")
