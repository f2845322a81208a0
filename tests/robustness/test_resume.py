"""Exact resume: a `fit` killed as an epoch ends and
resumed by `keras.callbacks.BackupAndRestore` reproduces the uninterrupted
run on the same backend: per-epoch losses and final weights to 1e-6, for
fine-tuning on data in memory and pre-training on a `tf.data` stream.
Three things make it so: `kzoo.layers.Dropout` saves its random state with
the weights, `Task.fit` orders data in memory by epoch, and reads a stream
(`steps_per_epoch`) on from the batch where the backup stopped
(`kzoo.models.batching`). The killed runs are processes of their own
(tests/robustness/resume_worker.py: one interpreter, the last task in it, others in forked children),
dead by `os._exit`: all the resumed run can know of them is on disk. The
resumed run and then the uninterrupted one are the same code in the test's
process, one model whose second `fit` starts from the state its first began
with (a fresh interpreter costs 6-9 s of CPU to import the frameworks, a fresh
model's traced steps 1.5-2 s on TensorFlow); the resumed run comes first, so
no state of this task's runs is in memory when it starts."""

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


TASKS = {"finetune": 1, "pretrain_accumulated": 0}  # each task's epoch where its first run is killed
ON_TENSORFLOW = keras.backend.backend() == "tensorflow"


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """Every task of this backend's run, killed at its epoch, in one worker process: (root, {task: status}, stderr)."""
    root = tmp_path_factory.mktemp("killed")
    kills = [f"{task}:{epoch}" for task, epoch in TASKS.items() if ON_TENSORFLOW or task == "finetune"]
    finished = subprocess.run(
        [sys.executable, "-m", "tests.robustness.resume_worker", str(root), *kills],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "KERAS_BACKEND": keras.backend.backend()},
    )
    assert os.path.isfile(root / "statuses.json"), finished.stderr[-3000:]
    statuses = {**json.load(open(root / "statuses.json")), kills[-1].split(":")[0]: finished.returncode}
    return root, statuses, finished.stderr[-3000:]


def _results(out):
    losses = json.load(open(os.path.join(out, "losses.json")))
    weights = np.load(os.path.join(out, "weights.npz"))
    return [losses[str(epoch)] for epoch in range(resume_worker.EPOCHS)], [weights[k] for k in sorted(weights, key=lambda k: int(k.split("_")[1]))]


@pytest.mark.parametrize("task", [
    "finetune",
    # A stream read on from the backup's batch, and more: 3 batches an epoch, 2 per
    # update, so epoch 0 ends with one batch's gradient in Keras' accumulators,
    # optimizer variables saved with the backup. (The case without accumulation
    # checked the stream alone, in 54 s more of CI.)
    pytest.param("pretrain_accumulated", marks=pytest.mark.skipif(
        not ON_TENSORFLOW,
        reason="reading a tf.data stream on from the backup's batch is the same on every backend; "
               "each backend's random state and weights are resumed by the fine-tuning case")),
])
def test_fit_killed_at_an_epoch_end_and_resumed_matches_the_uninterrupted_run(killed, tmp_path, task):
    root, statuses, stderr = killed
    kill_at_epoch, backup, resumed = TASKS[task], root / task / "backup", root / task / "resumed"
    assert statuses[task] == 9, stderr
    assert sorted(json.load(open(resumed / "losses.json"))) == [str(e) for e in range(kill_at_epoch + 1)]
    assert os.path.isfile(backup / "latest.weights.h5")
    # Resumed, then run uninterrupted, in this process (the same code, seeds
    # and thread count as the worker's: one interpreter fewer to start).
    os.makedirs(tmp_path / "full")
    resume_worker.main(task, [(str(backup), str(resumed)), (str(tmp_path / "backup_full"), str(tmp_path / "full"))])
    resumed_losses, resumed_weights = _results(resumed)
    losses, weights = _results(tmp_path / "full")
    assert losses[-1] < losses[0] - 0.02, losses  # it learns, so a drift would show
    np.testing.assert_allclose(resumed_losses, losses, rtol=0, atol=1e-6)
    assert len(resumed_weights) == len(weights)
    for resumed_weight, uninterrupted in zip(resumed_weights, weights):
        np.testing.assert_allclose(resumed_weight, uninterrupted, rtol=0, atol=1e-6)
    assert not os.path.exists(backup)  # BackupAndRestore removes it once done


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
