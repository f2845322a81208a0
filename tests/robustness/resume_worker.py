"""Training runs for tests/robustness/test_resume.py.

`python -m tests.robustness.resume_worker OUT_ROOT TASK:KILL_AT_EPOCH...`: each task's run
killed as an epoch ends, backed up to OUT_ROOT/TASK/backup and recorded in OUT_ROOT/TASK/resumed;
one interpreter for all (a fresh one costs 6-9 s of CPU): the runs but the last in children
forked once it has imported the frameworks, before either has started a runtime (each child
starts its own), the last in the interpreter itself. Exit status 9 for each: killed as planned.

TASK "finetune": a tiny `kzoo.BertClassifier` (dropout 0.1) fine-tuned on
texts in memory; "pretrain_accumulated": a tiny `kzoo.BertPretrainer` on
`kzoo.data.pretraining_dataset(...).repeat()` with `steps_per_epoch`,
accumulating gradients over 2 of the 3 batches of an epoch, so that epoch 0
ends (and is backed up) mid-accumulation. Both
train for `EPOCHS` epochs with `keras.callbacks.BackupAndRestore(BACKUP_DIR)`,
seeded with `keras.utils.set_random_seed(0)` as a reproducible script is. Each
epoch's loss is written to OUT_DIR/losses.json as it ends; with
KILL_AT_EPOCH, the process is killed (`os._exit`) as that epoch ends, just
after its backup; run again, it resumes. The weights at the end go to
OUT_DIR/weights.npz.
"""

import json
import os
import sys
import traceback

import keras
import numpy as np

import kzoo
from tests.test_case import FirstFitState

EPOCHS = 4
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film", "plot", "very", "not"]


class Recorder(keras.callbacks.Callback):
    def __init__(self, path, kill_at_epoch):
        super().__init__()
        self.path, self.kill_at_epoch = path, kill_at_epoch

    def on_epoch_end(self, epoch, logs=None):
        losses = json.load(open(self.path)) if os.path.exists(self.path) else {}
        losses[str(epoch)] = float(logs["loss"])
        with open(self.path, "w") as f:
            json.dump(losses, f)
        if epoch == self.kill_at_epoch:
            os._exit(9)  # as kill -9 would: no clean-up, no flush


def main(task, runs, kill_at_epoch=None):
    """Trains one model for each `(backup_dir, out_dir)` of `runs` in turn, each `fit` from
    the state the first began with (FirstFitState: one model, its steps traced once)."""
    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(1)  # as the test process (tests/conftest.py): the same sums, the same weights
    keras.utils.set_random_seed(0)
    words = VOCABULARY[5:]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=rng.integers(2, 7))) for _ in range(44)]
    backbone = kzoo.BertBackbone(vocabulary_size=len(VOCABULARY), num_layers=2, num_heads=2, hidden_dim=16,
                                 intermediate_dim=32, max_sequence_length=16, dropout=0.1)
    first_state = FirstFitState()
    if task == "pretrain_accumulated":
        tokenizer = kzoo.BertTokenizer(VOCABULARY)
        model = kzoo.BertPretrainer(backbone, tokenizer=tokenizer)
        model.compile(optimizer=keras.optimizers.Adam(1e-2, gradient_accumulation_steps=2))
        documents = [texts[i : i + 4] for i in range(0, len(texts), 4)]

        def fit(callbacks):
            dataset = kzoo.data.pretraining_dataset(documents, tokenizer, 16, 3, batch_size=4, seed=5, progress=False)
            model.fit(dataset.repeat(), steps_per_epoch=3, epochs=EPOCHS, callbacks=callbacks, verbose=0)
    else:
        # Enough examples (20 steps an epoch) that the loss falls within 4 epochs.
        texts = [" ".join(rng.choice(words, size=rng.integers(2, 7))) for _ in range(160)]
        labels = np.array([int("good" in text) for text in texts])
        model = kzoo.BertClassifier(backbone, num_classes=2, preprocessor=kzoo.BertTokenizer(VOCABULARY), dropout=0.1)
        model.set_sequence_length(10)
        model.compile(optimizer=keras.optimizers.Adam(3e-3))  # learns within 4 epochs: drift would show

        def fit(callbacks):
            model.fit(texts, labels, batch_size=8, epochs=EPOCHS, callbacks=callbacks, verbose=0)
    seeds = np.random.get_state()  # `fit` draws its shuffling seed from NumPy's
    for backup_dir, out_dir in runs:
        np.random.set_state(seeds)
        # The first state is put back before the backup, if any, is restored.
        fit([first_state, keras.callbacks.BackupAndRestore(backup_dir),
             Recorder(os.path.join(out_dir, "losses.json"), kill_at_epoch)])
        np.savez(os.path.join(out_dir, "weights.npz"), *[keras.ops.convert_to_numpy(w) for w in model.weights])


def killed_runs(out_root, kills):
    """Each `(task, kill_at_epoch)` of `kills` run and killed: all but the last in a child forked
    from this process, their exit statuses written to OUT_ROOT/statuses.json; the last in this
    process, whose exit status is its own."""
    statuses = {}
    for number, (task, kill_at_epoch) in enumerate(kills):
        out = os.path.join(out_root, task, "resumed")
        os.makedirs(out)
        run = [(os.path.join(out_root, task, "backup"), out)]
        if number == len(kills) - 1:
            with open(os.path.join(out_root, "statuses.json"), "w") as f:
                json.dump(statuses, f)
            main(task, run, kill_at_epoch)
            return
        pid = os.fork()
        if pid == 0:  # the child never returns to the parent's code
            status = 1
            try:
                main(task, run, kill_at_epoch)
                status = 0  # not killed: the test says so
            except Exception:  # noqa: BLE001 (any error: its traceback, then the status)
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(status)
        statuses[task] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


if __name__ == "__main__":
    killed_runs(sys.argv[1], [(kill.split(":")[0], int(kill.split(":")[1])) for kill in sys.argv[2:]])
