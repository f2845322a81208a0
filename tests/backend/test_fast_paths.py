"""kzoo's backend-aware fast paths (`kzoo.backend`): what they change in
behaviour, never how fast (benchmarks/run_all.py measures speed)."""

import keras
import numpy as np
import pytest

import kzoo
from kzoo.backend import adam_base

BACKEND = keras.backend.backend()
TINY = dict(vocabulary_size=40, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
            max_sequence_length=16)


def masked_lm_batch():
    rng = np.random.default_rng(0)
    features = {
        "token_ids": rng.integers(4, 40, (4, 12)).astype("int32"),
        "mask_positions": np.array([[1, 5], [2, 3], [0, 7], [4, 11]], "int32"),
    }
    labels = {"mask_ids": rng.integers(4, 40, (4, 2)).astype("int32"),
              "mask_weights": np.ones((4, 2), "float32")}
    return features, labels


def text_classifier():
    """A tiny classifier of raw text, and four texts for it."""
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"a good bad film plot very the is".split()]
    model = kzoo.BertClassifier(kzoo.BertBackbone(**dict(TINY, vocabulary_size=len(vocabulary))), num_classes=2,
                                preprocessor=kzoo.BertTokenizer(vocabulary))
    return model, ["a good film", "bad plot", "the plot is very good", "film"]


@pytest.fixture(autouse=True)
def _kzoo_default_compile(monkeypatch):
    # The suite turns XLA on TensorFlow off (tests/conftest.py); these tests
    # check the default users get.
    monkeypatch.setenv("KZOO_XLA_ON_TENSORFLOW", "1")


def test_auto_compiles_with_xla_on_tensorflow_and_jax_and_stays_eager_on_torch():
    expected = BACKEND in ("tensorflow", "jax")
    backbone = kzoo.BertBackbone(**TINY)
    assert backbone.jit_compile == expected  # never compiled: `predict` uses this
    models = [kzoo.BertMaskedLM(backbone), kzoo.Transformer(vocabulary_size=20, num_layers=1,
              hidden_dim=8, intermediate_dim=16, num_heads=2)]
    for model in models:
        model.compile()
        assert model.jit_compile == expected, type(model).__name__
        model.compile(jit_compile=False)  # an explicit choice wins
        assert model.jit_compile is False


def test_the_environment_restores_keras_auto_on_tensorflow(monkeypatch):
    monkeypatch.setenv("KZOO_XLA_ON_TENSORFLOW", "0")
    model = kzoo.BertMaskedLM(kzoo.BertBackbone(**TINY))
    model.compile()
    assert model.jit_compile == (BACKEND == "jax")  # Keras' "auto" on this CPU-only machine


def test_default_compiled_training_equals_uncompiled():
    """XLA (TensorFlow, JAX) changes no result: one step of the default
    compile and one of `jit_compile=False` from the same weights agree."""
    features, labels = masked_lm_batch()
    losses, weights = [], []
    for jit in ("auto", False):
        keras.utils.set_random_seed(1)
        backbone = kzoo.BertBackbone(**TINY, dropout=0.0)
        model = kzoo.BertMaskedLM(backbone)
        model.compile(jit_compile=jit)
        losses.append(model.train_on_batch(features, labels)[0])
        weights.append(keras.ops.convert_to_numpy(backbone.token_embedding.embeddings))
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    np.testing.assert_allclose(weights[0], weights[1], atol=1e-6)


def test_compiled_predict_still_rejects_too_long_sequences():
    """Inside a compiled step the readable check may not run (XLA drops
    TensorFlow asserts), but kzoo checks the batch before the step: a too-long
    sequence fails with kzoo's message, as in an eager call."""
    backbone = kzoo.BertBackbone(**TINY)
    backbone.predict_on_batch({"token_ids": np.ones((2, 8), "int32")})  # compiled at one shape
    with pytest.raises(ValueError, match="max_sequence_length=16"):
        backbone.predict_on_batch({"token_ids": np.ones((2, 17), "int32")})
    with pytest.raises(ValueError, match="max_sequence_length=16"):
        backbone({"token_ids": np.ones((2, 17), "int32")})  # eager: kzoo's own message


