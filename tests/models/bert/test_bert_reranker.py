"""kzoo.BertReranker (a cross-encoder, BERT sec. 4.1 Figure 4a with one output): scores equal
sentence-transformers' CrossEncoder.predict within 1e-5 on a checkpoint written here, the
activation read from and written to its config; training on (query, document, label)."""

import json
import types

import keras
import numpy as np
import pytest

import kzoo
from tests.models.bert.checkpoint_fixtures import UNCASED, random_hf_model, write_vocabulary
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone

TOLERANCE = 1e-5
QUERIES = ["is the cafe open today?", "we went to paris", "the old city", "a good story", "the river"]
DOCUMENTS = ["The cafe is open today.", "We went to Berlin and Paris!", "Café music in the old city",
             "it was not bad, quite a good ending", "paris " * 30 + "river"]  # the last cut longest-first


@pytest.fixture(scope="module")
def cross_encoders(tmp_path_factory):
    """Directories a sentence-transformers v6 CrossEncoder saved: its default activation
    (sigmoid), and Identity; each with the CrossEncoder loaded from it."""
    st = pytest.importorskip("sentence_transformers")
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415

    source = tmp_path_factory.mktemp("hf")
    model = random_hf_model(transformers.BertForSequenceClassification, hidden_size=16, intermediate_size=32,
                            num_labels=1)
    model.save_pretrained(source)
    write_vocabulary(source, UNCASED)
    transformers.BertTokenizerFast(vocab=str(source / "vocab.txt"), do_lower_case=True).save_pretrained(source)
    found = {}
    for name, activation in (("sigmoid", None), ("linear", torch.nn.Identity())):
        directory = tmp_path_factory.mktemp(name)
        st.CrossEncoder(str(source), device="cpu", activation_fn=activation).save_pretrained(str(directory))
        found[name] = directory, st.CrossEncoder(str(directory), device="cpu")
    return found


