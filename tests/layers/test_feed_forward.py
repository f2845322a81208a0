import numpy as np
import pytest
from keras import ops

from kzoo.layers import FeedForward, get_activation
from tests.layers import numpy_reference as ref
from tests.test_case import run_layer_test, to_numpy

ACTIVATION_NAMES = ["relu", "gelu", "gelu_approximate"]

# A grid that covers the negative tail, the bend around 0 and the linear tail.
GRID = np.linspace(-6.0, 6.0, 241).astype("float32")


@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
def test_layer_checks(activation, tmp_path):
    run_layer_test(
        FeedForward,
        {"intermediate_dim": 32, "activation": activation},
        {"inputs": np.random.rand(2, 5, 8).astype("float32")},
        expected_output_shape=(2, 5, 8),
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
def test_activation_matches_closed_form(activation):
    expected = ref.ACTIVATIONS[activation](GRID.astype("float64"))
    actual = to_numpy(get_activation(activation)(ops.convert_to_tensor(GRID)))
    np.testing.assert_allclose(actual, expected, atol=1e-6, rtol=1e-5)


def test_closed_forms_spot_values():
    # Known values, so the references themselves are checked: Phi(1) = 0.841344746...
    np.testing.assert_allclose(ref.gelu_exact(np.array([1.0, -1.0, 0.0])),
                               [0.8413447460685429, -0.15865525393145707, 0.0], atol=1e-12)
    np.testing.assert_allclose(ref.relu(np.array([-2.0, 0.0, 3.0])), [0.0, 0.0, 3.0], atol=0)


def test_exact_and_tanh_gelu_differ():
    exact = to_numpy(get_activation("gelu")(ops.convert_to_tensor(GRID)))
    approximate = to_numpy(get_activation("gelu_approximate")(ops.convert_to_tensor(GRID)))
    difference = np.max(np.abs(exact.astype("float64") - approximate))
    # Different functions: up to ~4.7e-4 apart near |x| = 2.7 (PITFALLS: "GELU variant").
    assert difference > 1e-4
    assert difference < 1e-3
    # ... and each matches its own closed form, not the other one.
    assert np.max(np.abs(exact - ref.gelu_tanh(GRID))) > 1e-4
    assert np.max(np.abs(approximate - ref.gelu_exact(GRID))) > 1e-4


@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
def test_matches_numpy_eq2(activation):
    x = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
    layer = FeedForward(intermediate_dim=16, activation=activation, kernel_initializer="zeros")
    layer.build(x.shape)
    ref.randomize_weights(layer, seed=2, scale=0.5)
    assert [tuple(v.shape) for v in layer.weights] == [(8, 16), (16,), (16, 8), (8,)]
    np.testing.assert_allclose(to_numpy(layer(x)), ref.feed_forward(layer, x), atol=1e-5, rtol=0)


def test_positions_are_independent():
    # Eq. 2 is applied "to each position separately and identically".
    x = np.random.default_rng(3).normal(size=(2, 5, 8)).astype("float32")
    layer = FeedForward(intermediate_dim=16)
    full = to_numpy(layer(x))
    for position in range(5):
        single = to_numpy(layer(x[:, position : position + 1]))
        np.testing.assert_allclose(single[:, 0], full[:, position], atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ["swish", "gelu_new", "GELU", ""])
def test_unknown_activation_names_the_options(name):
    with pytest.raises(ValueError) as info:
        get_activation(name)
    message = str(info.value)
    assert repr(name) in message
    for option in ACTIVATION_NAMES:
        assert repr(option) in message
    with pytest.raises(ValueError, match="gelu_approximate"):
        FeedForward(intermediate_dim=4, activation=name)
