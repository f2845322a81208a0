"""Bad token ids, shapes and dtypes given to the backbones, and bad generation
arguments: each refused in kzoo's words before any
work, the same on every backend; valid unusual inputs give the right result."""

import numpy as np
import tensorflow as tf

import kzoo
from tests.robustness.case_table import Case, Gives, Raises, check, parametrize, plain, tiny_models

IDS = np.array([[2, 5, 6, 3]])  # [CLS] the a [SEP] in the BERT fixtures' vocabulary
SOURCE = np.array([[4, 5, 3, 0]])  # a b [EOS] [PAD] in the Transformer's
FRACTIONAL = np.array([[2, 5.7, 3]])
EMPTY_SOURCE = np.zeros((0, 4), "int32")  # a batch of no sources


def pooled_shape(models, inputs):
    return tuple(models.backbone(inputs)["pooled_output"].shape)


def with_ids(**changes):
    """BERT inputs from IDS with some entries replaced."""
    inputs = {"token_ids": IDS, "segment_ids": np.zeros_like(IDS), "padding_mask": np.ones_like(IDS)}
    return {**inputs, **changes}


def transformer_inputs(encoder=SOURCE, decoder=np.array([[2, 4]])):
    return {"encoder_token_ids": encoder, "decoder_token_ids": decoder}


def generated(models, source=SOURCE, **kwargs):
    return models.transformer.generate(source, **{"beam_size": 1, "max_length": 4, **kwargs})


