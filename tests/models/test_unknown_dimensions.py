"""Every public layer and model runs when a dimension is unknown at trace time.

TensorFlow re-traces `fit`/`predict` steps with `None` batch and sequence
dimensions once shapes change (a second pre-training phase at another
length, a last smaller batch); Python arithmetic on such a dimension raises
there. JAX and torch see concrete shapes, but lengths that change between
calls must still work. Each case below runs:

- TensorFlow: inside a `tf.function` whose input signature has `None` for
  every batch and sequence dimension (only feature widths are known), at
  inference and with dropout active;
- JAX: inside `jax.jit` (through `stateless_call` for layers), at two shapes at
  inference and at one with dropout active (each shape is a compile of its own);
- torch: eagerly, at two shapes;

and at inference gives the eager outputs within 1e-5. `test_every_public_layer_and_model_is_covered`
fails when a public class is added without a case here.
"""

import inspect

import keras
import numpy as np
import pytest
from keras import ops

import kzoo
from kzoo import layers
from kzoo.models import Preprocessor
from kzoo.models.bert.bert_masked_lm_head import BertMaskedLMHead

SHAPES = ((2, 5), (3, 9))  # (batch, length) per call: both dimensions change
HIDDEN, VOCABULARY = 8, 30


def ids(batch, length, low=1):
    return np.random.default_rng(batch * 100 + length).integers(low, VOCABULARY, (batch, length)).astype("int32")


def hidden(batch, length, width=HIDDEN):
    return np.random.default_rng(batch * 100 + length).normal(size=(batch, length, width)).astype("float32")


def padding(batch, length):
    mask = np.ones((batch, length), "int32")
    mask[0, length - 2 :] = 0  # a padded row
    return mask


def bert_backbone():
    return kzoo.BertBackbone(
        vocabulary_size=VOCABULARY, num_layers=1, num_heads=2, hidden_dim=HIDDEN,
        intermediate_dim=16, max_sequence_length=32, dropout=0.1,
    )


