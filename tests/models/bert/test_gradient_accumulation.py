"""Gradient accumulation through kzoo's BERT optimizer: k micro-batches of b update
the weights as one batch of k·b (weight decay, clipping at global norm 1.0 on the
accumulated gradient, the schedule counting optimizer steps)."""

import keras
import numpy as np
import pytest

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, topic_sentences

TOLERANCE = 1e-6


def _trained(batch_size, accumulate, total_steps):
    keras.utils.set_random_seed(0)
    backbone = kzoo.BertBackbone(vocabulary_size=len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=16,
                                 intermediate_dim=32, max_sequence_length=32, dropout=0.0)
    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=16, padding="max_length")
    model = kzoo.BertClassifier(backbone, num_classes=3, dropout=0.0, preprocessor=preprocessor)
    model.compile(optimizer=kzoo.bert_finetuning_optimizer(
        total_steps, learning_rate=1e-2, warmup_proportion=0.5, gradient_accumulation_steps=accumulate))
    texts, labels = topic_sentences(32, seed=0)
    model.fit(texts, labels, batch_size=batch_size, epochs=2, shuffle=False, verbose=0)
    return np.concatenate([keras.ops.convert_to_numpy(v).ravel() for v in model.trainable_variables])


@pytest.mark.parametrize("total_steps", [None, 4])  # a constant rate; warm-up then decay over 4 updates
def test_two_micro_batches_of_8_update_as_one_batch_of_16(total_steps):
    one_batch = _trained(16, None, total_steps)
    accumulated = _trained(8, 2, total_steps)
    if total_steps is None:  # smaller batches alone differ: the comparison can fail (once is enough)
        assert np.abs(one_batch - _trained(8, None, total_steps)).max() > 1e-3
    np.testing.assert_allclose(accumulated, one_batch, rtol=0, atol=TOLERANCE)


def test_the_schedule_counts_optimizer_steps():
    schedule = kzoo.LinearWarmupLinearDecay(1e-4, warmup_steps=2, total_steps=4, gradient_accumulation_steps=3)
    rates = [round(float(schedule(micro_batch)), 8) for micro_batch in range(12)]
    assert rates == [0.0] * 3 + [5e-05] * 3 + [1e-4] * 3 + [5e-05] * 3
    restored = kzoo.LinearWarmupLinearDecay.from_config(schedule.get_config())
    assert restored.gradient_accumulation_steps == 3
    with pytest.raises(ValueError, match="gradient_accumulation_steps must be a positive int"):
        kzoo.bert_pretraining_optimizer(gradient_accumulation_steps=0)


def test_keras_own_adamw_accumulates_as_the_big_batch():
    """Keras' AdamW without clipping: on TensorFlow an embedding lookup's sparse
    gradient once updated only the looked-up rows in the big batch (lazy Adam)
    and every row when accumulated, 1.6e-2 apart; kzoo's tables keep it dense."""

    def trained(batch_size, accumulate):
        keras.utils.set_random_seed(0)
        backbone = kzoo.BertBackbone(vocabulary_size=len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=16,
                                     intermediate_dim=32, max_sequence_length=32, dropout=0.0)
        preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=16,
                                             padding="max_length")
        model = kzoo.BertClassifier(backbone, num_classes=3, dropout=0.0, preprocessor=preprocessor)
        extra = {"gradient_accumulation_steps": accumulate} if accumulate else {}
        model.compile(optimizer=keras.optimizers.AdamW(1e-2, **extra))
        texts, labels = topic_sentences(32, seed=0)
        model.fit(texts, labels, batch_size=batch_size, epochs=1, shuffle=False, verbose=0)
        return np.concatenate([keras.ops.convert_to_numpy(v).ravel() for v in model.trainable_variables])

    np.testing.assert_allclose(trained(8, 2), trained(16, None), rtol=0, atol=TOLERANCE)
