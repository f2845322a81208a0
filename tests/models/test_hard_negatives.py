"""`kzoo.mine_hard_negatives` against sentence-transformers' `mine_hard_negatives` (top
sampling, triplets) on the same embeddings: both run over a stub model whose vectors are
fixed, so the comparison is of the mining itself (the embedder's own vectors are tested
against sentence-transformers in tests/checkpoints/test_sentence_transformers.py)."""

import sys
import types

import numpy as np
import pytest

import kzoo

pytestmark = pytest.mark.backend_independent  # NumPy on the host over fixed vectors: no backend runs it
RNG = np.random.default_rng(0)
CORPUS = [f"document {i}" for i in range(30)]
QUERIES = [f"query {i}" for i in range(8)]
VECTORS = {text: v / np.linalg.norm(v) for text, v in zip(CORPUS + QUERIES, RNG.normal(size=(38, 6)).astype("float32"))}
# Query 0 has two positives; documents 0-8 are positives, the rest only corpus.
PAIRS = [(QUERIES[0], CORPUS[0]), (QUERIES[0], CORPUS[1])] + [(q, CORPUS[i + 1]) for i, q in enumerate(QUERIES[1:], 1)]
OPTIONS = [
    {},
    {"range_min": 2, "range_max": 12, "num_negatives": 4},
    {"absolute_margin": 0.0},
    {"relative_margin": 0.05, "num_negatives": 5},
    {"max_score": 0.5, "min_score": -0.5, "num_negatives": 2},
]


class _Vectors:
    """Both libraries' model interface over VECTORS."""

    def encode_query(self, texts, **options):
        return np.stack([VECTORS[t] for t in texts])

    encode_document = encode_query


def _sentence_transformers_mining(monkeypatch, options):
    torch = pytest.importorskip("torch")
    hard_negatives = pytest.importorskip("sentence_transformers.util.hard_negatives")
    pandas = pytest.importorskip("pandas")
    from sentence_transformers.util import cos_sim, pairwise_cos_sim  # noqa: PLC0415

    class Dataset(dict):  # the little of `datasets.Dataset` the function reads (datasets is not installed)
        column_names = property(lambda self: list(self))
        from_dict = classmethod(lambda cls, data: cls(data))
        __len__ = lambda self: len(next(iter(self.values())))  # noqa: E731
        to_pandas = lambda self: pandas.DataFrame(dict(self))  # noqa: E731

    class Model(_Vectors):
        device = torch.device("cpu")
        similarity = staticmethod(lambda a, b: cos_sim(a, b))
        similarity_pairwise = staticmethod(lambda a, b: pairwise_cos_sim(torch.as_tensor(a), torch.as_tensor(b)))

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(Dataset=Dataset))
    monkeypatch.setattr(hard_negatives, "is_datasets_available", lambda: True)
    data = Dataset(query=[q for q, _ in PAIRS], answer=[p for _, p in PAIRS])
    mined = hard_negatives.mine_hard_negatives(data, Model(), corpus=CORPUS, verbose=False, **options)
    return mined["query"], mined["answer"], mined["negative"]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda options: ",".join(options) or "defaults")
def test_equal_to_sentence_transformers(monkeypatch, options):
    ours = kzoo.mine_hard_negatives(_Vectors(), [q for q, _ in PAIRS], [p for _, p in PAIRS], corpus=CORPUS, **options)
    theirs = _sentence_transformers_mining(monkeypatch, options)
    assert ours == tuple(theirs)
    assert len(ours[0]) >= len(PAIRS)  # not vacuous: negatives were found
    for anchor, positive, negative in zip(*ours):
        assert negative not in {p for q, p in PAIRS if q == anchor}


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="two non-empty lists of the same length"):
        kzoo.mine_hard_negatives(_Vectors(), QUERIES[:2], CORPUS[:1])
    with pytest.raises(ValueError, match="range_max must exceed range_min by at least num_negatives"):
        kzoo.mine_hard_negatives(_Vectors(), QUERIES[:2], CORPUS[:2], range_min=5, range_max=6, num_negatives=2)
    with pytest.raises(ValueError, match="num_negatives must be an int of at least 1"):
        kzoo.mine_hard_negatives(_Vectors(), QUERIES[:2], CORPUS[:2], num_negatives=0)
    with pytest.raises(ValueError, match="corpus must be a list of str"):
        kzoo.mine_hard_negatives(_Vectors(), QUERIES[:2], CORPUS[:2], corpus="document 3")
    with pytest.raises(ValueError, match="corpus is empty: there is nothing to mine negatives from"):
        kzoo.mine_hard_negatives(_Vectors(), QUERIES[:2], CORPUS[:2], corpus=[])
    # Each query's positives are the whole corpus: refused before anything is embedded (the stub has no vectors).
    with pytest.raises(ValueError, match=r"\(corpus and positives: 1 distinct\) are all positives"):
        kzoo.mine_hard_negatives(object(), ["query 0", "query 1"], [CORPUS[0]] * 2)
