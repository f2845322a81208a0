"""SQuAD answers from BERT's span logits, and the official SQuAD metrics.

BERT sec. 4.2 (SQuAD v1.1): a start vector S and an end vector E score each
token T_i; the span i..j with the largest S·T_i + E·T_j, j >= i, is the
answer. Sec. 4.3 (SQuAD v2.0): the no-answer score s_null = S·C + E·C at
`[CLS]` competes with the best span ŝ_{i,j}; an answer is predicted when
ŝ_{i,j} > s_null + τ. Decoding runs in NumPy on the logits `predict` returns
per window, with the bookkeeping of
`BertQuestionAnswererPreprocessor.windows` (which example, character offsets,
max-context flags). The metrics are those of SQuAD's `evaluate-v2.0.py`
(which agrees with `evaluate-v1.1.py` on answerable questions).
"""

import collections
import re
import string

import numpy as np

_PUNCTUATION = frozenset(string.punctuation)


def best_span(start_logits, end_logits, max_answer_length=30, candidate_mask=None, start_mask=None):
    """The span (i, j) maximizing S·T_i + E·T_j with i <= j < i + max_answer_length
    in one window (BERT sec. 4.2), searched exactly over all pairs at once.

    Args:
        start_logits: float array of shape `(sequence_length,)`. S·T_i.
        end_logits: float array of shape `(sequence_length,)`. E·T_j.
        max_answer_length: int. The longest span in tokens. Defaults to
            `30`, as in `run_squad.py`.
        candidate_mask: bool array of shape `(sequence_length,)` or None. The
            tokens a span may start and end on (the context tokens:
            `token_start_offsets >= 0`). Defaults to `None`: all.
        start_mask: bool array of shape `(sequence_length,)` or None. Further
            tokens a span may start on (e.g. `token_is_max_context`, as
            `run_squad.py`). Defaults to `None`: all.

    Returns:
        `(i, j, score)`; `(-1, -1, -inf)` when no span is allowed.

    Example (the separate argmaxes would give the invalid span 3..1):

    >>> start, end = np.array([0., 1., 2., 9.]), np.array([0., 8., 1., 2.])
    >>> best_span(start, end)
    (3, 3, 11.0)
    >>> best_span(start, end, start_mask=np.array([True, True, True, False]))
    (1, 1, 9.0)
    """
    start_logits, end_logits = np.asarray(start_logits, np.float64), np.asarray(end_logits, np.float64)
    length = start_logits.shape[0]
    ones = np.ones((length, length), bool)
    allowed = np.triu(ones) & ~np.triu(ones, max_answer_length)  # i <= j < i + max_answer_length
    if candidate_mask is not None:
        candidate_mask = np.asarray(candidate_mask, bool)
        allowed &= candidate_mask[:, None] & candidate_mask[None, :]
    if start_mask is not None:
        allowed &= np.asarray(start_mask, bool)[:, None]
    if not allowed.any():
        return -1, -1, -np.inf
    scores = np.where(allowed, start_logits[:, None] + end_logits[None, :], -np.inf)
    i, j = np.unravel_index(np.argmax(scores), scores.shape)
    return int(i), int(j), float(scores[i, j])


