"""Exact resume: a `fit` killed as an epoch ends and
resumed by `keras.callbacks.BackupAndRestore` reproduces the uninterrupted
run on the same backend: per-epoch losses and final weights to 1e-6, for
fine-tuning on data in memory and pre-training on a `tf.data` stream.
Three things make it so: `kzoo.layers.Dropout` saves its random state with
the weights, `Task.fit` orders data in memory by epoch, and reads a stream
(`steps_per_epoch`) on from the batch where the backup stopped
(`kzoo.models.batching`). The killed run is a process of its own
(tests/robustness/resume_worker.py), dead by `os._exit`: all the resumed run
can know of it is on disk. The resumed run and then the uninterrupted one
are the same code in the test's process (a fresh interpreter costs 6-9 s of
CPU to import the frameworks); the resumed run comes first, so no state of
this task's runs is in memory when it starts."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import kzoo
from kzoo.layers.dropout import SEED_STATE
from kzoo.presets.directory import weight_shapes
from tests.robustness import resume_worker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(task, backup, out, *kill_at_epoch):
    os.makedirs(out, exist_ok=True)
    finished = subprocess.run(
        [sys.executable, "-m", "tests.robustness.resume_worker", task, str(backup), str(out),
         *map(str, kill_at_epoch)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "KERAS_BACKEND": keras.backend.backend()},
    )
    return finished.returncode, finished.stderr[-3000:]


def _results(out):
    losses = json.load(open(os.path.join(out, "losses.json")))
    weights = np.load(os.path.join(out, "weights.npz"))
    return [losses[str(epoch)] for epoch in range(resume_worker.EPOCHS)], [weights[k] for k in sorted(weights, key=lambda k: int(k.split("_")[1]))]


ON_TENSORFLOW = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="reading a tf.data stream on from the backup's batch is the same on every backend; "
           "each backend's random state and weights are resumed by the fine-tuning case")


@pytest.mark.parametrize("task, kill_at_epoch", [
    ("finetune", 1),
    # A stream read on from the backup's batch, and more: 3 batches an epoch, 2 per
    # update, so epoch 0 ends with one batch's gradient in Keras' accumulators,
    # optimizer variables saved with the backup. (The case without accumulation
    # checked the stream alone, in 54 s more of CI.)
    pytest.param("pretrain_accumulated", 0, marks=ON_TENSORFLOW),
])
def test_fit_killed_at_an_epoch_end_and_resumed_matches_the_uninterrupted_run(tmp_path, task, kill_at_epoch):
    code, stderr = _run(task, tmp_path / "backup", tmp_path / "resumed", kill_at_epoch)
    assert code == 9, stderr
    assert sorted(json.load(open(tmp_path / "resumed" / "losses.json"))) == [str(e) for e in range(kill_at_epoch + 1)]
    assert os.path.isfile(tmp_path / "backup" / "latest.weights.h5")
    # Resumed, then run uninterrupted, in this process (the same code, seeds
    # and thread count as the worker's: one interpreter fewer to start).
    resume_worker.main(task, str(tmp_path / "backup"), str(tmp_path / "resumed"))
    resumed_losses, resumed_weights = _results(tmp_path / "resumed")
    os.makedirs(tmp_path / "full")
    resume_worker.main(task, str(tmp_path / "backup_full"), str(tmp_path / "full"))
    losses, weights = _results(tmp_path / "full")
    assert losses[-1] < losses[0] - 0.02, losses  # it learns, so a drift would show
    np.testing.assert_allclose(resumed_losses, losses, rtol=0, atol=1e-6)
    assert len(resumed_weights) == len(weights)
    for resumed, uninterrupted in zip(resumed_weights, weights):
        np.testing.assert_allclose(resumed, uninterrupted, rtol=0, atol=1e-6)
    assert not os.path.exists(tmp_path / "backup")  # BackupAndRestore removes it once done


def test_dropout_random_state_is_saved_with_the_weights(tmp_path):
    model = kzoo.BertClassifier(kzoo.BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
                                                  intermediate_dim=16, max_sequence_length=8), num_classes=2)
    states = [v for v in model.variables if v.path.endswith(SEED_STATE)]
    assert len(states) == 5, [v.path for v in states]  # embeddings, attention, 2 residuals, head
    for k, state in enumerate(states):
        state.assign(np.array([7 + k, 100 + k]).astype(state.dtype))
    path = str(tmp_path / "model.weights.h5")
    model.save_weights(path)
    inputs = {"token_ids": np.ones((1, 8), "int32"), "segment_ids": np.zeros((1, 8), "int32"),
              "padding_mask": np.ones((1, 8), "int32")}
    model(inputs, training=True)  # every dropout draws: every state moves on
    assert [keras.ops.convert_to_numpy(s)[1] for s in states] == [101 + k for k in range(5)]
    model.load_weights(path)
    assert [keras.ops.convert_to_numpy(s).tolist() for s in states] == [[7 + k, 100 + k] for k in range(5)]
    # Not a weight: preset weight checks and parameter counts leave it out.
    assert not any(name.endswith(SEED_STATE) for name in weight_shapes(path))
    assert len(weight_shapes(path)) == len(model.weights)
