"""The learning-rate schedule (eq. 3) and Adam settings (sec. 5.3) of the Transformer."""

import os

import keras
import numpy as np
import pytest

import kzoo
from kzoo.models.transformer.transformer_optimizer import transformer_optimizer
from kzoo.models.transformer.transformer_schedule import TransformerSchedule


def paper_rate(step, d_model=512, warmup=4000):
    """eq. 3 at the paper's (1-based) step."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


# The paper's step -> lrate for d_model 512, warmup 4000, worked out by hand:
# 512^-0.5 = 0.0441942, 4000^-1.5 = 3.95285e-6, 4000^-0.5 = 0.0158114.
HAND_COMPUTED = {
    1: 0.0441942 * 3.95285e-6,  # 1.74693e-7: warmup branch
    100: 0.0441942 * 100 * 3.95285e-6,  # 1.74693e-5
    4000: 0.0441942 * 0.0158114,  # 6.98771e-4: both branches meet, the peak
    4001: 0.0441942 * 4001**-0.5,  # 6.98684e-4: decay branch
    100000: 0.0441942 * 100000**-0.5,  # 1.39754e-4
}


@pytest.mark.parametrize("step", sorted(HAND_COMPUTED))
def test_rate_at_paper_steps(step):
    schedule = TransformerSchedule(hidden_dim=512, warmup_steps=4000)
    # Keras passes the 0-based iteration; the paper's step k is iteration k - 1.
    rate = float(schedule(step - 1))
    np.testing.assert_allclose(rate, HAND_COMPUTED[step], rtol=1e-5)
    np.testing.assert_allclose(rate, paper_rate(step), rtol=1e-6)


def test_iteration_zero_is_the_papers_first_step():
    schedule = TransformerSchedule(hidden_dim=512, warmup_steps=4000)
    rate = float(schedule(0))
    assert np.isfinite(rate)
    np.testing.assert_allclose(rate, 1.746928e-7, rtol=1e-6)


def test_peak_at_warmup_steps():
    schedule = TransformerSchedule(hidden_dim=512, warmup_steps=4000, scale=2.0)
    iterations = np.arange(0, 20000, dtype="float32")
    rates = keras.ops.convert_to_numpy(schedule(iterations))
    assert int(np.argmax(rates)) == 3999  # the paper's step 4000
    np.testing.assert_allclose(rates.max(), 2.0 * (512 * 4000) ** -0.5, rtol=1e-6)
    assert np.all(np.diff(rates[:3999]) > 0) and np.all(np.diff(rates[4000:]) < 0)


def test_config_round_trip_and_serialization():
    schedule = TransformerSchedule(hidden_dim=1024, warmup_steps=8000, scale=0.5)
    assert schedule.get_config() == {"hidden_dim": 1024, "warmup_steps": 8000, "scale": 0.5,
                                   "gradient_accumulation_steps": 1}
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, TransformerSchedule)
    assert restored.get_config() == schedule.get_config()
    np.testing.assert_allclose(float(restored(123)), 0.5 * 1024**-0.5 * 124 * 8000**-1.5, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs", [{"hidden_dim": 0}, {"hidden_dim": 512, "warmup_steps": 0}, {"hidden_dim": 512, "scale": -1.0}]
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="positive hidden_dim, warmup_steps and scale"):
        TransformerSchedule(**kwargs)


def _schedule_config(optimizer):
    """The optimizer's learning rate as it is saved: a registered TransformerSchedule."""
    saved = optimizer.get_config()["learning_rate"]
    assert saved["registered_name"] == "kzoo>TransformerSchedule"
    return saved["config"]


def test_optimizer_has_the_papers_adam_settings():
    optimizer = transformer_optimizer()
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert _schedule_config(optimizer) == {"hidden_dim": 512, "warmup_steps": 4000, "scale": 1.0,
                                              "gradient_accumulation_steps": 1}
    overridden = transformer_optimizer(hidden_dim=64, warmup_steps=10, beta_2=0.997, global_clipnorm=1.0)
    assert (overridden.beta_2, overridden.global_clipnorm) == (0.997, 1.0)
    with pytest.raises(ValueError, match="sets learning_rate"):
        transformer_optimizer(learning_rate=1e-3)


