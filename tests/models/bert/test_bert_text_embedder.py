"""kzoo.BertTextEmbedder (Sentence-BERT sec. 3 pooling) and its contrastive loss and search."""

import keras
import numpy as np
import pytest

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, assert_preset_round_trip, tiny_backbone, topic_sentences

INPUTS = {
    "token_ids": np.array([[2, 30, 31, 3, 0, 0], [2, 25, 3, 0, 0, 0], [2, 26, 27, 28, 29, 3]]),
    "segment_ids": np.zeros((3, 6), "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]]),
}


def _mean(h, m):
    return (h * m[..., None]).sum(1) / m.sum(1, keepdims=True)


POOLINGS = {
    "mean": _mean,
    "cls": lambda h, m: h[:, 0],
    "max": lambda h, m: np.where(m[..., None] > 0, h, -np.inf).max(1),
    "mean_sqrt_len_tokens": lambda h, m: (h * m[..., None]).sum(1) / np.sqrt(m.sum(1, keepdims=True)),
}


@pytest.fixture(scope="module")
def backbone():
    keras.utils.set_random_seed(0)
    return tiny_backbone()


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("pooling", list(POOLINGS))
def test_pooling_over_the_real_tokens(backbone, pooling, normalize):
    states = keras.ops.convert_to_numpy(backbone(INPUTS)["sequence_output"])
    expected = POOLINGS[pooling](states, INPUTS["padding_mask"].astype("float32"))
    if normalize:
        expected = expected / np.linalg.norm(expected, axis=1, keepdims=True)
    embedder = kzoo.BertTextEmbedder(backbone, pooling=pooling, normalize=normalize)
    np.testing.assert_allclose(embedder.predict(INPUTS, verbose=0), expected, atol=1e-5)


def test_raw_text_in_caller_order_whatever_the_batching(backbone, tmp_path):
    embedder = kzoo.BertTextEmbedder(backbone, preprocessor=kzoo.BertTokenizer(VOCABULARY))
    texts = topic_sentences(37, seed=1)[0] + ["", "song " * 40]  # an empty text, one cut at 32 tokens
    vectors = embedder.encode(texts, batch_size=8, verbose=0)
    assert vectors.shape == (39, 32) and vectors.dtype == np.float32
    one_by_one = np.concatenate([embedder.encode([text], verbose=0) for text in texts[::7]])
    np.testing.assert_allclose(vectors[::7], one_by_one, atol=1e-5)  # padding cut per batch changes nothing
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert_preset_round_trip(embedder, texts[:5], tmp_path)
    restored = keras.saving.load_model(_saved(embedder, tmp_path))
    assert (restored.pooling, restored.normalize) == ("mean", True)
    np.testing.assert_allclose(restored.encode(texts[:5], verbose=0), vectors[:5], atol=1e-6)


def _saved(model, tmp_path):
    path = str(tmp_path / "embedder.keras")
    model.save(path)
    return path


def test_the_pooler_is_not_trained(backbone):
    embedder = kzoo.BertTextEmbedder(backbone)
    trained = {v.path for v in embedder.trainable_weights}
    assert not any(path.startswith("pooled_dense") for path in trained)
    assert len(trained) == len(backbone.trainable_weights) - 2


def test_loss_is_softmax_over_scaled_cosines():
    rng = np.random.default_rng(0)
    anchors, positives, negatives = (rng.normal(size=(4, 5)).astype("float32") for _ in range(3))

    def unit(v):
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    scores = 20.0 * unit(anchors) @ unit(np.concatenate([positives, negatives])).T  # (4, 8)
    log_softmax = scores - np.log(np.exp(scores - scores.max(1, keepdims=True)).sum(1, keepdims=True)) \
        - scores.max(1, keepdims=True)
    expected = -log_softmax[np.arange(4), np.arange(4)].mean()
    loss = kzoo.MultipleNegativesRankingLoss()
    stacked = np.stack([anchors, positives, negatives], axis=1).reshape(12, 5)  # each example's texts together
    found = float(loss(np.zeros(4), stacked))
    np.testing.assert_allclose(found, expected, rtol=1e-5)
    restored = kzoo.MultipleNegativesRankingLoss.from_config(kzoo.MultipleNegativesRankingLoss(scale=5).get_config())
    assert restored.scale == 5.0


@pytest.mark.once  # trains to a stated accuracy: one backend per run (tests/conftest.py)
def test_contrastive_fine_tuning_brings_pairs_together():
    """Anchors and their positives (the same words shuffled) in batches of 8:
    the in-batch loss falls by at least half and the positives rank first."""
    keras.utils.set_random_seed(0)
    embedder = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    rng = np.random.default_rng(0)
    anchors = topic_sentences(64, seed=2)[0]
    positives = [" ".join(rng.permutation(text.split())) for text in anchors]
    before = embedder.evaluate((anchors, positives), batch_size=8, verbose=0)
    embedder.compile(optimizer=keras.optimizers.Adam(1e-3))
    history = embedder.fit((anchors, positives), batch_size=8, epochs=8, verbose=0)
    after = embedder.evaluate((anchors, positives), batch_size=8, verbose=0)
    assert after < 0.5 * before, (before, history.history["loss"], after)
    _, indices = embedder.search(anchors, positives, top_k=1)
    assert np.mean(indices[:, 0] == np.arange(64)) >= 0.5


@pytest.mark.once  # the data path (labels, splits, input forms) runs the same TensorFlow and NumPy code on every backend; each backend's own steps: test_task and the container-loss test
def test_validation_pairs_as_written():
    keras.utils.set_random_seed(0)
    embedder = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    texts = topic_sentences(16, seed=4)[0]
    for held_out in ((texts[:4], texts[4:8]), ((texts[:4], texts[4:8]),)):  # both read as (anchors, positives)
        history = embedder.fit((texts, texts[::-1]), batch_size=4, validation_data=held_out, verbose=0)
        np.testing.assert_allclose(history.history["val_loss"][0],
                                   embedder.evaluate((texts[:4], texts[4:8]), batch_size=4, verbose=0), rtol=1e-5)
    assert "val_loss" in embedder.fit((texts, texts), batch_size=4, validation_split=0.25, verbose=0).history


def test_hard_negatives_and_sample_weights_train():
    keras.utils.set_random_seed(0)
    embedder = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    texts = topic_sentences(12, seed=3)[0]
    history = embedder.fit((texts, texts[::-1], texts[1:] + texts[:1]), sample_weight=np.ones(12), batch_size=4,
                           epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_search_is_exact_with_chunks():
    rng = np.random.default_rng(0)
    queries, corpus = rng.normal(size=(37, 16)), rng.normal(size=(1000, 16))
    scores, indices = kzoo.semantic_search(queries, corpus, top_k=7, query_chunk=10, corpus_chunk=64)
    similarity = kzoo.cosine_similarity(queries, corpus)
    expected = np.argsort(-similarity, axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(similarity, expected, axis=1), atol=1e-6)
    assert kzoo.semantic_search(queries[:2], corpus[:3], top_k=10)[1].shape == (2, 3)


def test_errors(backbone):
    embedder = kzoo.BertTextEmbedder(backbone, preprocessor=kzoo.BertTokenizer(VOCABULARY))
    with pytest.raises(ValueError, match="Unknown pooling 'avg'"):
        kzoo.BertTextEmbedder(backbone, pooling="avg")
    with pytest.raises(ValueError, match="embeds one text per row"):
        embedder.predict((["a"], ["b"]), verbose=0)
    with pytest.raises(ValueError, match="embeds one text per row"):
        embedder.encode((["a"], ["b"]))
    with pytest.raises(ValueError, match=r"\(anchors, positives\) or .* no labels"):
        embedder.fit((["a"], ["b"]), np.array([1]))
    with pytest.raises(ValueError, match="takes no labels"):
        embedder.fit(["a"], ["b"])
    with pytest.raises(ValueError, match="tuple of 4"):
        embedder.fit((["a"], ["b"], ["c"], ["d"]))
    with pytest.raises(ValueError, match="columns of different lengths"):
        embedder.fit((["a", "b"], ["b"]))
    with pytest.raises(ValueError, match="same model: their dimensions differ"):
        kzoo.semantic_search(np.ones((1, 4)), np.ones((2, 8)))
    with pytest.raises(ValueError, match="top_k must be a positive int"):
        kzoo.semantic_search(np.ones((1, 4)), np.ones((2, 4)), top_k=0)


def test_pooling_layer_config_round_trips():
    layer = kzoo.models.bert.bert_text_embedder.SentencePooling("max", normalize=False, name="pool")
    restored = type(layer).from_config(layer.get_config())
    assert (restored.mode, restored.normalize, restored.name, restored.dtype_policy.name) == ("max", False, "pool", "float32")
