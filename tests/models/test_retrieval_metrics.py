"""Retrieval metrics (kzoo.models.retrieval_metrics) and kzoo.RetrievalEvaluator: equal to
sentence-transformers' InformationRetrievalEvaluator (v6.2) on the same inputs, within 1e-6."""

import keras
import numpy as np
import pytest

import kzoo
from kzoo.callbacks.best_preset import _direction
from kzoo.models.retrieval_metrics import retrieval_inputs
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone, topic_sentences

TOLERANCE = 1e-6
KS = {"accuracy_at_k": (1, 3, 40), "precision_recall_at_k": (1, 2, 5, 40), "mrr_at_k": (1, 10),
      "ndcg_at_k": (3, 10, 40), "map_at_k": (2, 100)}  # 40 and 100: more than the 30 documents


def _evaluator_metrics(queries, corpus, relevant_docs, model, **options):
    """The real evaluator's `cosine_...` metrics, unprefixed."""
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator  # noqa: PLC0415

    evaluator = InformationRetrievalEvaluator(queries, corpus, relevant_docs, write_csv=False, **KS, **options)
    return {name.removeprefix("cosine_"): value for name, value in evaluator(model).items()}


class _ScoreTable:
    """A stand-in model for the evaluator: a text's "embedding" is its row or column of a score table."""

    def __init__(self, rows, columns):
        import torch  # noqa: PLC0415

        self.torch, self.rows, self.columns = torch, rows, columns
        self.model_card_data = type("Card", (), {"set_evaluation_metrics": lambda *args: None})()

    def encode_query(self, texts, **options):
        return self.torch.tensor([self.rows[t] for t in texts])

    def encode_document(self, texts, **options):
        return self.torch.tensor([self.columns[t] for t in texts])


@pytest.mark.backend_independent  # NumPy on the host
def test_metrics_on_a_score_matrix_equal_the_evaluator_ties_included():
    pytest.importorskip("sentence_transformers")
    import torch  # noqa: PLC0415

    rng = np.random.default_rng(0)
    corpus = {f"d{i}": f"d{i}" for i in rng.permutation(30)}  # ids whose sort order ("d10" < "d2") decides ties
    queries = {f"q{i}": f"q{i}" for i in range(12)}
    relevant_docs = {f"q{i}": set(rng.choice(list(corpus), size=rng.integers(1, 6), replace=False)) for i in range(10)}
    relevant_docs["q3"].add("d99")  # relevant but not in the corpus: counts, never found
    relevant_docs["q11"] = set()  # q10 and q11: no relevant document, skipped
    table = np.round(rng.normal(size=(12, 30)), 1).astype("float32")  # many equal scores
    rows, columns = {q: i for i, q in enumerate(queries)}, {d: int(d[1:]) for d in corpus}
    expected = _evaluator_metrics(queries, corpus, relevant_docs, _ScoreTable(rows, columns), corpus_chunk_size=7,
                                  score_functions={"cosine": lambda q, d: torch.tensor(table)[q][:, d]})
    query_ids, corpus_ids, relevant, tie_order = retrieval_inputs(queries, corpus, relevant_docs)
    scores = table[[rows[q] for q in query_ids]][:, [columns[d] for d in corpus_ids]]
    found = kzoo.retrieval_metrics(scores, relevant, tie_order, **KS)
    assert found.keys() == expected.keys() and len(found) == 18
    for name in expected:
        assert found[name] == pytest.approx(expected[name], abs=TOLERANCE), name
    assert 0.05 < found["mrr@10"] < 0.95 and found["recall@40"] < 1.0  # d99 is never found


@pytest.mark.backend_independent
def test_each_metric_by_hand():
    rankings, relevant = [[4, 1, 2, 0], [0, 3, 2, 1]], [{1, 0}, {2}]
    assert kzoo.accuracy_at_k(rankings, relevant, k=1) == 0.0
    assert kzoo.accuracy_at_k(rankings, relevant, k=3) == 1.0
    assert kzoo.precision_at_k(rankings, relevant, k=2) == pytest.approx((1 / 2 + 0) / 2)
    assert kzoo.recall_at_k(rankings, relevant, k=3) == pytest.approx((1 / 2 + 1) / 2)
    assert kzoo.mrr_at_k(rankings, relevant, k=3) == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert kzoo.mrr_at_k(rankings, relevant, k=2) == pytest.approx(1 / 4)  # the second query's hit is past k
    ideal_two = 1 + 1 / np.log2(3)
    assert kzoo.ndcg_at_k(rankings, relevant, k=4) == pytest.approx(
        ((1 / np.log2(3) + 1 / np.log2(5)) / ideal_two + (1 / np.log2(4)) / 1) / 2)
    assert kzoo.map_at_k(rankings, relevant, k=4) == pytest.approx(((1 / 2 + 2 / 4) / 2 + 1 / 3) / 2)
    assert kzoo.map_at_k(rankings, relevant, k=1) == 0.0
    assert kzoo.map_at_k([[1, 4, 0, 2]], [{1, 0, 2}], k=2) == pytest.approx(1 / 2)  # over min(k, 3 relevant)


