"""Translation quality: corpus BLEU ("Attention Is All You Need", sec. 6.1 and
Table 2 report BLEU) with sacreBLEU, and perplexity (Table 3's PPL column,
per wordpiece).

Pure Python / NumPy: call it on detokenized text
(`TransformerTokenizer.detokenize`), whatever `KERAS_BACKEND` is. During
training, `kzoo.models.transformer.transformer_loss.TokenPerplexity` tracks
the per-token perplexity with padding ignored.
"""

import math

import numpy as np
from sacrebleu.metrics import BLEU


class BleuScore(float):
    """A corpus BLEU score in [0, 100] (sec. 6.1), usable as a float, with
    sacreBLEU's `signature` (the settings that make it comparable: number of
    references, case, tokenization, smoothing, version), the n-gram
    `precisions` (percent) and the `brevity_penalty`.

    >>> score = BleuScore(25.0, "nrefs:1|tok:13a", (60.0, 30.0, 20.0, 10.0), 1.0)
    >>> float(score), score.signature, f"{score:.1f}"
    (25.0, 'nrefs:1|tok:13a', '25.0')
    """

    def __new__(cls, score, signature, precisions, brevity_penalty):
        self = super().__new__(cls, score)
        self.signature = signature
        self.precisions = tuple(float(p) for p in precisions)
        self.brevity_penalty = float(brevity_penalty)
        return self

    def __repr__(self):
        return f"BleuScore({float(self):.2f}, signature={self.signature!r})"


def corpus_bleu(hypotheses, references, tokenize="13a", lowercase=False):
    """sacreBLEU's corpus BLEU of translations against references (sec. 6.1).

    Args:
        hypotheses: list of str. The system's translations, one string per
            sentence (str, bytes, or a numpy / tf.string array of them).
        references: list of str, or list of lists of str. One reference per
            hypothesis, or for several references a sequence per hypothesis,
            each of the same size.
        tokenize: str. sacreBLEU's tokenizer: "13a" (WMT's `mteval-v13a`),
            "intl", "none", ... Defaults to `"13a"`, sacreBLEU's default.
        lowercase: bool. Whether BLEU is case-insensitive. Defaults to `False`.

    Returns:
        A `BleuScore`: a float in [0, 100] with `.signature`, `.precisions`
        and `.brevity_penalty`.

    Example:

    >>> score = corpus_bleu(["the cat sat on the mat"], ["the cat sat on a mat"])
    >>> round(float(score), 2), score.signature
    (53.73, 'nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0')
    >>> round(float(corpus_bleu(["Hallo , Welt !"], ["Hallo, Welt!"])), 6)  # 13a splits punctuation
    100.0
    """
    hypotheses = _strings(hypotheses, "hypotheses")
    reference_rows = _reference_rows(references, len(hypotheses))
    if tokenize not in BLEU.TOKENIZERS:
        raise ValueError(f"Unknown sacreBLEU tokenize={tokenize!r}; use one of {sorted(BLEU.TOKENIZERS)}.")
    bleu = BLEU(tokenize=tokenize, lowercase=lowercase)
    streams = [list(stream) for stream in zip(*reference_rows)]
    result = bleu.corpus_score(hypotheses, streams)
    return BleuScore(result.score, str(bleu.get_signature()), result.precisions, result.bp)


def perplexity(mean_cross_entropy):
    """Perplexity `exp(H)` of a mean per-token cross-entropy H in nats
    (Table 3's PPL: per wordpiece, on the development set). A model that
    spreads its probability evenly over V tokens has perplexity V.

    Args:
        mean_cross_entropy: float. The mean per-token cross-entropy H, in nats.

    Returns:
        float. `exp(H)`.

    Example:

    >>> round(perplexity(math.log(37000)))
    37000
    """
    mean_cross_entropy = float(mean_cross_entropy)
    if not math.isfinite(mean_cross_entropy) or mean_cross_entropy < 0:
        raise ValueError(
            f"perplexity takes a mean cross-entropy in nats (>= 0, finite); got {mean_cross_entropy}."
        )
    return math.exp(mean_cross_entropy)


def _strings(values, name):
    """A list of str from str/bytes sequences, numpy arrays or tf.string tensors."""
    if hasattr(values, "numpy"):
        values = values.numpy()
    if isinstance(values, (str, bytes)):
        raise ValueError(f"`{name}` must be a list of sentences, not a single string; wrap it in a list.")
    values = np.asarray(values, dtype=object).tolist() if isinstance(values, np.ndarray) else list(values)
    out = []
    for value in values:
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if not isinstance(value, str):
            raise ValueError(
                f"`{name}` must hold text (str or UTF-8 bytes); got {type(value).__name__} "
                f"{value!r:.40}. Detokenize token ids first (TransformerTokenizer.detokenize)."
            )
        out.append(value)
    return out


def _reference_rows(references, count):
    """One tuple of references per hypothesis, all of the same size."""
    if hasattr(references, "numpy"):
        references = references.numpy()
    references = list(references) if not isinstance(references, (str, bytes)) else references
    if isinstance(references, (str, bytes)) or len(references) != count:
        size = "a single string" if isinstance(references, (str, bytes)) else f"{len(references)}"
        raise ValueError(
            f"Got {count} hypotheses but {size} references: pass one reference (or one list of "
            "references) per hypothesis."
        )
    rows = [
        tuple(_strings([row] if isinstance(row, (str, bytes)) else row, "references"))
        for row in references
    ]
    if len({len(row) for row in rows}) > 1:
        raise ValueError("Every hypothesis needs the same number of references.")
    return rows
