"""kzoo.BertTextEmbedder's shorter, smaller and prompted embeddings: `truncate_dim` and
`kzoo.MatryoshkaLoss` (Kusupati et al. 2022), `precision` (int8 / binary codes), prompts
(`encode_query` / `encode_document`), and hard negatives mined with the model. Parity with
sentence-transformers itself is in tests/checkpoints/test_sentence_transformers.py."""

import keras
import numpy as np
import pytest

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone, topic_sentences

PROMPTS = {"query": "query : ", "document": "passage : "}


@pytest.fixture(scope="module")
def embedder():
    keras.utils.set_random_seed(0)
    return kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=kzoo.BertTokenizer(VOCABULARY), prompts=PROMPTS)


@pytest.fixture(scope="module")
def texts():
    return topic_sentences(12, seed=5)[0]


def _mnrl(anchors, candidates, scale=20.0):
    """The in-batch loss in NumPy: softmax over scaled cosines, target the own positive."""
    def unit(v):
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    scores = scale * unit(anchors) @ unit(candidates).T
    scores -= scores.max(1, keepdims=True)
    log_softmax = scores - np.log(np.exp(scores).sum(1, keepdims=True))
    return -log_softmax[np.arange(len(anchors)), np.arange(len(anchors))].mean()


def test_matryoshka_loss_is_the_weighted_sum_over_widths():
    rng = np.random.default_rng(0)
    anchors, positives = rng.normal(size=(2, 4, 16)).astype("float32")
    stacked = np.stack([anchors, positives], axis=1).reshape(8, 16)  # each example's texts together
    loss = kzoo.MatryoshkaLoss(kzoo.MultipleNegativesRankingLoss(), [16, 8, 4], [1.0, 0.5, 0.25])
    expected = sum(w * _mnrl(anchors[:, :d], positives[:, :d]) for d, w in ((16, 1.0), (8, 0.5), (4, 0.25)))
    np.testing.assert_allclose(float(loss(np.zeros(4), stacked)), expected, rtol=1e-5)
    restored = kzoo.MatryoshkaLoss.from_config(loss.get_config())
    assert (restored.matryoshka_dims, restored.matryoshka_weights) == ([16, 8, 4], [1.0, 0.5, 0.25])
    assert restored.loss.scale == 20.0
    np.testing.assert_allclose(float(restored(np.zeros(4), stacked)), expected, rtol=1e-5)


def test_truncated_and_quantized_encodings(embedder, texts):
    full = embedder.encode(texts, verbose=0)
    short = embedder.encode(texts, verbose=0, truncate_dim=8)
    np.testing.assert_allclose(short, full[:, :8] / np.linalg.norm(full[:, :8], axis=1, keepdims=True), atol=1e-6)
    ranges = kzoo.quantization_ranges(full)
    np.testing.assert_array_equal(embedder.encode(texts, verbose=0, precision="int8"),
                                  kzoo.quantize_embeddings(full, "int8", ranges))
    np.testing.assert_array_equal(embedder.encode(texts, verbose=0, truncate_dim=8, precision="ubinary"),
                                  np.packbits(short > 0, axis=1))
    # search: texts embedded with their prompts, truncated, then searched as codes and rescored.
    queries = texts[:3]
    scores, indices = embedder.search(queries, texts, top_k=4, truncate_dim=8, precision="int8")
    q = embedder.encode_query(queries, verbose=0, truncate_dim=8)
    c = embedder.encode_document(texts, verbose=0, truncate_dim=8)
    ranges = kzoo.quantization_ranges(c)
    expected = kzoo.semantic_search(q, kzoo.quantize_embeddings(c, "int8", ranges), top_k=4, precision="int8",
                                    ranges=ranges)
    np.testing.assert_array_equal(indices, expected[1])
    np.testing.assert_allclose(scores, expected[0], atol=1e-6)


def test_prompts_go_before_the_texts(embedder, texts):
    plain = embedder.encode(["query : " + t for t in texts[:3]] + ["passage : " + texts[0]], verbose=0)
    np.testing.assert_allclose(embedder.encode_query(texts[:3], verbose=0), plain[:3], atol=1e-6)
    np.testing.assert_allclose(embedder.encode_document(texts[:1], verbose=0), plain[3:], atol=1e-6)
    np.testing.assert_allclose(embedder.encode(texts[:1], prompt_name="document", verbose=0), plain[3:], atol=1e-6)
    np.testing.assert_allclose(embedder.encode_query(texts[:1], prompt="", verbose=0),
                               embedder.encode(texts[:1], verbose=0), atol=1e-6)
    config = embedder.get_config()
    assert (config["prompts"], config["default_prompt_name"]) == (PROMPTS, None)
    restored = kzoo.BertTextEmbedder.from_config(config)
    assert restored.prompts == PROMPTS


