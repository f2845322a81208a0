"""SQuAD for BERT (sec. 4.2, 4.3): windows and labels worked out by hand,
character vs byte offsets, span decoding with max context and the no-answer
threshold, the official EM/F1, tf.data use, serialization and errors."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from kzoo import BertTokenizer
from kzoo.models.bert.bert_question_answerer_preprocessor import BertQuestionAnswererPreprocessor
from kzoo.models.bert.bert_squad_metrics import (
    best_span,
    decode_answers,
    exact_match,
    f1_score,
    normalize_answer,
    squad_metrics,
)

pytestmark = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["what", "is", "the", "sky", "blue", "a", "b", "c", "d", "e", "f", "g", "h", "cafe", "uber"]
VOCABULARY = SPECIAL + WORDS  # what=5 is=6 the=7 sky=8 blue=9 a=10 ... h=17 cafe=18 uber=19
ID = {token: i for i, token in enumerate(VOCABULARY)}
CLS, SEP = ID["[CLS]"], ID["[SEP]"]

# Example 0: the question is cut to 3 tokens, leaving 10 - 3 - 3 = 4 context
# tokens per window; 8 context tokens at stride 2 give windows a-d, c-f, e-h.
# The answer "d e" (tokens 3-4) crosses the boundary of the first and last window.
# Example 1: a short context, one window with padding. Example 2: no answer.
QUESTIONS = ["what is the sky", "what is", "what"]
CONTEXTS = ["a b c d e f g h", "sky is blue", "the sky"]
ANSWER_STARTS = [6, 7, -1]
ANSWER_TEXTS = ["d e", "blue", ""]
QUESTION_0 = [CLS, ID["what"], ID["is"], ID["the"], SEP]


def window(context_tokens):
    return QUESTION_0 + [ID[t] for t in context_tokens.split()] + [SEP]


@pytest.fixture(scope="module")
def preprocessor():
    return BertQuestionAnswererPreprocessor(
        BertTokenizer(VOCABULARY), sequence_length=10, document_stride=2, max_question_length=3
    )


def as_lists(tensors):
    return {key: np.asarray(value).tolist() for key, value in tensors.items()}


# === Windows and labels ===


def test_windows_and_labels_by_hand(preprocessor):
    x, y = preprocessor((QUESTIONS, CONTEXTS), (ANSWER_STARTS, ANSWER_TEXTS))
    x, y = as_lists(x), as_lists(y)
    assert set(x) == {"token_ids", "segment_ids", "padding_mask"}
    assert set(y) == {"start_positions", "end_positions"}
    assert x["token_ids"] == [
        window("a b c d"),
        window("c d e f"),
        window("e f g h"),
        [CLS, ID["what"], ID["is"], SEP, ID["sky"], ID["is"], ID["blue"], SEP, 0, 0],
        [CLS, ID["what"], SEP, ID["the"], ID["sky"], SEP, 0, 0, 0, 0],
    ]
    assert x["segment_ids"] == [[0] * 5 + [1] * 5] * 3 + [
        [0, 0, 0, 0, 1, 1, 1, 1, 0, 0],
        [0, 0, 0, 1, 1, 1, 0, 0, 0, 0],
    ]
    assert x["padding_mask"] == [[1] * 10] * 3 + [[1] * 8 + [0] * 2, [1] * 6 + [0] * 4]
    # "d e" is cut by windows 0 and 2: (0, 0); whole in window 1 at positions 6-7.
    # "blue" is context token 2 after [CLS] what is [SEP]: position 6. No answer: 0.
    assert y["start_positions"] == [0, 6, 0, 6, 0]
    assert y["end_positions"] == [0, 7, 0, 6, 0]
    assert tf.convert_to_tensor(y["start_positions"]).dtype == tf.int32


def test_windows_bookkeeping_by_hand(preprocessor):
    w = as_lists(preprocessor.windows((QUESTIONS, CONTEXTS)))
    assert w["example_index"] == [0, 0, 0, 1, 2]
    none = [-1] * 5
    assert w["token_start_offsets"][:3] == [
        none + [0, 2, 4, 6, -1], none + [4, 6, 8, 10, -1], none + [8, 10, 12, 14, -1]
    ]
    assert w["token_end_offsets"][:3] == [
        none + [1, 3, 5, 7, -1], none + [5, 7, 9, 11, -1], none + [9, 11, 13, 15, -1]
    ]
    assert w["token_start_offsets"][3] == [-1, -1, -1, -1, 0, 4, 7, -1, -1, -1]
    # Score min(left, right) + 0.01 * 4 per window: c (token 2) has 2 left / 1 right
    # in window 0 and 0 / 3 in window 1, so it belongs to window 0; d goes to window 1.
    assert w["token_is_max_context"][:3] == [
        [False] * 5 + [True, True, True, False, False],
        [False] * 5 + [False, True, True, False, False],
        [False] * 5 + [False, True, True, True, False],
    ]
    assert w["token_is_max_context"][3] == [False] * 4 + [True] * 3 + [False] * 3
    for key in ("token_ids", "segment_ids", "padding_mask"):
        assert w[key] == as_lists(preprocessor((QUESTIONS, CONTEXTS)))[key]


def test_max_context_tie_goes_to_the_first_window():
    preprocessor = BertQuestionAnswererPreprocessor(BertTokenizer(VOCABULARY), 8, 1, 1)
    w = preprocessor.windows((["what"], ["a b c d e"]))  # windows a-d and b-e
    # c: (left 2, right 1) in window 0 and (1, 2) in window 1, both min 1: window 0.
    assert np.asarray(w["token_is_max_context"])[:, 3:7].astype(int).tolist() == [[1, 1, 1, 0], [0, 0, 1, 1]]


def test_non_ascii_text_before_the_answer():
    # "Café über " is 10 characters but 12 UTF-8 bytes: offsets are characters.
    preprocessor = BertQuestionAnswererPreprocessor(BertTokenizer(VOCABULARY), 16, 2, 4)
    x, y = preprocessor((["what is"], ["Café über blue sky"]), ([10], ["blue"]))
    assert np.asarray(x["token_ids"]).tolist() == [
        [CLS, ID["what"], ID["is"], SEP, ID["cafe"], ID["uber"], ID["blue"], ID["sky"], SEP] + [0] * 7
    ]
    assert (int(y["start_positions"][0]), int(y["end_positions"][0])) == (6, 6)
    w = preprocessor.windows((["what is"], ["Café über blue sky"]))
    assert np.asarray(w["token_start_offsets"])[0, 4:8].tolist() == [0, 5, 10, 15]
    assert np.asarray(w["token_end_offsets"])[0, 4:8].tolist() == [4, 9, 14, 18]
    # Decoding cuts the original text: accents and casing survive.
    start = np.full((1, 16), -5.0)
    end = np.full((1, 16), -5.0)
    start[0, 4], end[0, 5] = 5.0, 5.0
    assert decode_answers(start, end, w, ["Café über blue sky"]) == ["Café über"]
    # An answer with non-ASCII characters itself.
    _, y = preprocessor((["what is"], ["Café über blue sky"]), ([5], ["über"]))
    assert (int(y["start_positions"][0]), int(y["end_positions"][0])) == (5, 5)


def test_empty_context_gives_one_window_and_no_answer(preprocessor):
    w = preprocessor.windows((["what"], [""]))
    assert np.asarray(w["token_ids"]).tolist() == [[CLS, ID["what"], SEP, SEP, 0, 0, 0, 0, 0, 0]]
    assert (np.asarray(w["token_start_offsets"]) == -1).all()
    logits = np.zeros((1, 10))
    assert decode_answers(logits, logits, w, [""]) == [""]


@pytest.fixture(scope="module")
def mapped(preprocessor):
    """What one `dataset.map(preprocessor)` gives per batch: the three examples
    in batches of 2, then a batch whose second answer text is wrong, then one
    whose questions and contexts differ in length. One map for all: each trace
    of the preprocessor (~5,000 graph ops) and its first run cost ~6 s of CPU.
    An error in a map is its batch's; the iterator goes on to the next."""
    good = tf.data.Dataset.from_tensor_slices(((QUESTIONS, CONTEXTS), (ANSWER_STARTS, ANSWER_TEXTS), [1.0, 2.0, 3.0]))
    wrong_answer = tf.data.Dataset.from_tensor_slices(
        ((QUESTIONS, CONTEXTS), (ANSWER_STARTS, ["d e", "sky", ""]), [1.0, 2.0, 3.0])
    )
    wrong_length = good.batch(2).take(1).map(lambda x, y, w: ((x[0], x[1][:1]), y, w))
    iterator = iter(good.batch(2).concatenate(wrong_answer.batch(3)).concatenate(wrong_length).map(preprocessor))
    batches = []
    while True:
        try:
            batches.append(next(iterator))
        except StopIteration:
            return batches
        except tf.errors.InvalidArgumentError as error:
            batches.append(error)