def bert_inputs(batch, length):
    segments = np.zeros((batch, length), "int32")
    segments[:, length // 2 :] = 1
    return {"token_ids": ids(batch, length), "segment_ids": segments, "padding_mask": padding(batch, length)}


def pretraining_inputs(batch, length):
    positions = np.stack([np.arange(1, 4)] * batch).astype("int32")  # 3 masked positions per row
    return {**bert_inputs(batch, length), "mask_positions": positions}


def transformer():
    return kzoo.Transformer(
        vocabulary_size=VOCABULARY, num_layers=1, hidden_dim=HIDDEN, intermediate_dim=16,
        num_heads=2, max_sequence_length=32,
    )


def transformer_inputs(batch, length):
    source, target = ids(batch, length, low=4), ids(batch, length + 1, low=4)
    source[0, -2:] = 0  # padding id 0
    return {"encoder_token_ids": source, "decoder_token_ids": target}


def block_call(layer, x, training):
    return layer(x["inputs"], padding_mask=x["padding_mask"], training=training)


def gathered_block_call(layer, x, training):
    return layer(x["inputs"], padding_mask=x["padding_mask"], output_positions=x["positions"], training=training)


def decoder_call(layer, x, training):
    return layer(x["decoder"], x["encoder"], decoder_padding_mask=x["padding_mask"], training=training)


def attention_call(layer, x, training):
    return layer(x["query"], x["value"], attention_mask=x["mask"], training=training)


def scores_call(layer, x, training):
    return layer(x["query"], attention_mask=x["mask"], return_attention_scores=True, training=training)[1]


def tokens_and_positions(batch, length):
    return {"inputs": hidden(batch, length), "padding_mask": padding(batch, length),
            "positions": np.stack([[0, length - 1]] * batch).astype("int32")}


def mask_head_inputs(batch, length):
    return {"sequence": hidden(batch, length), "positions": np.stack([[0, length - 1]] * batch).astype("int32")}


def masked_lm_head():
    embedding = layers.TokenEmbedding(VOCABULARY, HIDDEN)
    embedding.build()
    return BertMaskedLMHead(token_embedding=embedding)


def bert_task(task_class, **kwargs):
    return lambda: task_class(backbone=bert_backbone(), **kwargs)


def multiple_choice_inputs(batch, length):
    return {name: np.stack([value] * 2, axis=1) for name, value in bert_inputs(batch, length).items()}


# name: (build, inputs(batch, length) -> dict of arrays, call(target, inputs, training))
CASES = {
    "Dropout": (  # on attention probabilities (batch, heads, T, T): the last width unknown too
        lambda: layers.Dropout(0.3, seed=1), lambda b, t: {"any_width": np.ones((b, 2, t, t), "float32")},
        lambda layer, x, training: layer(x["any_width"], training=training),
    ),
    "FeedForward": (lambda: layers.FeedForward(16, activation="gelu"), lambda b, t: {"x": hidden(b, t)},
                    lambda layer, x, training: layer(x["x"])),
    "MultiHeadAttention": (
        lambda: layers.MultiHeadAttention(num_heads=2, key_dim=4, dropout=0.2),
        lambda b, t: {"query": hidden(b, t), "value": hidden(b, t + 2), "mask": padding(b, t + 2)},
        attention_call,
    ),
    "MultiHeadAttention scores": (
        lambda: layers.MultiHeadAttention(num_heads=2, key_dim=4, dropout=0.2),
        lambda b, t: {"query": hidden(b, t), "mask": padding(b, t)},
        scores_call,
    ),
    # The position layers return (length, width) tables: added to the input as the models do.
    "SinusoidalPositionEncoding": (layers.SinusoidalPositionEncoding, lambda b, t: {"x": hidden(b, t)},
                                   lambda layer, x, training: ops.add(x["x"], layer(x["x"]))),
    "PositionEmbedding": (lambda: layers.PositionEmbedding(32), lambda b, t: {"x": hidden(b, t)},
                          lambda layer, x, training: ops.add(x["x"], layer(x["x"]))),
    "TokenEmbedding": (lambda: layers.TokenEmbedding(VOCABULARY, HIDDEN), lambda b, t: {"ids": ids(b, t)},
                       lambda layer, x, training: layer(x["ids"])),
    "TokenEmbedding reverse": (
        lambda: layers.TokenEmbedding(VOCABULARY, HIDDEN), lambda b, t: {"x": hidden(b, t)},
        lambda layer, x, training: layer(x["x"], reverse=True),
    ),
    "TransformerEncoderBlock": (
        lambda: layers.TransformerEncoderBlock(num_heads=2, intermediate_dim=16, attention_dropout=0.1),
        lambda b, t: {"inputs": hidden(b, t), "padding_mask": padding(b, t)}, block_call,
    ),
    "TransformerEncoderBlock output_positions": (
        lambda: layers.TransformerEncoderBlock(num_heads=2, intermediate_dim=16, attention_dropout=0.1),
        tokens_and_positions, gathered_block_call,
    ),
    "TransformerDecoderBlock": (
        lambda: layers.TransformerDecoderBlock(num_heads=2, intermediate_dim=16, attention_dropout=0.1),
        lambda b, t: {"decoder": hidden(b, t), "encoder": hidden(b, t + 3), "padding_mask": padding(b, t)},
        decoder_call,
    ),
    "masks": (
        lambda: None,
        lambda b, t: {"padding_mask": padding(b, t), "x": hidden(b, t)},
        lambda _, x, training: ops.cast(layers.merge_attention_masks(
            layers.causal_attention_mask(ops.shape(x["x"])[1], ops.shape(x["x"])[1]),
            layers.padding_attention_mask(x["padding_mask"]),
        ), "int32"),
    ),
    "BertMaskedLMHead": (masked_lm_head, mask_head_inputs,
                         lambda layer, x, training: layer(x["sequence"], x["positions"])),
    "BertBackbone": (bert_backbone, bert_inputs,
                     lambda model, x, training: model(x, training=training)["sequence_output"]),
    "BertBackbone hidden states": (
        bert_backbone, bert_inputs,
        lambda model, x, training: model(x, return_hidden_states=True, training=training)["hidden_states"][-1],
    ),
    "BertPretrainer": (lambda: kzoo.BertPretrainer(bert_backbone()), pretraining_inputs,
                       lambda model, x, training: model(x, training=training)["mlm_logits"]),
    "BertMaskedLM": (lambda: kzoo.BertMaskedLM(bert_backbone()), pretraining_inputs,
                     lambda model, x, training: model(x, training=training)["mlm_logits"]),
    "BertClassifier": (bert_task(kzoo.BertClassifier, num_classes=3), bert_inputs,
                       lambda model, x, training: model(x, training=training)),
    "BertReranker": (bert_task(kzoo.BertReranker), bert_inputs, lambda model, x, training: model(x, training=training)),
    "BertTokenClassifier": (bert_task(kzoo.BertTokenClassifier, num_classes=3), bert_inputs,
                            lambda model, x, training: model(x, training=training)),
    "BertQuestionAnswerer": (bert_task(kzoo.BertQuestionAnswerer), bert_inputs,
                             lambda model, x, training: model(x, training=training)["start_logits"]),
    "BertMultipleChoice": (bert_task(kzoo.BertMultipleChoice, num_choices=2), multiple_choice_inputs,
                           lambda model, x, training: model(x, training=training)),
    "BertFeatureExtractor": (bert_task(kzoo.BertFeatureExtractor, strategy="sum_all"), bert_inputs,
                             lambda model, x, training: model(x, training=training)),
    "BertTextEmbedder": (bert_task(kzoo.BertTextEmbedder, pooling="max"), bert_inputs,
                         lambda model, x, training: model(x, training=training)),
    "Transformer": (transformer, transformer_inputs, lambda model, x, training: model(x, training=training)),
    "Transformer generate": (  # beam search (sec. 6.1); `training` does not apply
        transformer, transformer_inputs,
        lambda model, x, training: model.generate(x["encoder_token_ids"], beam_size=2, max_length=6),
    ),
    "Transformer generate greedy, length from the source": (
        transformer, transformer_inputs,
        lambda model, x, training: model.generate(x["encoder_token_ids"], beam_size=1),
    ),
}


def public_classes():
    """Every public kzoo Layer/Model class: kzoo.layers and the top-level API.
    Preprocessors are Layers too, but TensorFlow-only (tf.data), never traced
    by a Keras backend: their unknown batch sizes are tested with tf.data."""
    found = {}
    for module in (layers, kzoo):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer) and not issubclass(obj, Preprocessor):
                found[name] = obj
    return found


