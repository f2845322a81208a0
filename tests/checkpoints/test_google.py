"""Original google-research/bert checkpoints (BERT sec. 3, Appendix A): a TF1
checkpoint with the release's variable names, read into kzoo and compared with
`transformers.BertForPreTraining` holding the same arrays."""

import json
import os
import shutil
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

import kzoo
from tests.models.bert import checkpoint_fixtures as fx

TOLERANCE = 1e-4
CONFIG = {
    "vocab_size": len(fx.UNCASED), "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 40, "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def _release_arrays(seed=0):
    """Random arrays under the names of `bert_model.ckpt` (modeling.py and
    run_pretraining.py), with the shapes TensorFlow stores: kernels (in, out),
    `cls/seq_relationship/output_weights` (2, H)."""
    rng = np.random.RandomState(seed)
    h, f, v = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"]
    shapes = {
        "bert/embeddings/word_embeddings": (v, h),
        "bert/embeddings/token_type_embeddings": (2, h),
        "bert/embeddings/position_embeddings": (CONFIG["max_position_embeddings"], h),
        "bert/embeddings/LayerNorm/gamma": (h,), "bert/embeddings/LayerNorm/beta": (h,),
        "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
        "cls/predictions/transform/dense/kernel": (h, h), "cls/predictions/transform/dense/bias": (h,),
        "cls/predictions/transform/LayerNorm/gamma": (h,), "cls/predictions/transform/LayerNorm/beta": (h,),
        "cls/predictions/output_bias": (v,),
        "cls/seq_relationship/output_weights": (2, h), "cls/seq_relationship/output_bias": (2,),
    }
    for i in range(CONFIG["num_hidden_layers"]):
        layer = f"bert/encoder/layer_{i}/"
        for part in ("query", "key", "value"):
            shapes[f"{layer}attention/self/{part}/kernel"] = (h, h)
            shapes[f"{layer}attention/self/{part}/bias"] = (h,)
        shapes.update({
            f"{layer}attention/output/dense/kernel": (h, h), f"{layer}attention/output/dense/bias": (h,),
            f"{layer}attention/output/LayerNorm/gamma": (h,), f"{layer}attention/output/LayerNorm/beta": (h,),
            f"{layer}intermediate/dense/kernel": (h, f), f"{layer}intermediate/dense/bias": (f,),
            f"{layer}output/dense/kernel": (f, h), f"{layer}output/dense/bias": (h,),
            f"{layer}output/LayerNorm/gamma": (h,), f"{layer}output/LayerNorm/beta": (h,),
        })
    return {name: (rng.normal(size=shape) * 0.2).astype("float32") for name, shape in shapes.items()}


def _write_release(directory, arrays):
    """bert_config.json, vocab.txt and a TF1 `Saver` checkpoint (with Adam slots
    and global_step, as in the released files' neighbours)."""
    os.makedirs(directory)
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump(CONFIG, f)
    fx.write_vocabulary(directory, fx.UNCASED)
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(value, name=name) for name, value in arrays.items()]
        variables.append(tf.compat.v1.Variable(np.zeros((3,), "float32"), name="bert/pooler/dense/bias/adam_m"))
        variables.append(tf.compat.v1.Variable(7, name="global_step", dtype=tf.int64))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, os.path.join(directory, "bert_model.ckpt"), write_meta_graph=False)


def _transformers_name(name):
    """google-research name -> Hugging Face name, by the rules of the TF-to-PyTorch
    conversion script that shipped with transformers (kernel -> weight transposed,
    gamma/beta -> weight/bias, output_weights/output_bias -> weight/bias)."""
    parts = [f"layer.{p[len('layer_'):]}" if p.startswith("layer_") else p for p in name.split("/")]
    renames = {"kernel": "weight", "gamma": "weight", "beta": "bias", "output_weights": "weight", "output_bias": "bias"}
    parts[-1] = renames.get(parts[-1], parts[-1])
    if name.startswith("bert/embeddings/") and "LayerNorm" not in name:
        parts.append("weight")
    if name == "cls/predictions/output_bias":
        parts = ["cls", "predictions", "bias"]
    return ".".join(parts)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    arrays = _release_arrays()
    directory = str(tmp_path_factory.mktemp("google") / "uncased_L-2_H-32_A-2")
    _write_release(directory, arrays)
    reference = transformers.BertForPreTraining(transformers.BertConfig(**CONFIG, layer_norm_eps=1e-12)).eval()
    state = {_transformers_name(name): torch.from_numpy(value.T if name.endswith("kernel") else value)
             for name, value in arrays.items()}
    missing, unexpected = reference.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    return directory, reference


