"""Trains a small Transformer to translate English software messages into German.

"Attention Is All You Need" (Vaswani et al., 2017) trained on WMT 2014
English-German; this example uses the parallel corpus every Debian system
has offline: the German translations of its programs' messages, read at run
time from the gettext catalogues in /usr/share/locale (offline_corpora.py:
about 42,000 pairs, 250,000 words a side), split by message identity into
39,657 training, 1,022 development and 1,002 test pairs (translation_data.py:
no test message, nor a variant of it, is in training). The paper's recipe,
scaled down:

- a shared cased WordPiece vocabulary learned from both languages (sec. 5.1;
  4,000 tokens instead of 37,000);
- a post-LN encoder-decoder with tied embeddings and sinusoidal positions
  (sec. 3), N = 3, d_model = 256, d_ff = 1,024, h = 8, P_drop = 0.1 (6.5M
  parameters, 1,500 steps: what two CPU cores train in about half an hour);
- batches by approximate length of about 2,000 source and 2,000 target
  tokens (sec. 5.1: 25,000), each padded to its length bucket's boundary so
  that compiled training steps see six shapes only; label smoothing 0.1
  (sec. 5.4); Adam 0.9 / 0.98 / 1e-9 with eq. 3's schedule and 500 warmup
  steps (sec. 5.3: 4,000 of 100,000 steps);
- a checkpoint every twentieth of training, and the average of the last 5
  (sec. 6.1: every 10 minutes, the last 5; `--average-last`, `--checkpoint-every`);
- beam search with beam 4 and length penalty α = 0.6 (sec. 6.1).

It prints the learning curve (training loss and the development set's
per-token perplexity, Table 3's PPL, at each epoch's end) and, for the last
checkpoint and for the average, the development perplexity and the test
set's corpus BLEU and chrF (sacreBLEU, with their signatures) next to a
copy-the-source baseline (messages share names, options and placeholders
with their translations, so copying scores above zero); translates a few
test messages, draws the training curves (with the learning-rate schedule of
sec. 5.3) and the attention of one translation in the style of the paper's
Figures 3-5 (`training_curves.png` and `attention.png` in the output
directory) and saves the averaged model.

Run (KERAS_BACKEND picks TensorFlow, JAX or PyTorch):

    KERAS_BACKEND=jax python examples/transformer_translation.py

`--smoke` runs every step (training with validation and checkpoints,
evaluation, beam search, BLEU and chrF, averaging, saving, reloading) on
1,000 short message pairs, cut to 8 tokens (one length bucket: every batch
has the same shape, compiled once), with a tiny model (N = 1, d_model = 32)
for 8 steps in 2 epochs (the full run's 10 only validate and redraw the
curves more often), a checkpoint every 2 steps and the last 3 averaged, in
about 30 seconds, and saves
under the system temp dir (see example_runs.py).
"""

import os

# TensorFlow prints C++ lines (oneDNN, CUDA probes) that report nothing wrong: this script, an
# application, keeps its start-up lines off the terminal and the later ones unless you set
# TF_CPP_MIN_LOG_LEVEL yourself (0 shows those).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from kzoo_cli.quiet import import_kzoo

kzoo = import_kzoo()

import argparse
import time

import keras
import tensorflow as tf
from example_runs import parse_arguments, smoke_directory
from kzoo.progress import fit_progress
from translation_data import describe, translation_splits

from sacrebleu.metrics import CHRF

from kzoo import (CheckpointAveraging, Transformer, TransformerPreprocessor, TransformerTokenizer,
                  average_checkpoints, corpus_bleu, transformer_optimizer)
from kzoo.data import batch_by_length
from kzoo.models.transformer.transformer_inputs import check_config