@pytest.mark.parametrize("amsgrad", [False, True])
def test_bert_adamw_steps_as_torch_adamw_with_exclusions(amsgrad):
    """`BertAdamW` (on torch one fused kernel) takes the steps of
    `torch.optim.AdamW`, Adam's Algorithm 1, with its weight-decay exclusions,
    on every backend. The gradients are small next to epsilon's scale at the
    first steps, where Keras' own `AdamW` (epsilon added to sqrt(v)) moves
    them 5x less."""
    import torch

    assert issubclass(adam_base(keras.optimizers.AdamW), keras.optimizers.AdamW)
    rng = np.random.default_rng(0)
    values = {"kernel": rng.normal(size=(3, 4)), "bias": rng.normal(size=(4,))}
    grads = [{name: rng.normal(size=v.shape) * 10.0 ** -rng.integers(5, 8) for name, v in values.items()}
             for _ in range(4)]
    optimizer = kzoo.BertAdamW(learning_rate=0.1, weight_decay=0.5, amsgrad=amsgrad)
    variables = [keras.Variable(values[n].astype("float32"), name=n) for n in values]
    reference = {n: torch.nn.Parameter(torch.tensor(values[n], dtype=torch.float32)) for n in values}
    torch_optimizer = torch.optim.AdamW([{"params": [reference["kernel"]], "weight_decay": 0.5},
                                         {"params": [reference["bias"]], "weight_decay": 0.0}],
                                        lr=0.1, eps=1e-7, amsgrad=amsgrad)
    for step in grads:
        optimizer.apply([keras.ops.convert_to_tensor(step[v.name], "float32") for v in variables], variables)
        for name, parameter in reference.items():
            parameter.grad = torch.tensor(step[name], dtype=torch.float32)
        torch_optimizer.step()
    for variable in variables:
        np.testing.assert_allclose(keras.ops.convert_to_numpy(variable), reference[variable.name].detach().numpy(),
                                   rtol=1e-4, atol=1e-5)  # float32 1 - beta_2^t: ~1e-5 relative


def test_bert_adamw_reads_its_schedule_once_a_step_not_once_a_variable():
    """Keras' `AdamW` evaluates a learning-rate schedule again for each
    weight-decayed variable (1 + 10 calls here); `adam_base`'s step once (torch: Keras'
    own, once for the decay and once for the fused step)."""
    calls = []

    class Counted(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            calls.append(step)
            return keras.ops.cast(0.1 / (1.0 + keras.ops.cast(step, "float32")), "float32")

    variables = [keras.Variable(np.ones((2, 2), "float32"), name="kernel") for _ in range(10)]
    optimizer = kzoo.BertAdamW(learning_rate=Counted(), weight_decay=0.01)
    optimizer.build(variables)
    optimizer.apply([keras.ops.ones((2, 2)) for _ in variables], variables)
    assert len(calls) == (2 if BACKEND == "torch" else 1), len(calls)
    # The step taken: the decay, then Adam's first step, lr * g / (|g| + eps) = 0.1 each.
    np.testing.assert_allclose(keras.ops.convert_to_numpy(variables[0]), 1 - 0.1 * 0.01 - 0.1, rtol=1e-6)


def test_generate_through_inference_function_matches_eager_search_and_records_no_graph():
    """`Transformer.generate` runs its search through `inference_function`
    (XLA on TensorFlow and JAX, no autograd on torch): same tokens as the
    plain search, before and after new weights, and on torch an output that holds no autograd graph."""
    from kzoo.backend import inference_function

    keras.utils.set_random_seed(0)
    model = kzoo.Transformer(vocabulary_size=30, num_layers=1, hidden_dim=8, intermediate_dim=16,
                             num_heads=2)
    source = np.array([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]], "int32")
    outputs = []
    for step in range(2):
        if step:  # new weights reach the compiled search: none is baked in at its trace
            model.set_weights([w + np.random.default_rng(1).normal(0, 0.5, w.shape) for w in model.get_weights()])
        fast = model.generate(source, beam_size=2, max_length=6)
        plain = model.generate(source, beam_size=2, max_length=6, compiled=False)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(fast), keras.ops.convert_to_numpy(plain))
        outputs.append(keras.ops.convert_to_numpy(fast))
    assert not np.array_equal(*outputs)  # the new weights change the search's answer
    if BACKEND == "torch":
        assert not fast.requires_grad
        assert not inference_function(model, lambda: model.encode(source))().requires_grad