INTEGER = "must be integer ids"
INT32 = "beyond int32"
NOT_TEXT = "takes token ids, not text"
SHAPE = "must be (batch, sequence_length)"
BERT_ID_CASES = [
    Case("fractional_token_id", lambda m: m.backbone({"token_ids": np.array([[2, 5.5, 3]])}),
         Raises(ValueError, "BertBackbone: token_ids", INTEGER, "got 5.5 at index (0, 1)")),
    Case("nan_token_id", lambda m: m.backbone({"token_ids": np.array([[2, np.nan, 3]])}),
         Raises(ValueError, INTEGER, "got nan at index (0, 1)")),
    Case("fractional_segment_id", lambda m: m.backbone(with_ids(segment_ids=np.array([[0, 0, 0.5, 1]]))),
         Raises(ValueError, "segment_ids", INTEGER, "got 0.5 at index (0, 2)")),
    Case("integral_float_ids_are_ids", lambda m: pooled_shape(m, IDS.astype("float32")), Gives([1, 8])),
    Case("int64_id_beyond_int32", lambda m: m.backbone(np.array([[2, 2**32 + 5, 3]], "int64")),
         Raises(ValueError, "token_ids holds 4294967301", INT32, "[0, 37)")),
    Case("negative_int64_beyond_int32", lambda m: m.backbone(np.array([[2, -(2**32), 3]], "int64")),
         Raises(ValueError, "token_ids holds -4294967296", INT32)),
    Case("int64_segment_beyond_int32", lambda m: m.backbone(with_ids(segment_ids=np.array([[0, 0, 2**33, 0]]))),
         Raises(ValueError, "segment_ids holds 8589934592", INT32, "[0, 2)")),
    Case("token_id_equal_to_vocabulary_size", lambda m: m.backbone(np.array([[2, 37, 3]])),
         Raises(ValueError, "ids must lie in [0, 37)", "values from 2 to 37")),
    Case("negative_token_id", lambda m: m.backbone(np.array([[2, -1, 3]])),
         Raises(ValueError, "ids must lie in [0, 37)", "values from -1 to 3")),
    Case("segment_id_2_with_two_segments", lambda m: m.backbone(with_ids(segment_ids=np.array([[0, 0, 2, 0]]))),
         Raises(ValueError, "ids must lie in [0, 2)", "values from 0 to 2")),
    Case("padding_mask_of_another_length", lambda m: m.backbone(with_ids(padding_mask=np.ones((1, 5)))),
         Raises(ValueError, "token_ids has shape (1, 4) but padding_mask has shape (1, 5)", "the same shape")),
    Case("segment_ids_of_another_batch", lambda m: m.backbone(with_ids(segment_ids=np.zeros((2, 4), "int32"))),
         Raises(ValueError, "token_ids has shape (1, 4) but segment_ids has shape (2, 4)")),
    Case("one_dimensional_ids", lambda m: m.backbone(np.array([2, 5, 3])),
         Raises(ValueError, "BertBackbone: token_ids", SHAPE, "got shape (3,)", "ids[None]")),
    Case("packed_single_string_is_one_dimensional", lambda m: m.backbone(m.preprocessor("the film")),
         Raises(ValueError, SHAPE, "got shape (8,)", "a list of one text")),
    Case("string_to_backbone", lambda m: m.backbone("the film"),
         Raises(ValueError, NOT_TEXT, "kzoo.BertPreprocessor")),
    Case("list_of_strings_to_backbone", lambda m: m.backbone(["the film", "a song"]),
         Raises(ValueError, NOT_TEXT, "backbone(kzoo.BertPreprocessor")),
    Case("string_tensor_to_backbone", lambda m: m.backbone({"token_ids": tf.constant([["the", "film"]])}),
         Raises(ValueError, NOT_TEXT)),
    Case("object_array_to_backbone", lambda m: m.backbone({"token_ids": np.array([[2, 5, 3], [2, 3]], dtype=object)}),
         Raises(ValueError, "token_ids is an array of Python objects", "an int array of shape")),
    Case("rows_of_different_lengths", lambda m: m.backbone({"token_ids": [[2, 5, 3], [2, 3]]}),
         Raises(ValueError, "the rows of token_ids have different lengths", "pad the rows")),
    Case("none_to_backbone", lambda m: m.backbone(None),
         Raises(ValueError, "BertBackbone got no token_ids (None)", "kzoo.BertPreprocessor")),
    Case("none_token_ids_in_dict", lambda m: m.backbone({"token_ids": None, "padding_mask": np.ones((1, 3))}),
         Raises(ValueError, "got no token_ids (None)")),
    Case("none_segment_ids_means_default", lambda m: pooled_shape(m, with_ids(segment_ids=None)), Gives([1, 8])),
    Case("dict_without_token_ids", lambda m: m.backbone({"segment_ids": np.zeros((1, 3), "int32")}),
         Raises(ValueError, "only `token_ids` is required", "got keys ['segment_ids']")),
    Case("unknown_input_name", lambda m: m.backbone({"token_ids": IDS, "attention_mask": np.ones_like(IDS)}),
         Raises(ValueError, "takes a dict with keys ['token_ids', 'segment_ids', 'padding_mask']")),
    Case("longer_than_position_table", lambda m: m.backbone(np.full((1, 17), 5)),
         Raises(ValueError, "positions 0 to 16", "max_sequence_length=16")),
    # The README's promise: a preprocessor's TensorFlow output feeds the backbone on any backend.
    Case("backbone_of_preprocessor_output", lambda m: pooled_shape(m, m.preprocessor(["the film", "a song"])),
         Gives([2, 8])),
    Case("backbone_of_preprocessor_token_ids_alone",
         lambda m: pooled_shape(m, m.preprocessor(["the film"])["token_ids"]), Gives([1, 8])),
    Case("nested_lists_are_ids", lambda m: pooled_shape(m, {"token_ids": [[2, 5, 3]]}), Gives([1, 8])),
    Case("backbone_predict_on_zero_rows", lambda m: m.backbone.predict({"token_ids": np.zeros((0, 4), "int32")}),
         Raises(ValueError, "BertBackbone got 0 examples")),
    Case("backbone_predict_none", lambda m: m.backbone.predict(None),
         Raises(ValueError, "BertBackbone got no examples (x=None)")),
    # `predict`, `predict_on_batch` and `fit` check as the eager call does: Keras
    # would cast 5.7 to 5 (TensorFlow, JAX) and name strings an "Unrecognized data type".
    Case("backbone_predict_fractional_ids", lambda m: m.backbone.predict({"token_ids": FRACTIONAL}, verbose=0),
         Raises(ValueError, "BertBackbone: token_ids", INTEGER, "got 5.7 at index (0, 1)")),
    Case("backbone_predict_on_batch_fractional_ids", lambda m: m.backbone.predict_on_batch({"token_ids": FRACTIONAL}),
         Raises(ValueError, "BertBackbone: token_ids", INTEGER, "got 5.7 at index (0, 1)")),
    Case("backbone_predict_fractional_segment_ids",
         lambda m: m.backbone.predict(with_ids(segment_ids=np.array([[0, 0, 0.5, 1]])), verbose=0),
         Raises(ValueError, "segment_ids", INTEGER, "got 0.5 at index (0, 2)")),
    Case("backbone_fit_fractional_ids", lambda m: m.backbone.fit({"token_ids": FRACTIONAL}, verbose=0),
         Raises(ValueError, "BertBackbone: token_ids", INTEGER, "got 5.7 at index (0, 1)")),
    Case("backbone_predict_integral_float_ids", lambda m: m.backbone.predict(IDS.astype("float32"), verbose=0)["pooled_output"].shape,
         Gives([1, 8])),
    Case("backbone_predict_text", lambda m: m.backbone.predict(["a raw string"], verbose=0),
         Raises(ValueError, NOT_TEXT, "kzoo.BertPreprocessor", "kzoo.BertClassifier, which takes text")),
    Case("backbone_predict_string_array", lambda m: m.backbone.predict(np.array(["the film", "a song"]), verbose=0),
         Raises(ValueError, NOT_TEXT, "kzoo.BertPreprocessor")),
    Case("backbone_predict_text_pairs", lambda m: m.backbone.predict((["the film"], ["a song"]), verbose=0),
         Raises(ValueError, NOT_TEXT)),
    Case("backbone_predict_on_batch_text", lambda m: m.backbone.predict_on_batch(["a raw string"]),
         Raises(ValueError, NOT_TEXT, "kzoo.BertPreprocessor")),
]