BOUNDARIES = [8, 16, 24, 32, 48, 64]  # length buckets (those below --max-length, then --max-length)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1500, help="training steps")
    parser.add_argument("--epochs", type=int, default=10, help="the steps' parts, each ending with validation")
    parser.add_argument("--warmup-steps", type=int, default=500)
    parser.add_argument("--tokens-per-batch", type=int, default=2048)
    parser.add_argument("--vocabulary-size", type=int, default=4000)
    parser.add_argument("--bleu-sentences", type=int, default=400,
                        help="test messages translated for BLEU")
    parser.add_argument("--translation-batch", type=int, default=100,
                        help="sources per beam search call (one shape: one compilation)")
    parser.add_argument("--num-layers", type=int, default=3, help="N: encoder and decoder layers")
    parser.add_argument("--hidden-dim", type=int, default=256, help="d_model (d_ff is 4 times as large)")
    parser.add_argument("--num-heads", type=int, default=8, help="h: attention heads (d_model / h each)")
    parser.add_argument("--average-last", type=int, default=5,
                        help="K: also evaluate the average of the last K checkpoints (sec. 6.1: 5)")
    parser.add_argument("--checkpoint-every", type=int, default=0,
                        help="steps between checkpoints (0: a twentieth of --steps, so that the last 5 "
                             "span the last fifth of training)")
    parser.add_argument("--pairs", type=int, default=0,
                        help="use the first N training and N / 20 development and test pairs only (0: all)")
    parser.add_argument("--max-words", type=int, default=30, help="longest message kept, in words")
    parser.add_argument("--max-length", type=int, default=64,
                        help="tokens per source or target (longer ones are truncated)")
    parser.add_argument("--output", default="transformer_translation", help="directory for the saved model")
    args = parse_arguments(parser, {
        # One length bucket (8 tokens, longer pairs truncated) and batches of 400 // 8 = 50 pairs, as many
        # as are in development: every batch is 50 x 8, one compiled shape for training and one
        # for evaluation (each new shape compiles again on JAX and TensorFlow).
        "max_words": 4, "max_length": 8, "tokens_per_batch": 400,
        "steps": 8, "epochs": 2, "warmup_steps": 4, "vocabulary_size": 500, "bleu_sentences": 8,
        "translation_batch": 8, "num_layers": 1, "hidden_dim": 32, "num_heads": 4, "pairs": 1000,
        "average_last": 3, "checkpoint_every": 2,
        "output": smoke_directory("transformer_translation"),
    })
    # Refused before the corpus is read and the vocabulary learned (a minute of work).
    try:
        check_config(args.vocabulary_size, args.hidden_dim, args.num_heads, None, "sinusoidal")
        args.checkpoint_every = checkpoint_interval(
            args.steps // args.epochs * args.epochs, args.checkpoint_every, args.average_last)
    except ValueError as error:
        parser.error(str(error))
    return args


def checkpoint_interval(steps, every, average_last):
    """The steps between checkpoints (`every`, or a twentieth of `steps` when 0),
    or a `ValueError` when `average_last` is not between 1 and the number of
    checkpoints `steps` of training write (one every `every` steps, and the last step)."""
    every = every or max(1, steps // 20)
    if every < 1:
        raise ValueError(f"--checkpoint-every {every} must be a positive number of steps (0: a twentieth of --steps).")
    written = -(-steps // every)  # at every multiple of `every`, and at the last step
    if not 1 <= average_last <= written:
        raise ValueError(
            f"--average-last {average_last} must be between 1 and the {written} checkpoints that {steps} "
            f"training steps write (one every {every} steps); the paper averages the last 5 (sec. 6.1).")
    return every


def length_batches(preprocessor, sources, targets, tokens_per_batch, shuffle):
    """Batches of `({encoder_token_ids, decoder_token_ids}, labels)` by length
    (sec. 5.1), every tensor padded to its bucket's boundary."""
    x, y = preprocessor(sources, targets)  # eagerly, all at once: ragged (pairs, None)
    longest = preprocessor.source_length  # = target_length: the last boundary
    boundaries = [b for b in BOUNDARIES if b < longest] + [longest]
    # from_tensor_slices gives ragged specs of rank 0; a map makes them the plain
    # 1-D tensors that batch_by_length takes.
    pairs = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda x, y: (x, y)).cache()
    if shuffle:
        pairs = pairs.shuffle(len(sources), seed=0, reshuffle_each_iteration=True)
    batches = batch_by_length(pairs, tokens_per_batch, boundaries=boundaries, drop_remainder=shuffle)

    def pad_to_boundary(x, y):
        length = tf.reduce_max([tf.shape(t)[1] for t in tf.nest.flatten((x, y))])
        boundary = tf.gather(boundaries, tf.searchsorted(boundaries, [length])[0])
        return tf.nest.map_structure(lambda t: tf.pad(t, [[0, 0], [0, boundary - tf.shape(t)[1]]]), (x, y))

    batches = batches.map(pad_to_boundary)
    if shuffle:
        return batches
    # A fixed pass (evaluation): its length, counted once, spares Keras' "Your input
    # ran out of data" warning, which it gives at the end of a dataset of unknown length.
    batches = batches.cache()
    return batches.apply(tf.data.experimental.assert_cardinality(sum(1 for _ in batches)))


def scores(hypotheses, references):
    """Corpus BLEU and chrF (sacreBLEU's defaults) and their signatures."""
    bleu, chrf = corpus_bleu(hypotheses, references), CHRF()
    chrf_score = chrf.corpus_score(list(hypotheses), [list(references)]).score
    return float(bleu), chrf_score, f"BLEU {bleu.signature}; chrF {chrf.get_signature()}"


def main():
    args = parse_args()
    started = time.time()
    keras.utils.set_random_seed(0)

    # Split by message identity: no test message, nor a variant of it, is in training (translation_data.py).
    splits = translation_splits(max_words=args.max_words)
    if args.pairs:
        splits = {name: tuple(side[: args.pairs if name == "train" else args.pairs // 20] for side in pair)
                  for name, pair in splits.items()}
    print(describe(splits))
    (train_sources, train_targets), (dev_sources, dev_targets), (test_sources, test_targets) = (
        splits["train"], splits["dev"], splits["test"])

    tokenizer = TransformerTokenizer.train(train_sources + train_targets, args.vocabulary_size)
    preprocessor = TransformerPreprocessor(tokenizer, args.max_length, args.max_length, pad=False)
    print(f"shared vocabulary: {tokenizer.vocabulary_size()} WordPiece tokens")

    train = length_batches(preprocessor, train_sources, train_targets, args.tokens_per_batch, True)
    dev = length_batches(preprocessor, dev_sources, dev_targets, args.tokens_per_batch, False)

    model = Transformer(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=args.num_layers, hidden_dim=args.hidden_dim,
        intermediate_dim=4 * args.hidden_dim, num_heads=args.num_heads, dropout=0.1, label_smoothing=0.1,
        max_sequence_length=args.max_length + 64,
    )
    model.compile(optimizer=transformer_optimizer(args.hidden_dim, warmup_steps=args.warmup_steps))
    print(f"Transformer: {model.count_params():,} parameters", flush=True)
    os.makedirs(args.output, exist_ok=True)
    curves = kzoo.visualize.TrainingCurves(os.path.join(args.output, "training_curves.png"))
    # Sec. 6.1: the paper writes a checkpoint every 10 minutes and averages the last 5; here one every
    # --checkpoint-every steps, keeping the last --average-last, averaged after the last one is scored.
    averaging = CheckpointAveraging(os.path.join(args.output, "checkpoints"), every_n_steps=args.checkpoint_every,
                                    keep=args.average_last, average_at_end=False)
    model.fit(train.repeat(), steps_per_epoch=args.steps // args.epochs, epochs=args.epochs, validation_data=dev,
              **fit_progress(curves=curves, callbacks=[averaging]))
    print(f"training time {time.time() - started:.0f} s; learning curve (step: training loss, "
          f"development perplexity):")
    for step, loss, dev_perplexity in zip(curves.epoch_ends, curves.epoch_logs["loss"],
                                          curves.epoch_logs["val_perplexity"]):
        print(f"  {step:6d}: {loss:.3f}, {dev_perplexity:.2f}")

    count = min(args.bleu_sentences, len(test_sources))
    sources_for_bleu, references = test_sources[:count], test_targets[:count]
    copy_bleu, copy_chrf, signature = scores(sources_for_bleu, references)
    print(f"test: the first {count} messages ({signature}); copy-the-source baseline: BLEU {copy_bleu:.1f}, "
          f"chrF {copy_chrf:.1f}")
    # The model as training left it (the last checkpoint), then the mean of the last few (sec. 6.1).
    steps = [int(path.rsplit("-", 1)[1].split(".")[0]) for path in averaging.checkpoints]  # step-N.weights.h5
    for name, average in ((f"last checkpoint (step {steps[-1]})", False),
                          (f"average of the last {len(steps)} (steps {', '.join(map(str, steps))})", True)):
        if average:
            average_checkpoints(model, averaging.checkpoints)
        metrics = model.evaluate(dev, return_dict=True, verbose=0)
        hypotheses = kzoo.translate(model, preprocessor, sources_for_bleu, args.translation_batch,
                                    progress=True, beam_size=4, length_penalty=0.6)
        bleu, chrf, _ = scores(hypotheses, references)
        print(f"{name}: test BLEU {bleu:.1f}, chrF {chrf:.1f}; development perplexity "
              f"{metrics['perplexity']:.2f}, accuracy {metrics['masked_accuracy']:.3f}", flush=True)
    for i in range(min(8, count)):
        print(f"\n  source:      {sources_for_bleu[i]}\n  reference:   {references[i]}\n"
              f"  Transformer: {hypotheses[i]}")

    # Figures 3-5 of the paper for one test message: encoder self-attention, encoder-decoder attention.
    picture = os.path.join(args.output, "attention.png")
    kzoo.visualize.plot_translation_attention(model, preprocessor, test_sources[0], path=picture)
    print(f"\npictures: {picture}, {curves.path}")
    path = os.path.join(args.output, "transformer_translation.keras")
    model.save(path)
    preprocessor.save_to_preset(os.path.join(args.output, "preprocessor"))
    batch = next(iter(dev))[0]
    rows = int(batch["encoder_token_ids"].shape[0])  # one batch: by 32 rows, predict would compile two shapes
    same = keras.ops.convert_to_numpy(keras.saving.load_model(path).predict(batch, batch_size=rows, verbose=0))
    difference = float(abs(same - keras.ops.convert_to_numpy(model.predict(batch, batch_size=rows, verbose=0))).max())
    print(f"\nsaved to {path}; reloaded, its logits differ by at most {difference:.1e}")
    print(f"total time {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
