"""kzoo.BertFeatureExtractor (BERT sec. 5.3, Table 7): each strategy against the backbone's hidden states."""

import keras
import numpy as np
import pytest

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, assert_preset_round_trip, tiny_backbone

INPUTS = {
    "token_ids": np.array([[2, 30, 31, 3, 0], [2, 25, 3, 0, 0]]),
    "segment_ids": np.zeros((2, 5), "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]),
}


@pytest.fixture(scope="module")
def backbone_and_states():
    keras.utils.set_random_seed(0)
    backbone = tiny_backbone(num_layers=4, hidden_dim=16)
    states = backbone(INPUTS, return_hidden_states=True)["hidden_states"]
    return backbone, [keras.ops.convert_to_numpy(s) for s in states]


@pytest.mark.parametrize(
    "strategy,expected",
    [
        ("embeddings", lambda h: h[0]),
        ("second_to_last_hidden", lambda h: h[3]),
        ("last_hidden", lambda h: h[4]),
        ("sum_last_four", lambda h: h[1] + h[2] + h[3] + h[4]),
        ("concat_last_four", lambda h: np.concatenate(h[1:], axis=-1)),
        ("sum_all", lambda h: h[1] + h[2] + h[3] + h[4]),
        ("hidden_states", lambda h: np.stack(h, axis=1)),
    ],
)
def test_strategies_match_the_hidden_states(backbone_and_states, strategy, expected):
    backbone, states = backbone_and_states
    extractor = kzoo.BertFeatureExtractor(backbone, strategy=strategy)
    np.testing.assert_allclose(extractor.predict(INPUTS, verbose=0), expected(states), atol=1e-5)


def test_raw_text_frozen_and_preset_round_trip(backbone_and_states, tmp_path):
    backbone, _ = backbone_and_states
    extractor = kzoo.BertFeatureExtractor(backbone, preprocessor=kzoo.BertTokenizer(VOCABULARY))
    assert extractor.trainable_weights == []  # the feature-based approach does not fine-tune
    features = extractor.predict(["the song was good"], verbose=0)
    assert features.shape == (1, 32, 64)  # max_sequence_length, 4H
    assert_preset_round_trip(extractor, ["the song was good", "a goal"], tmp_path)


def test_errors():
    with pytest.raises(ValueError, match="Unknown strategy 'mean'"):
        kzoo.BertFeatureExtractor(tiny_backbone(), strategy="mean")
    with pytest.raises(ValueError, match="at least 4 layers"):
        kzoo.BertFeatureExtractor(tiny_backbone(num_layers=2))
