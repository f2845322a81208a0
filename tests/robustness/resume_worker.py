"""A training run for tests/robustness/test_resume.py, in its own process:
`python -m tests.robustness.resume_worker TASK BACKUP_DIR OUT_DIR [KILL_AT_EPOCH]`.

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

import keras
import numpy as np

import kzoo

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


def main(task, backup_dir, out_dir, kill_at_epoch=None):
    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(1)  # as the test process (tests/conftest.py): the same sums, the same weights
    keras.utils.set_random_seed(0)
    words = VOCABULARY[5:]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=rng.integers(2, 7))) for _ in range(44)]
    backbone = kzoo.BertBackbone(vocabulary_size=len(VOCABULARY), num_layers=2, num_heads=2, hidden_dim=16,
                                 intermediate_dim=32, max_sequence_length=16, dropout=0.1)
    callbacks = [keras.callbacks.BackupAndRestore(backup_dir), Recorder(os.path.join(out_dir, "losses.json"), kill_at_epoch)]
    if task == "pretrain_accumulated":
        tokenizer = kzoo.BertTokenizer(VOCABULARY)
        model = kzoo.BertPretrainer(backbone, tokenizer=tokenizer)
        model.compile(optimizer=keras.optimizers.Adam(1e-2, gradient_accumulation_steps=2))
        documents = [texts[i : i + 4] for i in range(0, len(texts), 4)]
        dataset = kzoo.data.pretraining_dataset(documents, tokenizer, 16, 3, batch_size=4, seed=5, progress=False)
        model.fit(dataset.repeat(), steps_per_epoch=3, epochs=EPOCHS, callbacks=callbacks, verbose=0)
    else:
        # Enough examples (20 steps an epoch) that the loss falls within 4 epochs.
        texts = [" ".join(rng.choice(words, size=rng.integers(2, 7))) for _ in range(160)]
        labels = np.array([int("good" in text) for text in texts])
        model = kzoo.BertClassifier(backbone, num_classes=2, preprocessor=kzoo.BertTokenizer(VOCABULARY), dropout=0.1)
        model.set_sequence_length(10)
        model.compile(optimizer=keras.optimizers.Adam(3e-3))  # learns within 4 epochs: drift would show
        model.fit(texts, labels, batch_size=8, epochs=EPOCHS, callbacks=callbacks, verbose=0)
    np.savez(os.path.join(out_dir, "weights.npz"), *[keras.ops.convert_to_numpy(w) for w in model.weights])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else None)