def test_scores_equal_cross_encoder_and_survive_both_round_trips(cross_encoders, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    expected = {}
    for activation, (directory, cross_encoder) in cross_encoders.items():
        reranker = kzoo.BertReranker.from_preset(directory)
        assert reranker.activation == activation
        expected[activation] = cross_encoder.predict(list(zip(QUERIES, DOCUMENTS)))
        scores = reranker.predict_scores((QUERIES, DOCUMENTS), batch_size=2)
        np.testing.assert_allclose(scores, expected[activation], atol=TOLERANCE)
    np.testing.assert_allclose(1 / (1 + np.exp(-expected["linear"])), expected["sigmoid"], atol=TOLERANCE)
    expected = expected["linear"]  # logits: 100 tolerances apart, each far from its sigmoid
    assert np.ptp(expected) > 100 * TOLERANCE and abs(expected - 1 / (1 + np.exp(-expected))).min() > 0.1
    reranker.save_to_preset(tmp_path / "hf", format="huggingface")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["sentence_transformers"] == {"activation_fn": "torch.nn.modules.linear.Identity"}
    assert "problem_type" not in config and config["id2label"] == {"0": "LABEL_0"}
    exported = st.CrossEncoder(str(tmp_path / "hf"), device="cpu")
    np.testing.assert_allclose(exported.predict(list(zip(QUERIES, DOCUMENTS))), expected, atol=TOLERANCE)
    reranker.save_to_preset(tmp_path / "kzoo")
    restored = kzoo.BertReranker.from_preset(tmp_path / "kzoo")
    assert restored.activation == "linear" and restored.get_config()["activation"] == "linear"
    np.testing.assert_allclose(restored.predict_scores((QUERIES, DOCUMENTS)), expected, atol=TOLERANCE)
    scores, indices = restored.rank(QUERIES[0], DOCUMENTS, top_k=3)
    ranked = exported.rank(QUERIES[0], DOCUMENTS, top_k=3)
    assert indices.tolist() == [hit["corpus_id"] for hit in ranked]
    np.testing.assert_allclose(scores, [hit["score"] for hit in ranked], atol=TOLERANCE)


@pytest.mark.once  # reads config files: no backend changes it (the scores are tested on each)
def test_older_records_of_the_activation_are_read(cross_encoders, tmp_path):
    directory, _ = cross_encoders["linear"]
    config = json.loads((directory / "config.json").read_text())
    for key, value in (("sentence_transformers", {"activation_fn": "torch.nn.modules.activation.Tanh"}),
                       ("sbert_ce_default_activation_function", "torch.nn.modules.linear.Identity")):
        (tmp_path / key).mkdir()
        for file in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
            (tmp_path / key / file).write_bytes((directory / file).read_bytes())  # not v6's own files
        (tmp_path / key / "config.json").write_text(json.dumps({**config, key: value}))
    assert kzoo.BertReranker.from_preset(tmp_path / "sentence_transformers").activation == "tanh"  # v4-v5
    assert kzoo.BertReranker.from_preset(tmp_path / "sbert_ce_default_activation_function").activation == "linear"
    config["sentence_transformers"] = {"activation_fn": "torch.nn.modules.activation.GELU"}
    (tmp_path / "sentence_transformers" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="activation must be one of .* got 'torch.nn.modules.activation.GELU'"):
        kzoo.BertReranker.from_preset(tmp_path / "sentence_transformers")


def test_binary_cross_entropy_training_separates_relevant_pairs():
    keras.utils.set_random_seed(0)
    reranker = kzoo.BertReranker(tiny_backbone(hidden_dim=16), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    queries = ["song", "film", "game"] * 4
    documents = ["song songs", "game", "film", "film films", "song", "game"] * 2
    labels = np.array([1, 0, 0, 1, 0, 0] * 2, "float32")
    reranker.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = reranker.fit((queries, documents), labels, batch_size=4, epochs=15, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0], losses
    scores = reranker.predict_scores((queries, documents))
    assert scores[labels == 1].min() > scores[labels == 0].max(), scores


def test_config_round_trip_and_bad_input_refused_in_kzoo_words():
    reranker = kzoo.BertReranker(tiny_backbone(hidden_dim=16), preprocessor=kzoo.BertTokenizer(VOCABULARY),
                                 dropout=0.2, activation="tanh")
    config = reranker.get_config()
    assert (config["dropout"], config["activation"]) == (0.2, "tanh")
    assert kzoo.BertReranker.from_config(config).get_config() == config
    with pytest.raises(ValueError, match="activation must be one of"):
        kzoo.BertReranker(tiny_backbone(hidden_dim=16), activation="softmax")
    with pytest.raises(ValueError, match=r"top_k must be an int in \[1, 2\]"):
        reranker.rank("song", ["song", "film"], top_k=3)
    with pytest.raises(ValueError, match="non-empty list of documents"):
        reranker.rank("song", [])
    with pytest.raises(ValueError, match="takes one query, a str"):
        reranker.rank(["song"], ["song"])
    with pytest.raises(ValueError, match=r"pass a tuple of two lists, \(queries, documents\)"):
        reranker.predict_scores(["song", "film"])
    with pytest.raises(ValueError, match=r"relevances in \[0, 1\]"):
        reranker.fit((["song"], ["film"]), [2.0])
    with pytest.raises(ValueError, match="one relevance in"):
        reranker.fit((["song"], ["film"]), [[0.0, 1.0]])


# === Lists: (query, positive, negatives), the softmax over each query's candidates ===

LIST_QUERIES = ["song", "soup", "goal", "bread"]
# Each positive is "good" (a marker a tiny model learns in a few steps), each negative "bad": a loss
# whose target were not the first candidate would rank them the other way.
LIST_POSITIVES = ["good song band", "good soup", "good goal team", "good bread cheese"]
LIST_NEGATIVES = [["bad team", "bad soup cheese"], ["bad guitar band", "bad match"], ["bad bread", "bad song"],
                  ["bad goal", "bad band"]]


def listwise_reference(logits, m, scale, activation):
    """sentence-transformers' CrossEncoder MultipleNegativesRankingLoss.calculate_loss in NumPy:
    CrossEntropyLoss(scale * activation_fn(logits (B, m)), target 0), per query."""
    scores = scale * activation(np.asarray(logits, "float64").reshape(-1, m))
    shifted = scores - scores.max(axis=1, keepdims=True)
    return np.log(np.exp(shifted).sum(axis=1)) - shifted[:, 0]


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_listwise_loss_and_binary_cross_entropy_equal_numpy():
    logits = np.random.default_rng(0).normal(scale=3.0, size=(12, 1)).astype("float32")  # 4 lists of 3
    for scale, activation, reference in ((10.0, "sigmoid", sigmoid), (1.0, "linear", lambda z: z),
                                         (2.0, "tanh", np.tanh)):
        loss = kzoo.RerankingLoss(scale=scale, activation=activation)
        expected = listwise_reference(logits, 3, scale, reference)
        assert float(loss(np.zeros((4, 3)), logits)) == pytest.approx(expected.mean(), abs=TOLERANCE)
        weights = np.array([1.0, 0.0, 2.0, 0.5], "float32")  # one per query
        weighted = float(loss(np.zeros((4, 3)), logits, sample_weight=weights))
        assert weighted == pytest.approx((weights * expected).sum() / 4, abs=TOLERANCE)  # Keras' sum over batch
    labels = np.array([1, 0, 0.5, 1, 0, 0, 1, 1, 0, 0, 1, 0], "float32")
    z = logits[:, 0].astype("float64")
    expected = -(labels * np.log(sigmoid(z)) + (1 - labels) * np.log(1 - sigmoid(z)))
    for shape in ((12,), (12, 1)):
        assert float(kzoo.RerankingLoss()(labels.reshape(shape), logits)) == pytest.approx(expected.mean(), abs=1e-5)
    accuracy = kzoo.RerankingAccuracy()
    accuracy.update_state(np.zeros((4, 3)), logits)
    listed = logits.reshape(4, 3)
    assert float(accuracy.result()) == pytest.approx(np.mean(listed[:, 0] > listed[:, 1:].max(axis=1)))


@pytest.mark.once  # NumPy against torch: no Keras backend in it (the loss is tested against it on each)
def test_numpy_reference_is_sentence_transformers_multiple_negatives_ranking_loss():
    pytest.importorskip("sentence_transformers")
    import torch  # noqa: PLC0415
    from sentence_transformers.cross_encoder.losses import MultipleNegativesRankingLoss  # noqa: PLC0415

    logits = np.random.default_rng(1).normal(scale=3.0, size=(4, 3))  # (B, m): positive, 2 hard negatives
    columns = [torch.tensor(logits[:, j]) for j in range(3)]  # forward's scores: one tensor per column
    for scale, activation, reference in ((10.0, torch.nn.Sigmoid(), sigmoid), (1.0, None, lambda z: z)):
        owner = types.SimpleNamespace(activation_fn=activation, scale=scale, cross_entropy_loss=torch.nn.CrossEntropyLoss())
        expected = float(MultipleNegativesRankingLoss.calculate_loss(owner, columns, batch_size=4))
        assert listwise_reference(logits.ravel(), 3, scale, reference).mean() == pytest.approx(expected, abs=1e-9)


def test_listwise_fit_lifts_each_positive_above_its_negatives():
    keras.utils.set_random_seed(0)
    reranker = kzoo.BertReranker(tiny_backbone(hidden_dim=16), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    reranker.compile(optimizer=keras.optimizers.Adam(1e-2), loss=kzoo.RerankingLoss(scale=1.0, activation="linear"))
    lists = (LIST_QUERIES, LIST_POSITIVES, LIST_NEGATIVES)
    # The loss fit reports is the NumPy softmax over the pairs' own logits, each list's rows in order.
    before = reranker.evaluate(lists, batch_size=4, verbose=0, return_dict=True)
    queries = [q for q in LIST_QUERIES for _ in range(3)]
    candidates = [c for p, n in zip(LIST_POSITIVES, LIST_NEGATIVES) for c in [p, *n]]
    logits = reranker.predict((queries, candidates), verbose=0)
    assert before["loss"] == pytest.approx(listwise_reference(logits, 3, 1.0, lambda z: z).mean(), abs=TOLERANCE)
    history = reranker.fit(tuple(column * 3 for column in lists), batch_size=4, epochs=10, verbose=0, validation_data=lists)
    losses = history.history["loss"]
    assert losses[-1] < 0.3 * losses[0] and history.history["val_accuracy"][-1] == 1.0, history.history
    scores = reranker.predict_scores((queries, candidates)).reshape(4, 3)
    assert (scores[:, 0] > scores[:, 1:].max(axis=1)).all(), scores


def test_lists_refused_in_kzoo_words():
    reranker = kzoo.BertReranker(tiny_backbone(hidden_dim=16), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    with pytest.raises(ValueError, match="same number of negatives .* got from 1 to 2"):
        reranker.fit((["song", "goal"], ["band", "team"], [["soup"], ["soup", "song"]]))
    with pytest.raises(ValueError, match="at least one negative"):
        reranker.fit((["song"], ["band"], np.zeros((1, 0), dtype=object)))
    with pytest.raises(ValueError, match=r"no labels \(each query's positive is its target\)"):
        reranker.fit((["song"], ["band"], [["soup"]]), [1.0])
    with pytest.raises(ValueError, match="tuple .* is what `fit` and `evaluate`"):
        reranker.predict((["song"], ["band"], [["soup"]]))
    with pytest.raises(ValueError, match="scale must be a positive number"):
        kzoo.RerankingLoss(scale=0)
    with pytest.raises(ValueError, match="activation must be one of"):
        kzoo.RerankingLoss(activation="relu")


def test_rerank_orders_each_querys_candidates_as_rank_does():
    keras.utils.set_random_seed(0)
    reranker = kzoo.BertReranker(tiny_backbone(hidden_dim=16), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    documents = [*LIST_POSITIVES, "bad team"]
    candidates = np.array([[4, 0, 2], [1, 3, 0]])  # a first stage's results: rows of documents
    scores, indices = reranker.rerank(LIST_QUERIES[:2], documents, candidates, top_k=2)
    assert indices.shape == scores.shape == (2, 2) and indices.dtype == np.int64
    for i, query in enumerate(LIST_QUERIES[:2]):
        expected, order = reranker.rank(query, [documents[j] for j in candidates[i]], top_k=2)
        assert indices[i].tolist() == candidates[i][order].tolist() and expected[0] > expected[1]
        np.testing.assert_allclose(scores[i], expected, atol=1e-6)
    for bad, message in (({"top_k": 4}, r"top_k must be an int in \[1, 3\]"),
                         ({"candidates": np.array([[0, 5, 1], [0, 1, 2]])}, "index documents 0 to 4"),
                         ({"candidates": np.array([0, 1])}, r"int array \(queries, c\)"),
                         ({"queries": "song"}, "queries as a list of str"),
                         ({"queries": [], "candidates": candidates[:0]}, "queries as a list of str, not empty"),
                         ({"documents": []}, "documents as a list of str, not empty; got an empty list")):
        arguments = {"queries": LIST_QUERIES[:2], "documents": documents, "candidates": candidates, **bad}
        with pytest.raises(ValueError, match=message):
            reranker.rerank(**arguments)


def test_rerank_interpolates_standardised_logits_with_the_first_stage():
    keras.utils.set_random_seed(0)
    reranker = kzoo.BertReranker(tiny_backbone(hidden_dim=16), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    documents = [*LIST_POSITIVES, "bad team"]
    candidates = np.array([[4, 0, 2, 1], [1, 3, 0, 2]])
    first = np.array([[0.9, 0.5, 0.4, -0.2], [3.0, 1.0, 0.0, -1.0]], "float32")  # any scale: each row standardised
    # A random head scores these pairs within 1e-5 of each other: scaled, they stand far above float noise.
    reranker.logits.kernel.assign(reranker.logits.kernel * 1e4)
    logits = keras.ops.convert_to_numpy(reranker.predict(  # the pairs rerank scores, in its order
        ([query for query in LIST_QUERIES[:2] for _ in range(4)], [documents[j] for j in candidates.ravel()]),
        verbose=0))[:, 0].reshape(2, 4)
    assert np.ptp(logits, axis=1).min() > 1e-2

    def z(rows):
        return (rows - rows.mean(1, keepdims=True)) / rows.std(1, keepdims=True)

    for weight in (0.0, 0.4, 1.0):
        expected = weight * z(logits.astype("float64")) + (1 - weight) * z(first.astype("float64"))
        order = np.argsort(-expected, axis=1, kind="stable")
        scores, indices = reranker.rerank(LIST_QUERIES[:2], documents, candidates, top_k=3, candidate_scores=first,
                                          weight=weight)
        assert indices.tolist() == np.take_along_axis(candidates, order, 1)[:, :3].tolist() and scores.dtype == np.float32
        np.testing.assert_allclose(scores, np.take_along_axis(expected, order, 1)[:, :3], atol=1e-5)
        if weight == 0.0:
            assert indices.tolist() == candidates[:, :3].tolist()  # the first stage's own order
        if weight == 1.0:  # the logits' own order (their sigmoids, about 1 - 1e-9 here, tie in float32)
            assert indices.tolist() == np.take_along_axis(candidates, np.argsort(-logits, 1), 1)[:, :3].tolist()
    arguments = {"queries": LIST_QUERIES[:2], "documents": documents, "candidates": candidates}
    for bad, message in (({"weight": 0.5}, "pass both, or neither"), ({"candidate_scores": first}, "pass both"),
                         ({"candidate_scores": first, "weight": 1.5}, r"a number in \[0, 1\]; got 1.5"),
                         ({"candidate_scores": first, "weight": True}, r"a number in \[0, 1\]"),
                         ({"candidate_scores": first[:, :3], "weight": 0.5}, r"shaped as candidates, \(2, 4\)"),
                         ({"candidate_scores": np.where(first > 2, np.nan, first), "weight": 0.5}, "finite numbers")):
        with pytest.raises(ValueError, match=message):
            reranker.rerank(**arguments, **bad)
