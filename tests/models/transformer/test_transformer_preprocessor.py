"""kzoo TransformerPreprocessor (sec. 3, Figure 1: decoder input = target
shifted right): hand-worked ids, truncation, padded and unpadded outputs,
tf.data with kzoo.data.batch_by_length, config/presets, errors, and the
outputs feeding kzoo.Transformer on every backend."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.data.length_batching import batch_by_length
from kzoo.models.bert.bert_tokenizer import BertTokenizer
from kzoo.models.transformer.transformer import Transformer
from kzoo.models.transformer.transformer_preprocessor import TransformerPreprocessor
from kzoo.models.transformer.transformer_tokenizer import TransformerTokenizer

data_test = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)

# ids:        0        1        2        3        4       5       6      7       8      9       10
VOCABULARY = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "the", "cat", "sat", "die", "Katze", "saß", "##."]
TOKENIZER = TransformerTokenizer(VOCABULARY)
SOURCES = ["the cat sat.", "the cat", "the the the the the cat sat"]
TARGETS = ["die Katze saß.", "die Katze", "die"]


def _lists(tensors):
    return {k: v.numpy().tolist() for k, v in tensors.items()} if isinstance(tensors, dict) else tensors.numpy().tolist()


@data_test
def test_hand_worked_ids_with_truncation_and_padding():
    x, y = TransformerPreprocessor(TOKENIZER, source_length=6, target_length=4)(SOURCES, TARGETS)
    assert _lists(x) == {
        # Source + [EOS]; the third source (7 tokens) keeps 5 of them and its [EOS].
        "encoder_token_ids": [[4, 5, 6, 10, 3, 0], [4, 5, 3, 0, 0, 0], [4, 4, 4, 4, 4, 3]],
        # [BOS] + target; the first target (4 tokens) is cut to the length.
        "decoder_token_ids": [[2, 7, 8, 9], [2, 7, 8, 0], [2, 7, 0, 0]],
    }
    # Labels: target + [EOS], i.e. the decoder input shifted left; a cut target has no [EOS].
    assert _lists(y) == [[7, 8, 9, 10], [7, 8, 3, 0], [7, 3, 0, 0]]
    assert x["encoder_token_ids"].dtype == y.dtype == tf.int32


@data_test
def test_labels_are_the_decoder_input_shifted_left():
    x, y = TransformerPreprocessor(TOKENIZER, source_length=16, target_length=16)(SOURCES, TARGETS)
    decoder, labels = x["decoder_token_ids"].numpy(), y.numpy()
    assert (decoder[:, 0] == TOKENIZER.start_id).all()
    assert (labels[:, :-1][decoder[:, 1:] != 0] == decoder[:, 1:][decoder[:, 1:] != 0]).all()
    lengths = (labels != 0).sum(axis=1)  # each label row ends with [EOS] where the decoder row ends
    assert lengths.tolist() == (decoder != 0).sum(axis=1).tolist() == [5, 3, 2]
    assert labels[np.arange(3), lengths - 1].tolist() == [3, 3, 3]


@data_test
def test_source_alone_and_single_strings():
    preprocessor = TransformerPreprocessor(TOKENIZER, source_length=5, target_length=3)
    assert _lists(preprocessor(SOURCES[:2])) == [[4, 5, 6, 10, 3], [4, 5, 3, 0, 0]]
    assert _lists(preprocessor("the cat")) == [4, 5, 3, 0, 0]
    x, y = preprocessor("the cat", "die Katze")
    assert _lists(x) == {"encoder_token_ids": [4, 5, 3, 0, 0], "decoder_token_ids": [2, 7, 8]}
    assert _lists(y) == [7, 8, 3]
    unpadded = TransformerPreprocessor(TOKENIZER, source_length=5, target_length=3, pad=False)
    x, y = unpadded(SOURCES, TARGETS)
    assert x["encoder_token_ids"].to_list() == [[4, 5, 6, 10, 3], [4, 5, 3], [4, 4, 4, 4, 3]]
    assert x["decoder_token_ids"].to_list() == [[2, 7, 8], [2, 7, 8], [2, 7]]
    assert y.to_list() == [[7, 8, 9], [7, 8, 3], [7, 3]]


@data_test
def test_tf_data_map_then_length_batching():
    """Graph mode, one example at a time (the padded output differs only by
    its final `to_tensor`; tracing the tokenizer is the slow part of a map)."""
    eager_x, eager_y = TransformerPreprocessor(TOKENIZER, source_length=8, target_length=8)(SOURCES, TARGETS)
    unpadded = TransformerPreprocessor(TOKENIZER, source_length=8, target_length=8, pad=False)
    examples = tf.data.Dataset.from_tensor_slices((SOURCES, TARGETS)).map(unpadded)
    assert examples.element_spec[1] == tf.TensorSpec([None], tf.int32)
    batches = list(batch_by_length(examples, tokens_per_batch=16, boundaries=[4, 8]))
    # Example lengths (longest tensor) 5, 3, 8: the bucket <= 4 holds the second
    # pair, the bucket <= 8 (two per batch) the others.
    assert sorted(tuple(y.shape) for _, y in batches) == [(1, 3), (2, 5)]

    def unpadded_rows(x, y):
        columns = (x["encoder_token_ids"], x["decoder_token_ids"], y)
        return {tuple(tuple(int(v) for v in c[row] if v) for c in columns) for row in range(y.shape[0])}

    assert set().union(*(unpadded_rows(x, y) for x, y in batches)) == unpadded_rows(eager_x, eager_y)


@data_test
def test_config_and_preset_round_trip(tmp_path):
    preprocessor = TransformerPreprocessor(TOKENIZER, source_length=7, target_length=5, pad=False)
    config = preprocessor.get_config()
    assert (config["source_length"], config["target_length"], config["pad"]) == (7, 5, False)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(preprocessor))
    assert type(again) is TransformerPreprocessor and again.get_config() == config
    assert again.tokenizer.get_vocabulary() == VOCABULARY
    preprocessor.save_to_preset(tmp_path)
    loaded = TransformerPreprocessor.from_preset(str(tmp_path), pad=True)
    assert (loaded.source_length, loaded.target_length, loaded.pad) == (7, 5, True)
    assert _lists(loaded("the cat")) == [4, 5, 3, 0, 0, 0, 0]
    assert isinstance(TransformerTokenizer.from_preset(str(tmp_path)), TransformerTokenizer)


@data_test
def test_errors():
    with pytest.raises(ValueError, match="source_length=1"):
        TransformerPreprocessor(TOKENIZER, source_length=1)
    with pytest.raises(ValueError, match=r"lacks \['padding_id', 'start_id', 'end_id'\]"):
        TransformerPreprocessor(BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    preprocessor = TransformerPreprocessor(TOKENIZER, source_length=8, target_length=8)
    with pytest.raises(ValueError, match="3 sources but 2 targets"):
        preprocessor(SOURCES, TARGETS[:2])
    with pytest.raises(ValueError, match="both as single strings or both as batches"):
        preprocessor("the cat", TARGETS[:1])
    with pytest.raises(ValueError, match="expected strings"):
        preprocessor([1, 2])


def test_outputs_feed_the_transformer():
    """On every backend: padded batches train a tiny Transformer (loss from
    the labels, padding ignored) and source ids go to generate."""
    x, y = TransformerPreprocessor(TOKENIZER, source_length=8, target_length=6)(SOURCES, TARGETS)
    model = Transformer(vocabulary_size=len(VOCABULARY), num_layers=1, hidden_dim=8,
                        intermediate_dim=16, num_heads=2, max_sequence_length=16)
    model.compile(optimizer="adam")
    x = {k: v.numpy() for k, v in x.items()}
    loss = model.evaluate(x, y.numpy(), verbose=0, return_dict=True)["loss"]
    assert np.isfinite(loss) and 0.5 * np.log(len(VOCABULARY)) < loss < 3 * np.log(len(VOCABULARY))
    tokens = model.generate(x["encoder_token_ids"], beam_size=1, max_length=5)
    assert tuple(tokens.shape) == (3, 5)