def test_tf_data_map_on_batches(preprocessor, mapped):
    batches = mapped[:2]
    assert [len(x["token_ids"]) for x, _, _ in batches] == [4, 1]  # 3 + 1 windows, then 1
    x, y = preprocessor((QUESTIONS, CONTEXTS), (ANSWER_STARTS, ANSWER_TEXTS))
    for key in x:
        np.testing.assert_array_equal(np.concatenate([b[0][key] for b in batches]), x[key])
    for key in y:
        np.testing.assert_array_equal(np.concatenate([b[1][key] for b in batches]), y[key])
    # Sample weights follow their example's windows.
    assert np.concatenate([b[2] for b in batches]).tolist() == [1.0, 1.0, 1.0, 2.0, 3.0]


def test_tf_data_reports_a_wrong_answer(mapped):
    assert len(mapped) == 4
    assert isinstance(mapped[2], tf.errors.InvalidArgumentError)
    assert "does not match its context" in str(mapped[2])


# === Decoding ===


def brute_force_span(start, end, max_answer_length, start_mask, candidate_mask):
    best = (-1, -1, -np.inf)
    for i, j in itertools.product(range(len(start)), repeat=2):
        ok = i <= j < i + max_answer_length and start_mask[i] and candidate_mask[i] and candidate_mask[j]
        if ok and start[i] + end[j] > best[2]:
            best = (i, j, start[i] + end[j])
    return best


