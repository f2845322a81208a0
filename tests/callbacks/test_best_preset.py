"""kzoo.BestPreset: the preset directory holds the best epoch's model, a
failed save leaves the previous best, and nothing is saved (one warning)
when the monitored value is not logged."""

import warnings

import keras
import numpy as np
import pytest

import kzoo
from kzoo.presets import directory
from tests.models.test_fit_validation import NAMES, tiny_classifier
from tests.models.bert.task_fixtures import topic_sentences

# A Keras callback's files and choices; fit with validation and EarlyStopping are tested on every
# backend by tests/models/test_fit_validation.py. Each test under one backend when the runs are divided.
pytestmark = pytest.mark.once


class EpochWeights(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append(self.model.get_weights())


def outputs_with(model, weights, texts):
    model.set_weights(weights)
    return model.predict(texts, verbose=0)


def test_best_epoch_with_early_stopping_reloads_as_the_restored_model(tmp_path):
    """Validation labels opposite to training's: val_loss worsens as the model
    learns, so the best epoch is not the last and restoring changes the weights."""
    model = tiny_classifier()
    texts, ids = topic_sentences(32, seed=1)
    flipped = [NAMES[(i + 1) % 3] for i in ids[:16]]
    epochs, best = EpochWeights(), kzoo.BestPreset(tmp_path / "best")
    stop = keras.callbacks.EarlyStopping(patience=1, restore_best_weights=True)
    model.fit(texts, ids, validation_data=(texts[:16], flipped), batch_size=8, epochs=4, verbose=0,
              callbacks=[epochs, best, stop])
    assert best.best_epoch == stop.best_epoch < len(epochs.weights) - 1
    # EarlyStopping(restore_best_weights=True) puts back exactly the best epoch's weights.
    assert max(np.max(np.abs(a - b)) for a, b in zip(model.get_weights(), epochs.weights[best.best_epoch])) == 0.0
    assert max(np.max(np.abs(a - b)) for a, b in zip(model.get_weights(), epochs.weights[-1])) > 1e-3
    reloaded = kzoo.BertClassifier.from_preset(tmp_path / "best")
    assert reloaded.class_names == NAMES
    np.testing.assert_allclose(reloaded.predict(texts, verbose=0), model.predict(texts, verbose=0), atol=1e-6)


def test_a_failed_save_leaves_the_previous_best(tmp_path, monkeypatch):
    model = tiny_classifier()
    texts, ids = topic_sentences(16, seed=0)
    epochs, best = EpochWeights(), kzoo.BestPreset(tmp_path / "best", monitor="loss", mode="min")
    saves = []
    write_metadata = directory._write_metadata

    def failing_third(scratch):  # the last write of the third save (weights written): a full disk
        saves.append(scratch)
        if len(saves) == 3:
            raise OSError(28, "No space left on device (injected)")
        return write_metadata(scratch)

    monkeypatch.setattr(directory, "_write_metadata", failing_third)
    with pytest.raises(OSError, match="injected"):
        model.fit(texts, ids, batch_size=8, epochs=3, verbose=0, callbacks=[epochs, best])
    assert best.best_epoch == 1 and len(epochs.weights) == 3
    reloaded = kzoo.BertClassifier.from_preset(tmp_path / "best")
    np.testing.assert_allclose(reloaded.predict(texts, verbose=0),
                               outputs_with(model, epochs.weights[1], texts), atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]  # no scratch directory left


def test_nothing_saved_without_the_monitored_value(tmp_path):
    model = tiny_classifier()
    texts, ids = topic_sentences(8, seed=0)
    best = kzoo.BestPreset(tmp_path / "best")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(texts, ids, epochs=2, verbose=0, callbacks=[best])
    messages = [str(w.message) for w in caught if "BestPreset" in str(w.message)]
    assert len(messages) == 1 and "monitors 'val_loss', which this fit does not log" in messages[0]
    assert "['accuracy', 'loss']" in messages[0] and not (tmp_path / "best").exists()


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode must be 'auto', 'min' or 'max'"):
        kzoo.BestPreset("out", mode="best")
    with pytest.raises(ValueError, match="cannot tell whether 'val_speed' is better higher or lower"):
        kzoo.BestPreset("out", monitor="val_speed")
    assert kzoo.BestPreset("out", monitor="val_accuracy")._sign == 1
    plain = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    plain.compile("sgd", "mse")
    with pytest.raises(ValueError, match="BestPreset saves kzoo models"):
        plain.fit(np.ones((2, 1)), np.ones(2), verbose=0, callbacks=[kzoo.BestPreset("out", monitor="loss")])
