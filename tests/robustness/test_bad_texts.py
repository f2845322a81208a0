"""Bad texts, pairs, lengths and vocabularies given to the tokenizers and
preprocessors: nothing becomes text silently, no
length is rounded, and each refusal is in kzoo's words."""

import os
import tempfile

import numpy as np
import tensorflow as tf

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY
from tests.robustness.case_table import Case, Gives, Raises, check, parametrize

MISSING = "A missing value (None, or NaN from an empty pandas cell) is not text"
NUMBERS = "Numbers are not turned into text silently"
NOT_INT = "must be an int >= 1"
DUPLICATED = VOCABULARY + ["the", "[UNK]"]  # "the" (id 5) again as 37, "[UNK]" (id 1) again as 38


def token_ids(packed):
    return packed["token_ids"]


def pair_at(length, a=("the film",), b=("a song",)):
    return kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=length)((list(a), list(b)))


def vocabulary_file(lines, newline="\n"):
    path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(newline.join(lines) + newline)
    return path


TEXT_CASES = [
    Case("none_among_texts", lambda m: m.tokenizer(["the film", None]),
         Raises(ValueError, "BertTokenizer expected strings, but inputs[1] is None (NoneType).", MISSING)),
    Case("int_among_texts", lambda m: m.tokenizer(["the film", 5]),
         Raises(ValueError, "inputs[1] is 5 (int).", NUMBERS)),
    Case("float_among_texts", lambda m: m.tokenizer([3.5, "the film"]),
         Raises(ValueError, "inputs[0] is 3.5 (float).", NUMBERS)),
    Case("nan_among_texts", lambda m: m.tokenizer(np.array(["the film", np.nan], dtype=object)),
         Raises(ValueError, "inputs[1] is nan (float).", MISSING, 'column.fillna("")')),
    Case("bool_among_texts", lambda m: m.tokenizer(["the film", True]),
         Raises(ValueError, "inputs[1] is True (bool).")),
    Case("numpy_ints_as_texts", lambda m: m.tokenizer(np.array([1, 2])),
         Raises(ValueError, "inputs[0] is 1 (int64).", NUMBERS)),
    Case("int_tensor_as_texts", lambda m: m.tokenizer(tf.constant([7, 8])),
         Raises(ValueError, "BertTokenizer expected strings (tf.string), got a int32 tensor such as 7.")),
    Case("bytes_are_text", lambda m: m.tokenizer([b"the film", "the"]), Gives([[5, 7], [5]])),
    Case("numpy_str_array_is_text", lambda m: m.tokenizer(np.array(["the film"])), Gives([[5, 7]])),
    Case("empty_string_gives_no_tokens", lambda m: m.tokenizer(["", "the"]), Gives([[], [5]])),
    Case("empty_batch_gives_no_rows", lambda m: m.tokenizer([]), Gives([])),
    Case("preprocessor_none_among_texts", lambda m: m.preprocessor(["the film", None]),
         Raises(ValueError, "inputs[1] is None (NoneType).")),
    Case("preprocessor_none_in_second_column", lambda m: m.preprocessor((["the"], [None])),
         Raises(ValueError, "inputs[0] is None (NoneType).")),
    Case("preprocessor_batch_of_lists", lambda m: m.preprocessor([["the", "film"]]),
         Raises(ValueError, "expects a scalar string or a 1-D batch of strings, got shape (1, 2)")),
    Case("empty_text_packs_to_cls_sep", lambda m: token_ids(m.preprocessor([""])), Gives([[2, 3, 0, 0, 0, 0, 0, 0]])),
    Case("transformer_preprocessor_none", lambda m: m.transformer_preprocessor(["a", None]),
         Raises(ValueError, "TransformerTokenizer expected strings, but inputs[1] is None")),
    Case("transformer_sources_and_targets_differ", lambda m: m.transformer_preprocessor(["a", "b"], ["c"]),
         Raises(ValueError, "2 sources but 1 targets")),
    Case("transformer_empty_source_is_eos", lambda m: m.transformer_preprocessor([""]), Gives([[3, 0, 0, 0, 0, 0]])),
]

