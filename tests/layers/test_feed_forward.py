import numpy as np
import pytest
from keras import ops

from kzoo.layers import FeedForward, get_activation
from tests.test_case import run_layer_test, to_numpy


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_approximate"])
def test_layer_checks(activation, tmp_path):
    run_layer_test(
        FeedForward,
        {"intermediate_dim": 32, "activation": activation},
        {"inputs": np.random.rand(2, 5, 8).astype("float32")},
        expected_output_shape=(2, 5, 8),
        tmp_path=tmp_path,
    )