@pytest.mark.backend_independent
def test_bad_inputs_are_refused_in_kzoo_words():
    with pytest.raises(ValueError, match="have no relevant document"):
        kzoo.mrr_at_k([[0, 1]], [set()])
    with pytest.raises(ValueError, match="one row per query"):
        kzoo.ndcg_at_k([[0, 1]], [{0}, {1}])
    with pytest.raises(ValueError, match="k must be a positive int"):
        kzoo.recall_at_k([[0, 1]], [{0}], k=0)
    with pytest.raises(ValueError, match="scores hold NaN"):
        kzoo.retrieval_metrics([[0.1, np.nan]], [{0}])
    with pytest.raises(ValueError, match="one set per query"):
        kzoo.retrieval_metrics([[0.1, 0.2]], [{0}, {1}])
    with pytest.raises(ValueError, match="unknown argument"):
        kzoo.retrieval_metrics([[0.1, 0.2]], [{0}], mrr_at=(10,))
    with pytest.raises(ValueError, match="No query has a relevant document"):
        kzoo.retrieval_metrics([[0.1, 0.2]], [set()])
    with pytest.raises(ValueError, match="corpus is empty"):
        kzoo.RetrievalEvaluator({"q": "a"}, {}, {"q": {"d"}})
    with pytest.raises(ValueError, match="is a string; each query's relevant documents are a set"):
        kzoo.RetrievalEvaluator({"q": "a"}, {"d": "b"}, {"q": "d"})
    with pytest.raises(ValueError, match="queries must be a dict"):
        kzoo.evaluate_retrieval(None, ["a"], {"d": "b"}, {"q": {"d"}})
    evaluator = kzoo.RetrievalEvaluator({"q": "a"}, {"d": "b"}, {"q": {"d"}})
    evaluator.set_model(keras.Sequential())
    with pytest.raises(ValueError, match="embeds texts with the model's `encode`"):
        evaluator.on_train_begin()
    assert _direction("val_ndcg@10", "auto") == _direction("val_mrr@10", "auto") == _direction("val_map@100", "auto") == 1


def test_callback_logs_the_evaluators_numbers_each_epoch(tmp_path):
    """The callback's metrics of the trained embedder are the evaluator's for the same model
    loaded in sentence-transformers; they reach `fit`'s history and the callbacks after it."""
    st = pytest.importorskip("sentence_transformers")
    keras.utils.set_random_seed(0)
    embedder = kzoo.BertTextEmbedder(tiny_backbone(hidden_dim=16), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    texts = topic_sentences(24, seed=3)[0]
    queries = {f"q{i}": " ".join(text.split()[:3]) for i, text in enumerate(texts[:8])}
    corpus = {f"d{i}": text for i, text in enumerate(texts)}
    relevant_docs = {f"q{i}": {f"d{i}"} for i in range(8)}
    evaluator = kzoo.RetrievalEvaluator(queries, corpus, relevant_docs, **KS)
    seen = []
    reader = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(logs.get("val_ndcg@10")))
    history = embedder.fit((texts[8:], texts[8:]), batch_size=8, epochs=2, verbose=0, callbacks=[evaluator, reader])
    assert [m["ndcg@10"] for m in evaluator.history] == history.history["val_ndcg@10"] == seen
    assert len(seen) == 2 and {f"val_{name}" for name in evaluator.history[0]} <= history.history.keys()
    embedder.save_to_preset(tmp_path / "hf", format="huggingface")
    expected = _evaluator_metrics(queries, corpus, relevant_docs, st.SentenceTransformer(str(tmp_path / "hf"),
                                                                                           device="cpu"))
    for name in expected:
        assert evaluator.history[-1][name] == pytest.approx(expected[name], abs=TOLERANCE), name
    assert 0.0 < expected["mrr@10"] < 1.0