PAIR_AND_LENGTH_CASES = [
    Case("pair_columns_of_different_lengths", lambda m: m.preprocessor((["a b", "the", "film"], ["a", "the"])),
         Raises(ValueError, "(texts_a, texts_b) have different lengths: 3 and 2")),
    Case("pair_of_a_string_and_a_batch", lambda m: m.preprocessor(("the film", ["a song"])),
         Raises(ValueError, "both as single strings or both as batches")),
    Case("pair_of_two_strings", lambda m: token_ids(m.preprocessor(("the film", "a"))).numpy().tolist()[:6],
         Gives([2, 5, 7, 3, 6, 3])),
    Case("pair_at_length_3", lambda m: pair_at(3),
         Raises(ValueError, "sequence_length=3 leaves no room", "a pair [CLS] A [SEP] B [SEP] 5")),
    Case("pair_at_length_4", lambda m: pair_at(4), Raises(ValueError, "sequence_length=4 leaves no room")),
    Case("pair_at_length_5_keeps_a_token_each", lambda m: token_ids(pair_at(5)), Gives([[2, 5, 3, 6, 3]])),
    Case("single_text_at_length_3", lambda m: token_ids(kzoo.BertPreprocessor(m.tokenizer, 3)(["the film"])),
         Gives([[2, 5, 3]])),
    Case("length_2", lambda m: kzoo.BertPreprocessor(m.tokenizer, sequence_length=2),
         Raises(ValueError, "sequence_length=2 leaves no room for text")),
    Case("fractional_length", lambda m: kzoo.BertPreprocessor(m.tokenizer, sequence_length=8.9),
         Raises(ValueError, f"BertPreprocessor: sequence_length {NOT_INT}; got 8.9 (float)", "never rounded")),
    Case("float_length", lambda m: kzoo.BertPreprocessor(m.tokenizer, sequence_length=8.0),
         Raises(ValueError, f"sequence_length {NOT_INT}; got 8.0 (float)")),
    Case("string_length", lambda m: kzoo.BertPreprocessor(m.tokenizer, sequence_length="8"),
         Raises(ValueError, f"sequence_length {NOT_INT}; got '8' (str)")),
    Case("bool_length", lambda m: kzoo.BertPreprocessor(m.tokenizer, sequence_length=True),
         Raises(ValueError, f"sequence_length {NOT_INT}; got True (bool)")),
    Case("numpy_int_length", lambda m: kzoo.BertPreprocessor(m.tokenizer, np.int64(6)).sequence_length, Gives(6)),
    Case("multiple_choice_length_4", lambda m: kzoo.BertMultipleChoicePreprocessor(m.tokenizer, 4),
         Raises(ValueError, "BertMultipleChoicePreprocessor: sequence_length=4 leaves no room")),
    Case("token_classifier_fractional_length", lambda m: kzoo.BertTokenClassifierPreprocessor(m.tokenizer, 8.5),
         Raises(ValueError, f"BertTokenClassifierPreprocessor: sequence_length {NOT_INT}; got 8.5")),
    Case("question_answerer_fractional_stride",
         lambda m: kzoo.BertQuestionAnswererPreprocessor(m.tokenizer, 32, document_stride=2.5, max_question_length=8),
         Raises(ValueError, f"document_stride {NOT_INT}; got 2.5 (float)")),
    Case("transformer_fractional_source_length",
         lambda m: kzoo.TransformerPreprocessor(m.transformer_tokenizer, source_length=6.5),
         Raises(ValueError, f"TransformerPreprocessor: source_length {NOT_INT}; got 6.5 (float)")),
    Case("transformer_pad_not_bool", lambda m: kzoo.TransformerPreprocessor(m.transformer_tokenizer, pad="yes"),
         Raises(ValueError, "pad must be True or False; got 'yes'")),
    Case("set_fractional_sequence_length", lambda m: m.classifier.set_sequence_length(8.9),
         Raises(ValueError, f"sequence_length {NOT_INT}; got 8.9 (float)")),
    Case("set_sequence_length_beyond_positions", lambda m: m.classifier.set_sequence_length(40),
         Raises(ValueError, "sequence_length=40 must lie in [3, 32]")),
]

VOCABULARY_CASES = [
    # Hugging Face and google-research's `load_vocab`: a token listed twice keeps its last id.
    Case("duplicate_token_keeps_its_last_id", lambda m: kzoo.BertTokenizer(DUPLICATED)(["the film", "zzz"]),
         Gives([[37, 7], [38]])),
    Case("duplicate_special_token_id", lambda m: kzoo.BertTokenizer(DUPLICATED).unknown_token_id, Gives(38)),
    Case("duplicate_earlier_id_detokenizes", lambda m: kzoo.BertTokenizer(DUPLICATED).detokenize([[5, 7, 37]]),
         Gives([b"the film the"])),
    Case("duplicate_keeps_every_row", lambda m: kzoo.BertTokenizer(DUPLICATED).vocabulary_size(), Gives(39)),
    Case("transformer_duplicate_token",
         lambda m: kzoo.TransformerTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b", "a"])(["a b"]),
         Gives([[6, 5]])),
    Case("blank_line_in_vocabulary",  # kept as a row, as Hugging Face does: "a" and "film" move up by one
         lambda m: kzoo.BertTokenizer(vocabulary_file(VOCABULARY[:6] + [""] + VOCABULARY[6:]))(["the film"]),
         Gives([[5, 8]])),
    Case("crlf_vocabulary_file", lambda m: kzoo.BertTokenizer(vocabulary_file(VOCABULARY, "\r\n"))(["the film"]),
         Gives([[5, 7]])),
    Case("missing_vocabulary_file", lambda m: kzoo.BertTokenizer("/no/such/vocab.txt"),
         Raises(FileNotFoundError, "Vocabulary file not found: '/no/such/vocab.txt'")),
    Case("vocabulary_of_numbers", lambda m: kzoo.BertTokenizer([1, 2, 3]),
         Raises(ValueError, "`vocabulary` must be a file path or a list of strings")),
    Case("vocabulary_without_special_tokens", lambda m: kzoo.BertTokenizer(["the", "film"]),
         Raises(ValueError, "lacks the special token(s) ['[PAD]', '[CLS]', '[SEP]', '[MASK]', '[UNK]']")),
    Case("lowercase_as_string", lambda m: kzoo.BertTokenizer(VOCABULARY, lowercase="false"),
         Raises(ValueError, "BertTokenizer: lowercase must be True or False; got 'false' (str)")),
    Case("strip_accents_as_int", lambda m: kzoo.BertTokenizer(VOCABULARY, strip_accents=1),
         Raises(ValueError, "strip_accents must be True or False; got 1 (int)")),
    Case("max_input_chars_per_word_zero", lambda m: kzoo.BertTokenizer(VOCABULARY, max_input_chars_per_word=0),
         Raises(ValueError, "max_input_chars_per_word must be an int >= 1; got 0")),
    Case("unknown_tokenizer_argument", lambda m: kzoo.BertTokenizer(VOCABULARY, lower_case=True),
         Raises(ValueError, "Unknown BertTokenizer arguments: ['lower_case']")),
]


@parametrize(TEXT_CASES + PAIR_AND_LENGTH_CASES + VOCABULARY_CASES)
def test_bad_texts(case):
    check(case)