@pytest.mark.skipif(BACKEND != "tensorflow", reason="Keras builds the optimizer before the step on JAX and torch")
@pytest.mark.parametrize("model_class", ["task", "backbone"])
def test_first_fit_traces_its_step_once_on_tensorflow(model_class):
    """Keras' TensorFlow trainer builds the optimizer inside the first traced
    step (without a tf.distribute strategy), and TensorFlow then traced the
    step twice; kzoo builds it before (`build_optimizer_before_fit`)."""
    features, labels = masked_lm_batch()
    model = kzoo.BertMaskedLM(kzoo.BertBackbone(**TINY))
    if model_class == "backbone":
        model = kzoo.Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8, intermediate_dim=16, num_heads=2)
        features = {"encoder_token_ids": np.ones((4, 6), "int32"), "decoder_token_ids": np.ones((4, 5), "int32")}
        labels = np.ones((4, 5), "int32")
    # Without XLA: a tf.function traces the same either way, and the XLA compile
    # of each trace doubled the test's CPU.
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=False)
    calls, train_step = [], model.train_step
    model.train_step = lambda data: calls.append(1) or train_step(data)
    model.fit(features, labels, batch_size=2, epochs=1, verbose=0)
    assert len(calls) == 1
    assert model.optimizer.built


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's tf.function tracing counter")
def test_several_models_predicting_log_no_retracing_warning(monkeypatch):
    import logging

    monkeypatch.setenv("KZOO_XLA_ON_TENSORFLOW", "0")  # the warning counts traces, compiled or not

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"a good bad film plot very the is".split()]
    texts = ["a good film", "bad plot", "the plot is very good", "film"]
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("tensorflow").addHandler(handler)
    try:
        backbone = dict(TINY, vocabulary_size=len(vocabulary))
        models = [kzoo.BertClassifier(kzoo.BertBackbone(**backbone), num_classes=2,
                                      preprocessor=kzoo.BertTokenizer(vocabulary)) for _ in range(5)]
        for count in (2, 3):  # a new length: each model's predict function traces again, relaxed
            for model in models:
                model.predict(texts[:count], verbose=0)
    finally:
        logging.getLogger("tensorflow").removeHandler(handler)
    # Without kzoo.backend.without_retracing_warning: "5 out of the last 5 calls to
    # <function ...one_step_on_data_distributed> triggered tf.function retracing" (keras 3.15.1).
    assert [r.getMessage() for r in records if "retracing" in r.getMessage()] == []


