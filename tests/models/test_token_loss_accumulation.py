"""Gradient accumulation with token-level losses (`kzoo.models.accumulation`): k
micro-batches of b update the weights as one batch of k·b when the micro-batches
hold different numbers of tokens, for the token classifier (cross-entropy over
labelled tokens), the masked LM with NSP (over masked positions, and pairs) and
the Transformer (label-smoothed, over non-padding targets). A mean over each
micro-batch's own tokens would weigh the tokens of a short micro-batch more
(transformers#35438)."""

import keras
import numpy as np
import pytest

import kzoo
from kzoo.models import accumulation
from tests.models.bert.task_fixtures import VOCABULARY

# float32 rounding: the two ways sum in different orders, and Adam's division by
# sqrt(v) makes a gradient's last bits a weight's 1e-6 (seen at XLA level 0).
TOLERANCE = 3e-6
WORDS = VOCABULARY[5:25]


def _weights(model):
    # Attention's key bias shifts every score of a query alike, which the softmax
    # cancels: its gradient is rounding noise, which Adam (ε = 1e-9 in the
    # Transformer's recipe) turns into steps of the learning rate's size.
    return np.concatenate([keras.ops.convert_to_numpy(v).ravel() for v in model.trainable_variables
                           if not v.path.endswith("key/bias")])


def _backbone():
    return kzoo.BertBackbone(vocabulary_size=len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=16,
                             intermediate_dim=32, max_sequence_length=16, dropout=0.0)


def _token_classifier(batch_size, accumulate, sentences, labels):
    keras.utils.set_random_seed(0)
    preprocessor = kzoo.BertTokenClassifierPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16)
    model = kzoo.BertTokenClassifier(_backbone(), num_classes=3, dropout=0.0, preprocessor=preprocessor)
    model.compile(optimizer=kzoo.bert_finetuning_optimizer(
        4, learning_rate=1e-2, warmup_proportion=0.5, gradient_accumulation_steps=accumulate))
    model.fit(sentences, labels, batch_size=batch_size, epochs=2, shuffle=False, verbose=0)
    return _weights(model)


def _masked_lm(batch_size, accumulate, features, labels):
    keras.utils.set_random_seed(0)
    model = kzoo.BertPretrainer(_backbone())
    model.compile(optimizer=kzoo.bert_pretraining_optimizer(
        total_steps=4, warmup_steps=1, learning_rate=1e-2, gradient_accumulation_steps=accumulate))
    model.fit(features, labels, batch_size=batch_size, epochs=2, shuffle=False, verbose=0)
    return _weights(model)


def _transformer(batch_size, accumulate, x, y):
    keras.utils.set_random_seed(0)
    model = kzoo.Transformer(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             max_sequence_length=16, dropout=0.0, label_smoothing=0.1)
    model.compile(optimizer=kzoo.transformer_optimizer(16, warmup_steps=2, scale=0.03,
                                                       gradient_accumulation_steps=accumulate))
    model.fit(x, y, batch_size=batch_size, epochs=2, shuffle=False, verbose=0)
    return _weights(model)


def _sentences(rng):
    """16 sentences, the first 4 of each 8 short (1-2 words), the last 4 long
    (6-8 words): micro-batches of 4 hold few and many labelled tokens."""
    lengths = [rng.integers(1, 3) if i % 8 < 4 else rng.integers(6, 9) for i in range(16)]
    sentences = [list(rng.choice(WORDS, size=n)) for n in lengths]
    return sentences, [list(rng.integers(0, 3, size=len(s))) for s in sentences]


def _pretraining_batch(rng):
    """16 packed sequences whose masked predictions are 1 (first 4 of each 8) or 4."""
    token_ids = rng.integers(5, len(VOCABULARY), size=(16, 12))
    predictions = np.array([1 if i % 8 < 4 else 4 for i in range(16)])
    weights = (np.arange(4)[None, :] < predictions[:, None]).astype("float32")
    features = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
                "padding_mask": np.ones_like(token_ids), "mask_positions": np.tile(np.arange(1, 5), (16, 1)) * 2}
    labels = {"mask_ids": rng.integers(5, len(VOCABULARY), size=(16, 4)), "mask_weights": weights,
              "next_sentence_label": rng.integers(0, 2, size=16)}
    return features, labels


def _translation_pairs(rng):
    """16 pairs whose targets hold 2 (first 4 of each 8) or 9 real tokens, padded to 10."""
    lengths = np.array([2 if i % 8 < 4 else 9 for i in range(16)])
    target = rng.integers(4, 30, size=(16, 10)) * (np.arange(10)[None, :] < lengths[:, None])
    decoder = np.concatenate([np.full((16, 1), 2), target[:, :-1]], axis=1)
    source = rng.integers(4, 30, size=(16, 8))
    return {"encoder_token_ids": source, "decoder_token_ids": decoder}, target


CASES = {"token_classifier": (_token_classifier, _sentences), "masked_lm": (_masked_lm, _pretraining_batch),
         "transformer": (_transformer, _translation_pairs)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_micro_batches_of_different_token_counts_update_as_the_big_batch(case):
    train, data = CASES[case]
    x, y = data(np.random.default_rng(0))
    one_batch = train(8, None, x, y)
    np.testing.assert_allclose(train(4, 2, x, y), one_batch, rtol=0, atol=TOLERANCE)


def test_the_transformer_schedule_counts_optimizer_steps():
    schedule = kzoo.TransformerSchedule(16, warmup_steps=2, gradient_accumulation_steps=3)
    plain = kzoo.TransformerSchedule(16, warmup_steps=2)
    assert [float(schedule(i)) for i in range(9)] == [float(plain(i // 3)) for i in range(9)]
    restored = kzoo.TransformerSchedule.from_config(schedule.get_config())
    assert restored.gradient_accumulation_steps == 3
    optimizer = kzoo.transformer_optimizer(16, gradient_accumulation_steps=3)
    assert optimizer.gradient_accumulation_steps == 3 and optimizer.learning_rate is not None
    with pytest.raises(ValueError, match="gradient_accumulation_steps must be a positive int or None; got 2.5"):
        kzoo.transformer_optimizer(16, gradient_accumulation_steps=2.5)


def test_each_epoch_is_whole_groups_each_micro_batch_with_its_group_counts():
    batches, normalisers = accumulation.micro_batches([np.arange(5), np.array([5])], 2, {"tokens": np.arange(6.0)})
    assert [len(b) for b in batches] == [3, 2, 1, 1]
    assert [n["tokens"] for n in normalisers] == [5.0, 5.0, 2.5, np.inf]  # the filler weighs nothing


def test_a_dataset_is_normalised_per_micro_batch_with_a_warning():
    import tensorflow as tf

    x, y = _translation_pairs(np.random.default_rng(0))
    model = kzoo.Transformer(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                             max_sequence_length=16)
    model.compile(optimizer=kzoo.transformer_optimizer(8, gradient_accumulation_steps=2))
    with pytest.warns(UserWarning, match="each micro-batch is normalised by its own tokens"):
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), epochs=1, verbose=0)