def decode_answers(
    start_logits,
    end_logits,
    windows,
    contexts,
    max_answer_length=30,
    null_score_threshold=None,
    return_scores=False,
):
    """Answer text per example from per-window logits (BERT sec. 4.2 and sec. 4.3).

    For each example, the best span over all its windows (a span may start
    only on a token with its maximal context in that window) is cut from the
    context by character offsets, so casing and accents survive. With
    `null_score_threshold=τ` (SQuAD v2.0), the answer is "" unless the span's
    score exceeds s_null + τ, where s_null = S·C + E·C is the `[CLS]` score,
    the lowest over the example's windows (as `run_squad.py`, which also
    answers when the two sides are equal).

    Args:
        start_logits: float array of shape `(windows, sequence_length)`. S·T_i.
        end_logits: float array of shape `(windows, sequence_length)`. E·T_j.
        windows: dict. The output of `BertQuestionAnswererPreprocessor.windows(x)`
            (`example_index`, `token_start_offsets`, `token_end_offsets`,
            `token_is_max_context`).
        contexts: list of str. The contexts of `x` (or UTF-8 bytes).
        max_answer_length: int. The longest span in tokens. Defaults to `30`.
        null_score_threshold: float or None. τ for SQuAD v2.0. Defaults to
            `None`: always answer (v1.1).
        return_scores: bool. Also return the best span scores and s_null per
            example. Defaults to `False`.

    Returns:
        A list of answer strings, one per context; with `return_scores`,
        `(answers, span_scores, null_scores)` (NumPy arrays for the scores).

    Example: one window, context tokens at positions 1 and 2.

    >>> windows = {"example_index": [0], "token_start_offsets": [[-1, 0, 6, -1]],
    ...            "token_end_offsets": [[-1, 5, 10, -1]], "token_is_max_context": [[0, 1, 1, 0]]}
    >>> start, end = np.array([[3., 2., 1., 0.]]), np.array([[0., 1., 2., 0.]])  # span 1..2: 4, s_null: 3
    >>> decode_answers(start, end, windows, ["Hello Café"])
    ['Hello Café']
    >>> decode_answers(start, end, windows, ["Hello Café"], null_score_threshold=1.0)  # 4 > 3 + 1 fails
    ['']
    """
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    contexts = np.asarray(contexts, object).reshape(-1)
    example_index = np.asarray(windows["example_index"])
    starts = np.asarray(windows["token_start_offsets"])
    ends = np.asarray(windows["token_end_offsets"])
    max_context = np.asarray(windows["token_is_max_context"], bool)
    answers, span_scores, null_scores = [], np.full(len(contexts), -np.inf), np.full(len(contexts), np.inf)
    for example, context in enumerate(contexts):
        context = context.decode("utf-8") if isinstance(context, bytes) else str(context)
        answer = ""
        for w in np.flatnonzero(example_index == example):
            null_scores[example] = min(null_scores[example], start_logits[w, 0] + end_logits[w, 0])
            i, j, score = best_span(
                start_logits[w], end_logits[w], max_answer_length,
                candidate_mask=starts[w] >= 0, start_mask=max_context[w],
            )
            if score > span_scores[example]:
                span_scores[example], answer = score, context[starts[w, i] : ends[w, j]]
        # Sec. 4.3: an answer only when ŝ_ij > s_null + τ.
        no_answer = null_score_threshold is not None and not (
            span_scores[example] > null_scores[example] + null_score_threshold
        )
        answers.append("" if no_answer else answer)
    return (answers, span_scores, null_scores) if return_scores else answers


# === Metrics (SQuAD's official evaluate-v2.0.py) ===


def normalize_answer(s):
    """Lower-case, drop punctuation, the articles a/an/the and extra white
    space, as SQuAD's official evaluation (used for BERT sec. 4.2 Table 2).

    >>> normalize_answer("The  Eiffel-Tower, in Paris!")
    'eiffeltower in paris'
    """
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _ground_truths(ground_truths):
    """The gold answers that normalize to something, or [""] (no answer) as evaluate-v2.0.py."""
    ground_truths = [ground_truths] if isinstance(ground_truths, str) else list(ground_truths)
    return [g for g in ground_truths if normalize_answer(g)] or [""]


def exact_match(prediction, ground_truths):
    """1.0 if the normalized prediction equals a normalized gold answer, else
    0.0 (SQuAD's EM, BERT sec. 4.2 Table 2). `ground_truths` is a string or a
    list; an empty list (or only "") means no answer, matched by "".

    >>> exact_match("the Eiffel Tower.", ["Eiffel Tower", "tower"]), exact_match("", [])
    (1.0, 1.0)
    """
    prediction = normalize_answer(prediction)
    return float(any(prediction == normalize_answer(g) for g in _ground_truths(ground_truths)))


def _f1(prediction, ground_truth):
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(ground_truth).split()
    if not predicted or not gold:  # no answer: right only if both are empty
        return float(predicted == gold)
    same = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction, ground_truths):
    """Token-overlap F1 of the normalized answers, the best over the gold
    answers (SQuAD's F1, BERT sec. 4.2 Table 2); for no answer, 1.0 if both
    are empty, else 0.0.

    >>> round(f1_score("Eiffel Tower in Paris", ["the Eiffel Tower", "Paris"]), 4)
    0.6667
    """
    return max(_f1(prediction, g) for g in _ground_truths(ground_truths))


def squad_metrics(predictions, ground_truths_list):
    """Exact match and F1 in percent over a data set, as SQuAD's official
    `evaluate-v2.0.py` (BERT sec. 4.2 Table 2, sec. 4.3 Table 3).

    Args:
        predictions: list of str. The answers, "" for no answer.
        ground_truths_list: list of str or of lists of str. Per prediction,
            its gold answer(s) (an empty list for an unanswerable question).

    Returns:
        `{"exact_match": float, "f1": float}`, each in [0, 100].

    >>> squad_metrics(["Paris", "the tower", ""], [["Paris"], ["Eiffel Tower"], []])
    {'exact_match': 66.66666666666666, 'f1': 88.88888888888889}
    """
    if len(predictions) != len(ground_truths_list):
        raise ValueError(
            f"Got {len(predictions)} predictions for {len(ground_truths_list)} questions; "
            "pass one prediction (\"\" for no answer) per question."
        )
    if not predictions:
        raise ValueError("squad_metrics needs at least one prediction.")
    pairs = list(zip(predictions, ground_truths_list))
    return {
        "exact_match": 100.0 * float(np.mean([exact_match(p, g) for p, g in pairs])),
        "f1": 100.0 * float(np.mean([f1_score(p, g) for p, g in pairs])),
    }