@pytest.mark.skipif(BACKEND != "torch", reason="torch's small-batch traces (kzoo.backend.torch.TracedCalls)")
def test_small_batches_traced_on_torch_predict_as_eager_and_follow_the_weights():
    import torch

    from kzoo.backend.torch import TRACED_POSITIONS

    model, texts = text_classifier()
    eager = model.predict(texts, verbose=0)  # first sight of the shapes: eager
    traces = model.predict_function.traced.traces
    assert list(traces.values()) == [None]
    for _ in range(2):  # the second time traced, then the trace reused
        np.testing.assert_allclose(model.predict(texts, verbose=0), eager, atol=1e-6, rtol=0)
    (trace,) = traces.values()
    assert isinstance(trace, torch.jit.ScriptModule)
    one = [model.predict([text], verbose=0) for text in texts for _ in range(2)][1::2]  # batch of one, traced
    np.testing.assert_allclose(np.concatenate(one), eager, atol=1e-6, rtol=0)

    def eager_predictions():  # traces forgotten: the shapes' first sight runs eagerly
        traces.clear()
        return model.predict(texts, verbose=0)

    model.set_weights([w * 1.5 for w in model.get_weights()])  # in place: the trace reads the new values
    changed = model.predict(texts, verbose=0)
    assert any(t is trace for t in traces.values()) and np.abs(changed - eager).max() > 1e-3
    np.testing.assert_allclose(eager_predictions(), changed, atol=1e-6, rtol=0)
    model.predict(texts, verbose=0)  # traced again

    model.backbone.enable_lora(2)  # new variables: traced again, LoRA's path included
    lora_b = [v for v in model.backbone.weights if "lora_kernel_b" in v.path][0]
    lora_b.assign(np.full(lora_b.shape, 30.0, "float32"))
    with_lora = model.predict(texts, verbose=0)
    assert np.abs(with_lora - changed).max() > 1e-5  # a stale trace would give `changed` to 1e-6
    np.testing.assert_allclose(eager_predictions(), with_lora, atol=1e-6, rtol=0)

    big = ["very " * 40] * (TRACED_POSITIONS // 16 + 1)  # more positions than traced: eager only
    for _ in range(2):
        model.predict(big, batch_size=len(big), verbose=0)
    assert all(leaves[0][1][0] != len(big) for leaves, _ in traces)


@pytest.mark.skipif(BACKEND != "jax", reason="JAX's predict step without donated variables (kzoo.backend.jax)")
def test_predict_on_jax_leaves_the_variables_in_place_and_follows_them():
    model, texts = text_classifier()

    def keras_own():  # Keras' predict_on_batch, the variables donated to the step and written back
        model.jit_compile = False
        try:
            return model.predict(texts, verbose=0)
        finally:
            model.jit_compile = True

    values = [v.value for v in model.trainable_variables]
    first = model.predict(texts, verbose=0)
    assert all(v.value is value for v, value in zip(model.trainable_variables, values))  # neither donated nor rewritten
    np.testing.assert_allclose(first, keras_own(), atol=1e-6, rtol=0)
    np.testing.assert_allclose(model.predict([texts[0]], verbose=0), first[:1], atol=1e-6, rtol=0)

    model.set_weights([w * 1.5 for w in model.get_weights()])
    changed = model.predict(texts, verbose=0)
    assert np.abs(changed - first).max() > 1e-3
    np.testing.assert_allclose(changed, keras_own(), atol=1e-6, rtol=0)
    model.backbone.enable_lora(2)  # new variables: the step traced again, LoRA's path included
    lora_b = [v for v in model.backbone.weights if "lora_kernel_b" in v.path][0]
    lora_b.assign(np.full(lora_b.shape, 30.0, "float32"))
    with_lora = model.predict(texts, verbose=0)
    assert np.abs(with_lora - changed).max() > 1e-5
    np.testing.assert_allclose(with_lora, keras_own(), atol=1e-6, rtol=0)


@pytest.mark.skipif(BACKEND != "torch", reason="torch's decoder-step traces (kzoo.backend.torch.TracedCalls)")
def test_decoder_steps_traced_on_torch_translate_as_eager_and_follow_the_weights():
    import torch

    model = kzoo.Transformer(vocabulary_size=40, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             max_sequence_length=32, dropout=0.0)
    model.set_weights([np.random.default_rng(3).normal(0.0, 1.0, w.shape).astype("float32") for w in model.get_weights()])
    sources = np.random.default_rng(4).integers(4, 40, (3, 6)).astype("int32")

    def eager(beam_size):  # the encoding and every step through Keras' layers
        traced = {name: model.__dict__.pop(name) for name in ("_decoder_steps", "_encoder_caches")}
        try:
            model.__dict__.update(_decoder_steps=model.next_token_logits, _encoder_caches=model._encoder_caches)
            return keras.ops.convert_to_numpy(model.generate(sources, beam_size=beam_size))
        finally:
            model.__dict__.update(traced)

    for beam_size in (1, 3):
        tokens = keras.ops.convert_to_numpy(model.generate(sources, beam_size=beam_size))
        assert (tokens[:, 10:] != 0).any()  # over 10 steps, all but the first traced
        np.testing.assert_array_equal(tokens, eager(beam_size))
    for name in ("_decoder_steps", "_encoder_caches"):
        assert any(isinstance(trace, torch.jit.ScriptModule) for trace in model.__dict__[name].traces.values())
    before = keras.ops.convert_to_numpy(model.generate(sources, beam_size=3))
    model.set_weights([w * 0.5 for w in model.get_weights()])  # in place: the traces read the new values
    after = keras.ops.convert_to_numpy(model.generate(sources, beam_size=3))
    assert not np.array_equal(after, before)
    np.testing.assert_array_equal(after, eager(3))


def test_decoder_steps_traced_on_torch_give_the_eager_logits_and_caches():
    """The traced step (its cache written in place) against Keras' layers step
    by step: the same logits within 1e-5 and the same caches."""
    if BACKEND != "torch":
        pytest.skip("torch's decoder-step traces (kzoo.backend.torch.TracedCalls)")
    from kzoo.backend import decoder_steps

    model = kzoo.Transformer(vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             max_sequence_length=32, dropout=0.0)
    sources = np.random.default_rng(4).integers(4, 40, (3, 6)).astype("int32")
    traced = decoder_steps(model, model.next_token_logits)
    for _ in range(2):  # seen once, then traced (the encoder's caches too)
        traced(keras.ops.full((3,), 2, "int32"), model.initial_cache(sources, 8), keras.ops.convert_to_tensor(0))
    caches = {"eager": model.initial_cache(sources, 8), "traced": model.initial_cache(sources, 8)}
    encoded = model._encoder_caches(keras.ops.convert_to_tensor(sources))  # through Keras' layers
    assert np.abs(keras.ops.convert_to_numpy(encoded["cross_key_0"])).max() > 0.1
    for key, value in encoded.items():
        np.testing.assert_allclose(keras.ops.convert_to_numpy(caches["traced"][key]),
                                   keras.ops.convert_to_numpy(value), atol=1e-5, rtol=0)
    tokens = np.random.default_rng(5).integers(4, 40, (8, 3)).astype("int32")
    for index in range(8):
        step = {}
        for name, function in (("eager", model.next_token_logits), ("traced", traced)):
            logits, caches[name] = function(tokens[index], caches[name], keras.ops.convert_to_tensor(index))
            step[name] = keras.ops.convert_to_numpy(logits)
        assert np.abs(step["eager"]).max() > 0.1
        np.testing.assert_allclose(step["traced"], step["eager"], atol=1e-5, rtol=0)
    for key, value in caches["eager"].items():
        np.testing.assert_allclose(keras.ops.convert_to_numpy(caches["traced"][key]),
                                   keras.ops.convert_to_numpy(value), atol=1e-5, rtol=0)


def test_cache_writes_and_attention_give_keras_results():
    """`write_cache` and `cache_attention` (on torch in place, over the written
    slots, heads first in memory) against `ops.slice_update` and
    `ops.dot_product_attention` over the written slots."""
    from kzoo.backend import attention_layout, cache_attention, search_loop, write_cache

    rng = np.random.default_rng(0)
    keys, values = (rng.normal(size=(2, 5, 2, 4)).astype("float32") for _ in range(2))
    update, query = (rng.normal(size=(2, 1, 2, 4)).astype("float32") for _ in range(2))
    cache = attention_layout(keras.ops.convert_to_tensor(keys))
    outside = write_cache(cache, keras.ops.convert_to_tensor(update), 2)  # a caller's cache: left as it was
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(cache), keys)
    with search_loop():  # a search's own caches: in place on torch
        written = write_cache(cache, keras.ops.convert_to_tensor(update), keras.ops.convert_to_tensor(2))
    expected = keys.copy()
    expected[:, 2:3] = update
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(outside), expected)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(written), expected)
    if BACKEND == "torch":
        import torch

        assert written is cache and written.transpose(1, 2).is_contiguous()  # in place, heads first
        assert outside is not cache and outside.transpose(1, 2).is_contiguous()
        recorded = torch.tensor(update, requires_grad=True)
        with search_loop():
            again = write_cache(written, recorded * 2.0, 3)
        assert again is not written and np.array_equal(written.detach().numpy(), expected)  # autograd: a copy
        assert again.requires_grad
    mask = keras.ops.convert_to_tensor(np.arange(5) < 3)[None, None, None, :]
    value_cache = attention_layout(keras.ops.convert_to_tensor(values))
    for length in (3, keras.ops.convert_to_tensor(3)):
        got = cache_attention(keras.ops.convert_to_tensor(query), written, value_cache, mask, 0.5, length)
        want = keras.ops.dot_product_attention(query, expected[:, :3], values[:, :3], scale=0.5)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want),
                                   atol=1e-6, rtol=0)