TRANSFORMER_CASES = [
    Case("transformer_text_source", lambda m: m.transformer(transformer_inputs(encoder=["a b"])),
         Raises(ValueError, "Transformer takes token ids, not text", "kzoo.TransformerPreprocessor")),
    Case("transformer_none_target", lambda m: m.transformer(transformer_inputs(decoder=None)),
         Raises(ValueError, "Transformer got no decoder_token_ids (None)")),
    Case("transformer_missing_key", lambda m: m.transformer({"encoder_token_ids": SOURCE}),
         Raises(ValueError, "takes a dict with keys ['encoder_token_ids', 'decoder_token_ids']")),
    Case("transformer_batch_sizes_differ", lambda m: m.transformer(transformer_inputs(decoder=np.array([[2], [2]]))),
         Raises(ValueError, "encoder_token_ids has shape (1, 4) but decoder_token_ids has shape (2, 1)",
                "the same batch size")),
    Case("transformer_fractional_id", lambda m: m.transformer(transformer_inputs(decoder=np.array([[2, 4.5]]))),
         Raises(ValueError, "decoder_token_ids", INTEGER, "got 4.5 at index (0, 1)")),
    Case("transformer_int64_beyond_int32",
         lambda m: m.transformer(transformer_inputs(encoder=np.array([[4, 2**32 + 4, 3]]))),
         Raises(ValueError, "encoder_token_ids holds 4294967300", INT32, "[0, 7)")),
    Case("transformer_one_dimensional", lambda m: m.transformer(transformer_inputs(encoder=np.array([4, 3]))),
         Raises(ValueError, "encoder_token_ids", SHAPE)),
    Case("transformer_id_outside_vocabulary", lambda m: m.transformer(transformer_inputs(decoder=np.array([[2, 7]]))),
         Raises(ValueError, "ids must lie in [0, 7)")),
    Case("transformer_predict_zero_rows",
         lambda m: m.transformer.predict(transformer_inputs(np.zeros((0, 4), "int32"), np.zeros((0, 2), "int32"))),
         Raises(ValueError, "Transformer got 0 examples")),
    Case("transformer_predict_text", lambda m: m.transformer.predict(["a b"], verbose=0),
         Raises(ValueError, "Transformer takes token ids, not text", "kzoo.TransformerPreprocessor")),
    Case("transformer_predict_fractional_ids",
         lambda m: m.transformer.predict(transformer_inputs(decoder=np.array([[2, 4.5]])), verbose=0),
         Raises(ValueError, "Transformer: decoder_token_ids", INTEGER, "got 4.5 at index (0, 1)")),
    Case("transformer_predict_on_batch_fractional_ids",
         lambda m: m.transformer.predict_on_batch(transformer_inputs(encoder=np.array([[4, 5.5, 3]]))),
         Raises(ValueError, "Transformer: encoder_token_ids", INTEGER, "got 5.5 at index (0, 1)")),
    Case("transformer_fit_rows_and_labels_differ",
         lambda m: m.transformer.fit(transformer_inputs(), np.array([[4, 3], [4, 3]]), verbose=0),
         Raises(ValueError, "Transformer got 1 examples but 2 labels")),
]