def test_best_span_keeps_j_after_i_and_within_max_answer_length():
    start, end = np.array([0.0, 1.0, 2.0, 9.0]), np.array([0.0, 8.0, 1.0, 2.0])
    assert (np.argmax(start), np.argmax(end)) == (3, 1)  # the separate argmaxes: j < i
    assert best_span(start, end) == (3, 3, 11.0)
    start = np.array([0.0, 4.0, 1.0, 2.0, 0.0, 0.0])
    end = np.array([0.0, 0.0, 1.5, 0.0, 0.0, 5.0])
    assert best_span(start, end, max_answer_length=30) == (1, 5, 9.0)
    assert best_span(start, end, max_answer_length=3) == (3, 5, 7.0)
    assert best_span(start, end, max_answer_length=2) == (1, 2, 5.5)
    assert best_span(start, end, candidate_mask=[0, 1, 1, 1, 1, 0]) == (1, 2, 5.5)
    assert best_span(start, end, candidate_mask=np.zeros(6, bool)) == (-1, -1, -np.inf)


def test_best_span_matches_a_brute_force_search():
    rng = np.random.default_rng(0)
    for _ in range(50):
        start, end = rng.normal(size=(2, 12))
        start_mask, candidate_mask = rng.random((2, 12)) < 0.8
        length = int(rng.integers(1, 6))
        i, j, score = best_span(start, end, length, candidate_mask, start_mask)
        bi, bj, bscore = brute_force_span(start, end, length, start_mask, candidate_mask)
        assert (i, j) == (bi, bj) and score == pytest.approx(bscore)


def test_decoding_across_windows_uses_max_context(preprocessor):
    w = preprocessor.windows((QUESTIONS[:2], CONTEXTS[:2]))
    start, end = np.full((4, 10), -10.0), np.full((4, 10), -10.0)
    start[0, 8] = end[0, 8] = 10.0  # "d" in window 0, where d is not max context
    start[1, 6] = end[1, 7] = 3.0  # "d e" in window 1, d's max-context window
    start[3, 6] = end[3, 6] = 5.0  # "blue" for the second example
    answers, span_scores, null_scores = decode_answers(start, end, w, CONTEXTS[:2], return_scores=True)
    assert answers == ["d e", "blue"]
    assert span_scores.tolist() == [6.0, 10.0]
    assert null_scores.tolist() == [-20.0, -20.0]
    # Without the max-context rule "d" (20.0) would win: the rule is what decides.
    unrestricted = dict(w, token_is_max_context=np.ones((4, 10), bool))
    assert decode_answers(start, end, unrestricted, CONTEXTS[:2])[0] == "d"