def test_cache_rows_take_the_written_slots_into_freed_buffers():
    """`cache_rows` gives `ops.take`'s rows (slots after `length` are zeros);
    on torch it refills the caches it freed, in their layout; `take_rows` is
    `ops.take` in the input's layout."""
    from kzoo.backend import attention_layout, cache_rows, take_rows

    rng = np.random.default_rng(1)
    values = rng.normal(size=(3, 6, 2, 4)).astype("float32")
    values[:, 2:] = 0.0
    rows = np.array([2, 0, 0], "int32")
    cache = attention_layout(keras.ops.convert_to_tensor(values))
    take = cache_rows()
    first = take(cache, keras.ops.convert_to_tensor(rows), 2)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(first), values[rows])
    second = take(first, keras.ops.convert_to_tensor(rows), 3)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(second), values[rows][rows])
    tiled = take_rows(attention_layout(keras.ops.convert_to_tensor(values)), keras.ops.convert_to_tensor([1, 1, 2]))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(tiled), values[[1, 1, 2]])
    if BACKEND == "torch":
        assert second is cache  # the buffer the first call freed
        assert all(t.transpose(1, 2).is_contiguous() for t in (first, second, tiled))


@pytest.mark.parametrize("head_dims", [{}, {"key_dim": 4, "value_dim": 6}], ids=["fused", "explicit"])
def test_generate_moving_written_slots_only_keeps_the_beams(head_dims):
    """`generate`'s beam search moves only the self-attention slots written so
    far and keeps the encoder's keys and values: the tokens of `beam_search`
    moving every cache tensor, on the fused and the explicit attention path."""
    from kzoo.models.transformer.beam_search import beam_search

    model = kzoo.Transformer(vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             max_sequence_length=32, dropout=0.0, **head_dims)
    rng = np.random.default_rng(5)
    for variable in model.weights:
        if "norm" not in variable.path:  # unit LayerNorms: random ones make every step's token the same
            variable.assign(rng.normal(0.0, 0.5, variable.shape).astype("float32"))
    sources = np.random.default_rng(4).integers(4, 40, (3, 6)).astype("int32")
    tokens = keras.ops.convert_to_numpy(model.generate(sources, beam_size=3, max_length=12))
    assert len(np.unique(tokens)) >= 3 and len(np.unique(tokens[0])) >= 2
    cache = model.initial_cache(sources, 12)
    everything = beam_search(model.next_token_logits, cache, keras.ops.full((3,), 2, "int32"), end_id=3,
                             max_length=12, beam_size=3, length_penalty=0.6)
    np.testing.assert_array_equal(tokens, keras.ops.convert_to_numpy(everything))


