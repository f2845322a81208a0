"""BLEU (sec. 6.1) against hand-computed n-gram counts and sacreBLEU, and
perplexity (Table 3's PPL) of a uniform model."""

import math

import numpy as np
import pytest
import sacrebleu
import tensorflow as tf

from kzoo.models.transformer.translation_metrics import BleuScore, corpus_bleu, perplexity

data_test = pytest.mark.backend_independent  # plain Python / NumPy: run once (conftest.py)

REFERENCE = "the cat sat on a mat"


@data_test
def test_identical_is_100_and_disjoint_is_0():
    sentences = ["Die Datei wurde gespeichert.", "Kann »%s« nicht öffnen: Zugriff verweigert"]
    assert float(corpus_bleu(sentences, sentences)) == pytest.approx(100.0)
    assert float(corpus_bleu(["x y z w v"], ["a b c d e"])) == 0.0


@data_test
def test_hand_computed_ngram_precisions_and_brevity_penalty():
    # "the cat sat on the mat" vs REFERENCE: clipped 1-grams 5/6 (one "the"),
    # 2-grams 3/5, 3-grams 2/4, 4-grams 1/3; equal lengths, no penalty.
    score = corpus_bleu(["the cat sat on the mat"], [REFERENCE])
    assert float(score) == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25, abs=1e-9)
    assert score.precisions == pytest.approx((500 / 6, 60.0, 50.0, 100 / 3))
    # "the cat sat on the": 4/5, 3/4, 2/3, 1/2 and brevity penalty exp(1 - 6/5).
    short = corpus_bleu(["the cat sat on the"], [REFERENCE])
    assert short.brevity_penalty == pytest.approx(math.exp(1 - 6 / 5))
    assert float(short) == pytest.approx(100 * math.exp(-0.2) * (4 / 5 * 3 / 4 * 2 / 3 * 1 / 2) ** 0.25)
    # Corpus BLEU sums the counts over sentences (it does not average sentence scores).
    both = corpus_bleu(["the cat sat on the mat", "the cat sat on the"], [REFERENCE, REFERENCE])
    expected = 100 * math.exp(1 - 12 / 11) * (9 / 11 * 6 / 9 * 4 / 7 * 2 / 5) ** 0.25
    assert float(both) == pytest.approx(expected)


@data_test
def test_agrees_with_sacrebleu_and_exposes_its_signature():
    hypotheses = ["Die Datei konnte nicht geöffnet werden.", "Speichern unter", "Fehler: %s"]
    references = ["Die Datei kann nicht geöffnet werden.", "Speichern unter …", "Fehler beim Lesen: %s"]
    expected = sacrebleu.corpus_bleu(hypotheses, [references])
    score = corpus_bleu(hypotheses, references)
    assert isinstance(score, BleuScore) and isinstance(score, float)
    assert float(score) == pytest.approx(expected.score, abs=1e-12) and 0 < float(score) < 100
    assert score.signature == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    assert "tok:intl" in corpus_bleu(hypotheses, references, tokenize="intl").signature
    lowercase = corpus_bleu(["HALLO welt, wie geht es"], ["hallo Welt, wie geht es"], lowercase=True)
    assert float(lowercase) == pytest.approx(100.0) and "case:lc" in lowercase.signature
    # Bytes and tf.string tensors (TransformerTokenizer.detokenize output) are text too.
    encoded = tf.constant([h.encode() for h in hypotheses])
    assert float(corpus_bleu(encoded, np.array(references))) == float(score)


@data_test
def test_several_references_per_hypothesis():
    hypotheses = ["the cat sat on the mat"]
    two = corpus_bleu(hypotheses, [(REFERENCE, "the cat sat on the mat")])
    assert float(two) == pytest.approx(100.0) and two.signature.startswith("nrefs:2|")
    with pytest.raises(ValueError, match="same number of references"):
        corpus_bleu(hypotheses * 2, [(REFERENCE,), (REFERENCE, REFERENCE)])


@data_test
def test_errors():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_bleu(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="not a single string"):
        corpus_bleu("a b", ["a b"])
    with pytest.raises(ValueError, match="Detokenize token ids first"):
        corpus_bleu([[5, 6, 7]], ["a"])
    with pytest.raises(ValueError, match="Unknown sacreBLEU tokenize='moses'"):
        corpus_bleu(["a"], ["a"], tokenize="moses")
    with pytest.raises(ValueError, match="mean cross-entropy in nats"):
        perplexity(-1.0)


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    """On every backend: a uniform distribution over V tokens has per-token
    cross-entropy log V (padding left out), so perplexity V."""
    import keras

    vocabulary_size = 37
    labels = np.array([[5, 9, 3, 0, 0], [7, 3, 0, 0, 0]])
    logits = keras.ops.zeros((2, 5, vocabulary_size))
    per_token = keras.ops.convert_to_numpy(
        keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    )
    mean = per_token[labels != 0].mean()
    assert perplexity(mean) == pytest.approx(vocabulary_size, rel=1e-5)
    assert perplexity(0.0) == 1.0