def test_no_answer_threshold():
    # One window: [CLS], two context tokens "blue" and "sky"; best span 5.0, s_null 3.0.
    w = {
        "example_index": [0],
        "token_start_offsets": [[-1, 0, 5, -1]],
        "token_end_offsets": [[-1, 4, 8, -1]],
        "token_is_max_context": [[False, True, True, False]],
    }
    start, end = np.array([[1.5, 2.0, 0.0, 0.0]]), np.array([[1.5, 3.0, 0.0, 0.0]])
    expected = {None: "blue", -1.0: "blue", 1.0: "blue", 2.0: "", 2.5: ""}  # answer iff 5 > 3 + τ
    for threshold, answer in expected.items():
        assert decode_answers(start, end, w, ["blue sky"], null_score_threshold=threshold) == [answer]
    # s_null is the lowest over the example's windows (3.0, not 4.0).
    two = {key: value * 2 for key, value in w.items()}
    start2, end2 = np.concatenate([start, [[2.0, 0, 0, 0]]]), np.concatenate([end, [[2.0, 0, 0, 0]]])
    assert decode_answers(start2, end2, two, ["blue sky"], null_score_threshold=1.5) == ["blue"]


# === Metrics ===


def test_normalize_answer():
    assert normalize_answer("The Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("  An   apple, a day. ") == "apple day"
    assert normalize_answer("Theater of the U.S.") == "theater of us"


def test_exact_match_and_f1_by_hand():
    assert exact_match("The Eiffel Tower!", ["eiffel tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower", "Paris"]) == 0.0
    # [big, red, dog] vs [red, dog, barked]: 2 shared, precision = recall = 2/3.
    assert f1_score("the big red dog", ["a red dog barked"]) == pytest.approx(2 / 3)
    assert f1_score("the big red dog", ["a red dog barked", "Big red dog."]) == 1.0
    assert f1_score("dog dog", "dog") == pytest.approx(2 / 3)  # precision 1/2, recall 1
    assert f1_score("cat", ["dog"]) == 0.0
    # No answer (SQuAD 2.0): right only if both are empty; golds normalizing to "" count as none.
    assert f1_score("", []) == exact_match("", []) == 1.0
    assert f1_score("Paris", []) == exact_match("Paris", [""]) == 0.0
    assert f1_score("", ["Paris"]) == 0.0
    assert exact_match("", ["the"]) == 1.0


def test_squad_metrics_in_percent():
    predictions = ["Eiffel Tower", "the big red dog", "", "Paris"]
    golds = [["The Eiffel Tower"], ["a red dog barked"], [], ["London"]]
    metrics = squad_metrics(predictions, golds)
    assert metrics["exact_match"] == 50.0  # 1, 0, 1, 0
    assert metrics["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    with pytest.raises(ValueError, match="2 predictions for 1 questions"):
        squad_metrics(["a", "b"], [["a"]])


# === Serialization and errors ===


def test_config_and_preset_round_trip(preprocessor, tmp_path):
    revived = BertQuestionAnswererPreprocessor.from_config(preprocessor.get_config())
    assert (revived.sequence_length, revived.document_stride, revived.max_question_length) == (10, 2, 3)
    preprocessor.save_to_preset(tmp_path)
    loaded = BertQuestionAnswererPreprocessor.from_preset(tmp_path)
    for other in (revived, loaded):
        assert other.get_config() == preprocessor.get_config()
        np.testing.assert_array_equal(
            other((QUESTIONS, CONTEXTS))["token_ids"], preprocessor((QUESTIONS, CONTEXTS))["token_ids"]
        )


def test_errors(preprocessor):
    tokenizer = BertTokenizer(VOCABULARY)
    with pytest.raises(ValueError, match="sequence_length=8 leaves 1 context tokens"):
        BertQuestionAnswererPreprocessor(tokenizer, sequence_length=8, max_question_length=4)
    with pytest.raises(ValueError, match="document_stride=4 must be smaller .* = 4"):
        BertQuestionAnswererPreprocessor(tokenizer, 10, document_stride=4, max_question_length=3)
    with pytest.raises(ValueError, match="same length"):
        preprocessor((["what", "is"], ["a b"]))
    with pytest.raises(ValueError, match=r"x = \(questions, contexts\)"):
        preprocessor(["what"])
    with pytest.raises(ValueError, match="beyond its context"):
        preprocessor((["what"], ["sky is blue"]), ([12], [""]))
    with pytest.raises(ValueError, match=r"does not match its context .*first at example 1"):
        preprocessor((["what", "what"], ["sky is blue", "sky is blue"]), ([7, 6], ["blue", "blue"]))
    with pytest.raises(ValueError, match="does not match its context"):
        preprocessor((["what"], ["sky is blue"]), ([-1], ["blue"]))
    with pytest.raises(ValueError, match="one entry per context"):
        preprocessor((["what"], ["sky is blue"]), ([7, 7], ["blue", "blue"]))


def test_graph_mode_length_check(mapped):
    assert isinstance(mapped[3], tf.errors.InvalidArgumentError)
    assert "same length" in str(mapped[3])