def test_cross_entropy_equals_numpys_log_softmax_and_has_its_gradient():
    """Both forms (`log_softmax` on torch, `logsumexp` elsewhere) give NumPy's
    log-softmax cross-entropy on wide logits, plain and smoothed, and the
    smoothed loss has the gradient softmax - q (q: the smoothed target distribution)."""
    from kzoo.backend import cross_entropy

    rng = np.random.default_rng(0)
    logits = rng.normal(0, 30, (3, 5, 50)).astype("float32")  # far from 0: the forms must be stable
    labels = rng.integers(0, 50, (3, 5)).astype("int32")
    shifted = logits.astype("float64") - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(cross_entropy(logits, labels)), nll, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(cross_entropy(logits, labels, 0.1)),
                               0.9 * nll - 0.1 * log_probs.mean(-1), rtol=1e-5, atol=1e-4)

    def loss(z):
        return keras.ops.sum(cross_entropy(z, labels, 0.1))

    q = np.full(logits.shape, 0.1 / 50) + 0.9 * (np.arange(50) == labels[..., None])
    expected = np.exp(log_probs) - q
    if BACKEND == "jax":
        import jax

        gradient = np.asarray(jax.grad(loss)(logits))
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        z = tf.constant(logits)
        with tf.GradientTape() as tape:
            tape.watch(z)
            value = loss(z)
        gradient = tape.gradient(value, z).numpy()
    else:
        import torch

        z = torch.tensor(logits, requires_grad=True)
        loss(z).backward()
        gradient = z.grad.numpy()
    np.testing.assert_allclose(gradient, expected, atol=1e-6)