GENERATION_CASES = [
    Case("generate_shape", lambda m: tuple(generated(m).shape), Gives([1, 4])),
    Case("generate_max_length_negative", lambda m: generated(m, max_length=-3),
         Raises(ValueError, "Transformer.generate: max_length must be an int >= 1; got -3 (int)")),
    Case("generate_max_length_zero", lambda m: generated(m, max_length=0),
         Raises(ValueError, "max_length must be an int >= 1; got 0")),
    Case("generate_max_length_float", lambda m: generated(m, max_length=2.5),
         Raises(ValueError, "max_length must be an int >= 1; got 2.5 (float)", "never rounded")),
    Case("generate_max_length_string", lambda m: generated(m, max_length="4"),
         Raises(ValueError, "max_length must be an int >= 1; got '4' (str)")),
    Case("generate_max_length_beyond_positions", lambda m: generated(m, max_length=17),
         Raises(ValueError, "positions 0 to 16", "max_sequence_length=16")),
    Case("generate_beam_size_zero", lambda m: generated(m, beam_size=0),
         Raises(ValueError, "beam_size must be an int >= 1; got 0", "1 is greedy search")),
    Case("generate_beam_size_float", lambda m: generated(m, beam_size=2.0),
         Raises(ValueError, "beam_size must be an int >= 1; got 2.0 (float)")),
    Case("generate_negative_length_penalty", lambda m: generated(m, length_penalty=-1.0),
         Raises(ValueError, "length_penalty (GNMT's α) must be a number >= 0; got -1.0")),
    Case("generate_string_length_penalty", lambda m: generated(m, length_penalty="0.6"),
         Raises(ValueError, "length_penalty (GNMT's α) must be a number >= 0; got '0.6'")),
    Case("generate_from_text", lambda m: generated(m, source=["a b"]),
         Raises(ValueError, "Transformer.generate takes token ids, not text")),
    Case("generate_from_none", lambda m: generated(m, source=None),
         Raises(ValueError, "Transformer.generate got no encoder_token_ids (None)")),
    Case("generate_from_one_dimensional_ids", lambda m: generated(m, source=np.array([4, 5, 3])),
         Raises(ValueError, SHAPE, "got shape (3,)")),
    Case("generate_from_fractional_ids", lambda m: generated(m, source=np.array([[4, 5.5, 3]])),
         Raises(ValueError, INTEGER, "got 5.5 at index (0, 1)")),
    Case("generate_from_int64_beyond_int32", lambda m: generated(m, source=np.array([[4, 2**32 + 5, 3]])),
         Raises(ValueError, "holds 4294967301", INT32)),
    # An empty source (only [EOS] and padding) translates to the empty sentence.
    Case("generate_empty_source_greedy", lambda m: generated(m, source=np.array([[3, 0, 0, 0]])),
         Gives([[3, 0, 0, 0]])),
    Case("generate_empty_source_beam", lambda m: generated(m, source=np.array([[3, 0, 0, 0]] * 2), beam_size=2),
         Gives([[3, 0, 0, 0], [3, 0, 0, 0]])),
    Case("generate_all_padding_source", lambda m: generated(m, source=np.zeros((1, 4), "int32")),
         Gives([[3, 0, 0, 0]])),
    # An empty batch gives an empty batch of outputs (JAX's beam search failed on it).
    Case("generate_empty_batch_greedy", lambda m: tuple(generated(m, source=EMPTY_SOURCE).shape), Gives([0, 4])),
    Case("generate_empty_batch_beam", lambda m: tuple(generated(m, source=EMPTY_SOURCE, beam_size=2).shape),
         Gives([0, 4])),
    Case("generate_empty_batch_default_length",  # source length 4 + 50, within the 16 positions
         lambda m: tuple(m.transformer.generate(EMPTY_SOURCE).shape), Gives([0, 16])),
    Case("generate_empty_batch_not_compiled",
         lambda m: tuple(generated(m, source=EMPTY_SOURCE, beam_size=2, compiled=False).shape), Gives([0, 4])),
    Case("translate_no_sources",
         lambda m: kzoo.translate(m.transformer, m.transformer_preprocessor, [], beam_size=2, max_length=4), Gives([])),
    Case("generate_empty_text_through_preprocessor",
         lambda m: generated(m, source=m.transformer_preprocessor([""]).numpy())[0], Gives([3, 0, 0, 0])),
]


@parametrize(BERT_ID_CASES + TRANSFORMER_CASES + GENERATION_CASES)
def test_bad_ids(case):
    check(case)


def test_an_empty_source_does_not_change_the_other_rows():
    models = tiny_models()
    alone = plain(generated(models, source=SOURCE, beam_size=2))
    together = plain(generated(models, source=np.concatenate([np.array([[3, 0, 0, 0]]), SOURCE]), beam_size=2))
    assert together == [[3, 0, 0, 0]] + alone