def test_optimizer_serialization_keeps_the_schedule():
    optimizer = transformer_optimizer(hidden_dim=256, warmup_steps=100, scale=2.0)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert _schedule_config(restored) == {"hidden_dim": 256, "warmup_steps": 100, "scale": 2.0,
                                             "gradient_accumulation_steps": 1}
    assert (restored.beta_1, restored.beta_2, restored.epsilon) == (0.9, 0.98, 1e-9)
    _ = restored.iterations.assign(99)
    np.testing.assert_allclose(float(restored.learning_rate), 2.0 * 256**-0.5 * 100**-0.5, rtol=1e-6)


def _tiny_model(optimizer):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, kernel_initializer="ones")])
    model.compile(optimizer=optimizer, loss="mse")
    return model


def test_schedule_drives_compiled_training(tmp_path):
    # Adam's first update moves every weight with a non-zero gradient by
    # lr(0) · m̂ / (sqrt(v̂) + ε) = lr(0) · sign(g) (ε = 1e-9 is negligible).
    model = _tiny_model(transformer_optimizer(hidden_dim=4, warmup_steps=10))
    x, y = np.array([[1.0, -2.0, 0.5]], "float32"), np.array([[5.0, -5.0]], "float32")
    before = model.get_weights()
    model.fit(x, y, epochs=1, batch_size=1, verbose=0)
    step_size = np.abs(model.get_weights()[0] - before[0])
    np.testing.assert_allclose(step_size, 4**-0.5 * 10**-1.5, rtol=1e-4)  # 0.0158114
    model.fit(x, y, epochs=4, batch_size=1, verbose=0)
    assert int(model.optimizer.iterations) == 5
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 0.5 * 6 * 10**-1.5, rtol=1e-6)

    # A saved compiled model comes back with the same schedule and step.
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert _schedule_config(restored.optimizer) == {"hidden_dim": 4, "warmup_steps": 10, "scale": 1.0,
                                                        "gradient_accumulation_steps": 1}
    assert int(restored.optimizer.iterations) == 5
    np.testing.assert_allclose(float(restored.optimizer.learning_rate), 0.5 * 6 * 10**-1.5, rtol=1e-6)


def test_transformer_adam_steps_as_torch_adam():
    """`transformer_optimizer`'s Adam (on torch one fused kernel) takes the steps of
    `torch.optim.Adam`, Algorithm 1, on every backend, with gradients small next to
    epsilon's scale, where Keras' `Adam` (epsilon added to sqrt(v)) moves less."""
    import torch

    rng = np.random.default_rng(0)
    start = rng.normal(size=(3, 4))
    grads = [rng.normal(size=start.shape) * 10.0 ** -rng.integers(5, 8) for _ in range(4)]
    optimizer = transformer_optimizer(hidden_dim=16, warmup_steps=2, epsilon=1e-7)
    assert type(keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))) is kzoo.TransformerAdam
    variable = keras.Variable(start.astype("float32"))
    reference = torch.nn.Parameter(torch.tensor(start, dtype=torch.float32))
    torch_optimizer = torch.optim.Adam([reference], lr=1.0, betas=(0.9, 0.98), eps=1e-7)
    for step, gradient in enumerate(grads):
        for group in torch_optimizer.param_groups:
            group["lr"] = 16**-0.5 * min((step + 1) ** -0.5, (step + 1) * 2**-1.5)  # eq. 3
        optimizer.apply([keras.ops.convert_to_tensor(gradient, "float32")], [variable])
        reference.grad = torch.tensor(gradient, dtype=torch.float32)
        torch_optimizer.step()
    moved = np.abs(start - keras.ops.convert_to_numpy(variable))
    assert moved.min() > 0.05  # four real steps, not damped by epsilon
    np.testing.assert_allclose(keras.ops.convert_to_numpy(variable), reference.detach().numpy(), rtol=1e-4, atol=1e-5)