def test_every_public_layer_and_model_is_covered():
    covered = {name.split()[0] for name in CASES}
    # TransformerBlock is the encoder/decoder blocks' shared base (no `call` of its own).
    missing = set(public_classes()) - covered - {"TransformerBlock"}
    assert not missing, f"add an unknown-dimension case for {sorted(missing)}"


def static_signature(name, array):
    """The TensorSpec of `array` with every dimension unknown but float feature
    widths (unknown too for inputs named `any_width`)."""
    import tensorflow as tf

    shape = [None] * array.ndim
    if array.dtype.kind == "f" and name != "any_width":
        shape[-1] = array.shape[-1]
    return tf.TensorSpec(shape, array.dtype)


def traced(target, call, training, example):
    """`call(target, inputs, training)` compiled the way each backend re-traces."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        signature = [{name: static_signature(name, value) for name, value in example.items()}]
        function = tf.function(lambda x: call(target, x, training), input_signature=signature)
        return lambda x: function({name: tf.constant(value) for name, value in x.items()})
    if backend == "jax" and isinstance(target, keras.layers.Layer):
        import jax

        def stateless(trainable, non_trainable, x):
            def run(x):
                return call(target, x, training)

            with keras.StatelessScope(
                state_mapping=list(zip(target.trainable_variables, trainable))
                + list(zip(target.non_trainable_variables, non_trainable))
            ):
                return run(x)

        function = jax.jit(stateless)
        return lambda x: function(
            [v.value for v in target.trainable_variables], [v.value for v in target.non_trainable_variables], x
        )
    if backend == "jax":
        import jax

        return jax.jit(lambda x: call(target, x, training))
    return lambda x: call(target, x, training)


@pytest.mark.parametrize("name", sorted(CASES))
def test_unknown_batch_and_sequence_dimensions(name):
    build, make_inputs, call = CASES[name]
    target = build()
    examples = [make_inputs(*shape) for shape in SHAPES]
    call(target, examples[0], False)  # builds the variables eagerly
    # Compared with the eager call: every shape on TensorFlow (one traced
    # function, unknown dimensions), the first on JAX (jit traces per shape;
    # eager JAX compiles every op per shape), none on torch (runs eagerly).
    compared = {"tensorflow": len(SHAPES), "jax": 1}.get(keras.backend.backend(), 0)
    for training in (False,) if " generate" in name else (False, True):  # generate takes no `training`
        function = traced(target, call, training, examples[0])
        shapes = 1 if training and keras.backend.backend() == "jax" else len(SHAPES)
        for index, ((batch, length), example) in enumerate(zip(SHAPES[:shapes], examples)):
            output = ops.convert_to_numpy(function(example))
            assert output.shape[0] == batch, (name, output.shape)
            assert np.isfinite(output).all(), name
            if not training and index < compared:
                expected = ops.convert_to_numpy(call(target, example, False))
                np.testing.assert_allclose(output, expected, atol=1e-5, rtol=0, err_msg=name)


def pretraining_dataset(length, batch=4, count=8):
    rng = np.random.default_rng(length)
    features = {
        "token_ids": rng.integers(1, VOCABULARY, (count, length)).astype("int32"),
        "segment_ids": np.zeros((count, length), "int32"),
        "padding_mask": np.ones((count, length), "int32"),
        "mask_positions": np.tile(np.arange(1, 4, dtype="int32"), (count, 1)),
    }
    labels = {
        "mask_ids": rng.integers(1, VOCABULARY, (count, 3)).astype("int32"),
        "mask_weights": np.ones((count, 3), "float32"),
        "next_sentence_label": rng.integers(0, 2, (count,)).astype("int32"),
    }
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch)


@pytest.mark.parametrize("jit_compile", [False, "auto"])
def test_pretraining_phases_at_two_lengths(jit_compile, monkeypatch):
    """The README's main job: a second phase at another length re-traces the
    train step with unknown dimensions (a crash seen on TensorFlow,
    with and without XLA; JAX compiles either way, torch runs eagerly)."""
    if jit_compile is False and keras.backend.backend() != "tensorflow":
        pytest.skip("jit_compile=False differs from the default only on TensorFlow")
    monkeypatch.setenv("KZOO_XLA_ON_TENSORFLOW", "1")  # "auto": XLA on TensorFlow, as users get it (conftest.py)
    model = kzoo.BertPretrainer(bert_backbone())
    model.compile(optimizer=kzoo.bert_pretraining_optimizer(total_steps=8, warmup_steps=1), jit_compile=jit_compile)
    losses = []
    for length in (8, 16):
        history = model.fit(pretraining_dataset(length), epochs=1, verbose=0)
        losses.append(history.history["loss"][-1])
    assert np.isfinite(losses).all(), losses