def test_pretrainer_matches_transformers_with_the_same_arrays(release):
    directory, reference = release
    model = kzoo.BertPretrainer.from_preset(directory)
    assert model.backbone.activation == "gelu"  # exact erf: how the released weights were trained
    features, positions = fx.inputs(CONFIG["vocab_size"])
    found = {**model.backbone(features), **model({**features, "mask_positions": positions})}
    differences = fx.max_differences(fx.hf_outputs(reference, features, positions), found, features["padding_mask"])
    print(f"google-research checkpoint on {keras.backend.backend()}: max |kzoo - transformers| {differences}")
    assert set(differences) == {"sequence_output", "pooled_output", "mlm_logits", "nsp_logits"}
    assert max(differences.values()) < TOLERANCE, differences


def test_zip_release_and_fine_tuned_classifier(release, tmp_path):
    directory, reference = release
    fine_tuned = str(tmp_path / "uncased_finetuned")
    arrays = _release_arrays()
    arrays["output_weights"] = np.random.RandomState(1).normal(size=(3, 32)).astype("float32")  # run_classifier.py
    arrays["output_bias"] = np.random.RandomState(2).normal(size=(3,)).astype("float32")
    _write_release(fine_tuned, arrays)
    archive = shutil.make_archive(str(tmp_path / "uncased_L-2_H-32_A-2"), "zip", tmp_path, "uncased_finetuned")
    model = kzoo.BertClassifier.from_preset(archive)  # num_classes read from output_bias
    features, positions = fx.inputs(CONFIG["vocab_size"])
    pooled = fx.hf_outputs(reference, features, positions)["pooled_output"]
    expected = pooled @ arrays["output_weights"].T + arrays["output_bias"]
    assert np.abs(keras.ops.convert_to_numpy(model(features)) - expected).max() < TOLERANCE
    assert model.preprocessor.tokenizer.lowercase


@pytest.mark.backend_independent
def test_tokenizer_casing_from_the_release_name(release, tmp_path):
    directory, _ = release
    tokenizer = kzoo.BertTokenizer.from_preset(directory)
    reference = transformers.BertTokenizerFast(vocab=os.path.join(directory, "vocab.txt"), do_lower_case=True)
    fx.assert_tokenizers_agree(tokenizer, reference)
    cased = str(tmp_path / "cased_L-2_H-32_A-2")
    shutil.copytree(directory, cased)
    assert not kzoo.BertTokenizer.from_preset(cased).lowercase
    unnamed = str(tmp_path / "my_bert")
    shutil.copytree(directory, unnamed)
    with pytest.warns(UserWarning, match="Pass lowercase=False for a cased model"):
        assert kzoo.BertTokenizer.from_preset(unnamed).lowercase
    assert not kzoo.BertTokenizer.from_preset(unnamed, lowercase=False).lowercase


def test_missing_or_truncated_shard_is_detected_before_loading(release, tmp_path):
    directory, _ = release
    copy = str(tmp_path / "uncased_copy")
    shutil.copytree(directory, copy)
    data = os.path.join(copy, "bert_model.ckpt.data-00000-of-00001")
    content = open(data, "rb").read()
    with open(data, "wb") as f:
        f.write(content[: len(content) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        kzoo.BertBackbone.from_preset(copy)
    os.remove(data)
    with pytest.raises(ValueError, match=r"incomplete: data shard\(s\) bert_model.ckpt.data-\* missing"):
        kzoo.BertBackbone.from_preset(copy)


def test_truncated_zip_is_detected(tmp_path):
    archive = tmp_path / "uncased_L-2.zip"
    with zipfile.ZipFile(archive, "w") as f:
        f.writestr("uncased_L-2/bert_config.json", json.dumps(CONFIG) * 50)
    archive.write_bytes(archive.read_bytes()[:-60])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        kzoo.BertBackbone.from_preset(str(archive))