def test_bad_input_is_refused_before_any_work(embedder, texts):
    with pytest.raises(ValueError, match="truncate_dim must be a positive int at most the embeddings' width of 32"):
        embedder.encode(texts, truncate_dim=33)
    with pytest.raises(ValueError, match="precision must be one of"):
        embedder.encode(texts, precision="int4")
    with pytest.raises(ValueError, match="No prompt named 'title'"):
        embedder.encode(texts, prompt_name="title")
    with pytest.raises(ValueError, match="A prompt .* goes before raw texts"):
        embedder.encode_query({"token_ids": [[2, 7, 3]]})
    with pytest.raises(ValueError, match="default_prompt_name 'q' is not one of the prompts"):
        kzoo.BertTextEmbedder(embedder.backbone, prompts=PROMPTS, default_prompt_name="q")
    with pytest.raises(ValueError, match="int8 codes of fewer than 2 texts need ranges"):
        embedder.encode(texts[:1], precision="int8")
    with pytest.raises(ValueError, match=r"matryoshka_dims \[64\] exceed the embeddings' width of 32"):
        embedder.compile(loss=kzoo.MatryoshkaLoss(kzoo.MultipleNegativesRankingLoss(), [64, 32]))
    with pytest.raises(ValueError, match="one weight per width"):
        kzoo.MatryoshkaLoss(kzoo.MultipleNegativesRankingLoss(), [32, 16], [1.0])
    for queries, corpus, message in ((texts, [], "the corpus is empty: there is nothing to search"),
                                     ([], texts, "queries are empty: there is nothing to search for"),
                                     (texts, np.zeros((0, 32), "float32"), "the corpus is empty"),
                                     ({"token_ids": []}, texts, "queries are empty"),
                                     (texts, np.ones(32, "float32"), r"Embeddings are a 2-D array .* shape \(32,\)")):
        with pytest.raises(ValueError, match=message):
            embedder.search(queries, corpus)
    with pytest.raises(ValueError, match="truncate_dim must be a positive int at most the embeddings' width of 32"):
        embedder.search(texts, np.ones((3, 32), "float32"), truncate_dim=48)
    with pytest.raises(ValueError, match="Codes cannot be truncated"):
        embedder.search(texts[:1], embedder.encode(texts, precision="binary", verbose=0), truncate_dim=8)


def test_matryoshka_training_shortens_useful_embeddings():
    """Fine-tuning with the Matryoshka loss at 32, 16 and 8 dimensions: the loss falls by
    at least a third, and the in-batch loss of the 8-dimensional embeddings falls too."""
    keras.utils.set_random_seed(0)
    embedder = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    rng = np.random.default_rng(0)
    anchors = topic_sentences(32, seed=2)[0]
    positives = [" ".join(rng.permutation(text.split())) for text in anchors]

    def short_loss():
        a, p = (embedder.encode(x, verbose=0, truncate_dim=8) for x in (anchors, positives))
        return np.mean([_mnrl(a[i: i + 8], p[i: i + 8]) for i in range(0, 32, 8)])

    before = short_loss()
    embedder.compile(optimizer=keras.optimizers.Adam(1e-3),
                     loss=kzoo.MatryoshkaLoss(kzoo.MultipleNegativesRankingLoss(), [32, 16, 8]))
    history = embedder.fit((anchors, positives), batch_size=8, epochs=6, verbose=0).history["loss"]
    assert history[-1] < 2 / 3 * history[0], history
    assert short_loss() < 0.8 * before, (before, short_loss())


def test_mined_negatives_train(embedder, texts):
    queries = texts[:6]
    positives = [" ".join(reversed(t.split())) for t in queries]
    anchors, kept, negatives = kzoo.mine_hard_negatives(embedder, queries, positives, corpus=texts[6:],
                                                        num_negatives=2)
    assert len(anchors) == len(kept) == len(negatives) == 12
    assert all(n not in (p, a) for a, p, n in zip(anchors, kept, negatives))
    scores = kzoo.cosine_similarity(embedder.encode_query(anchors[:2], verbose=0),
                                    embedder.encode_document(negatives[:2], verbose=0)).diagonal()
    assert scores[0] >= scores[1] - 1e-6  # best first
    history = embedder.fit((anchors, kept, negatives), batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
