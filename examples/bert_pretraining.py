"""Pre-train a small BERT from scratch on CPython's own documentation (BERT sec. 3.1).

    KERAS_BACKEND=jax python examples/bert_pretraining.py

1. Reads the documentation that ships with Python (manual topics and the
   standard library's docstrings; see offline_corpora.py): one document per
   topic or module, so next sentence prediction has real document structure.
   5% of the documents are held out.
2. Learns a WordPiece vocabulary from the training documents.
3. Builds masked-LM + NSP examples with `kzoo.data.pretraining_dataset`
   (15% of tokens, 80/10/10; 50% IsNext).
4. Pre-trains a `kzoo.BertPretrainer` in the paper's two phases (here 90% of
   the steps at length 64, the last 10% at 128) with the paper's optimizer
   (AdamW, warm-up then linear decay, no decay on LayerNorm and biases).
5. Reports MLM and NSP accuracy on held-out documents next to trivial
   baselines (the training curves of both phases, with the learning rate,
   drawn to `<output>-training_curves.png` as it trains), and saves the
   model as a kzoo preset directory that
   `kzoo.BertBackbone.from_preset(path)` and the task models load.

Runs in about 5 minutes on 2 CPU cores with the defaults (15 minutes on a
loaded machine). `python examples/bert_finetuning.py --preset
pretrained/bert_python_docs` then fine-tunes the saved model (the main job,
bert_finetuning.py, fine-tunes a released pre-trained BERT by default).

`--smoke` runs every step above (both phases, evaluation, saving, reloading)
on 40 documents with a tiny model (one layer: each layer adds a third to the
time its steps take to trace and compile) for 20 steps, in about 20 seconds, and
saves under the system temp dir (see example_runs.py), where
`bert_finetuning.py --smoke` finds it.

With `--distributed`, trains on every device and host with
`kzoo.distribution.setup()` (keras.distribution on JAX, tf.distribute on
TensorFlow, DDP under torchrun); `--batch-size` is then the global batch
(the paper's 256 on TPU pods, A.2). See docs/guides/distributed.md.
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
import random
import time

import keras
import numpy as np

from example_runs import parse_arguments, smoke_directory
from kzoo.progress import fit_progress
from offline_corpora import python_documentation


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="pretrained/bert_python_docs", help="preset directory to write")
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--num-heads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000, help="optimizer steps, both phases")
    parser.add_argument("--batch-size", type=int, default=32, help="global batch size")
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--dupe-factor", type=int, default=5, help="passes over the corpus when pairing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--distributed", action="store_true",
                        help="train on every device/host with kzoo.distribution.setup()")
    parser.add_argument("--model-parallel", type=int, default=1,
                        help="with --distributed on JAX: devices each model replica is sharded over")
    parser.add_argument("--documents", type=int, default=0, help="use the first N documents only (0: all)")
    return parse_arguments(parser, {
        "output": smoke_directory("bert_python_docs"), "documents": 40, "vocabulary_size": 1000,
        "num_layers": 1, "hidden_dim": 32, "steps": 20, "batch_size": 8, "dupe_factor": 1,
    })


def split_documents(documents, held_out_fraction, seed):
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    cut = max(2, int(len(documents) * held_out_fraction))
    return [documents[i] for i in order[cut:]], [documents[i] for i in order[:cut]]


def baselines(dataset):
    """Held-out accuracy of predicting the most frequent masked token and the majority NSP label."""
    tokens, labels = collections.Counter(), collections.Counter()
    for _, y in dataset.as_numpy_iterator():
        tokens.update(y["mask_ids"][y["mask_weights"] > 0].tolist())
        labels.update(y["next_sentence_label"].tolist())
    return tokens.most_common(1)[0][1] / sum(tokens.values()), labels.most_common(1)[0][1] / sum(labels.values())


def main():
    args = parse_args()
    start = time.perf_counter()
    distributed = (kzoo.distribution.setup(model_parallel=args.model_parallel) if args.distributed
                   else kzoo.distribution.Distributed())
    print(f"engine: {distributed.engine}, {distributed.num_replicas} replica(s), global batch {args.batch_size}")
    documents = python_documentation()[: args.documents or None]
    train_documents, held_out_documents = split_documents(documents, 0.05, args.seed)
    sentences = [s for d in train_documents for s in d]
    print(f"corpus: {len(documents)} documents, {len(sentences)} training sentences; "
          f"{len(held_out_documents)} documents held out")

    vocabulary = kzoo.learn_wordpiece_vocabulary(sentences, args.vocabulary_size, lowercase=True)
    tokenizer = kzoo.BertTokenizer(vocabulary, lowercase=True)
    print(f"vocabulary: {tokenizer.vocabulary_size()} WordPiece tokens")

    with distributed.scope():  # weights replicated, mirrored or sharded by the engine
        backbone = kzoo.BertBackbone(
            vocabulary_size=tokenizer.vocabulary_size(),
            num_layers=args.num_layers,
            num_heads=args.num_heads,
            hidden_dim=args.hidden_dim,
            intermediate_dim=4 * args.hidden_dim,
            max_sequence_length=128,
        )
        model = kzoo.BertPretrainer(backbone, tokenizer=tokenizer)
        model.compile(
            optimizer=kzoo.bert_pretraining_optimizer(
                total_steps=args.steps, warmup_steps=args.steps // 10, learning_rate=args.learning_rate
            )
        )
    print(f"model: L={args.num_layers} H={args.hidden_dim} A={args.num_heads}, "
          f"{model.count_params():,} parameters")

    phases = kzoo.pretraining_phases(args.steps, phase_one_sequence_length=64, phase_two_sequence_length=128)
    # One drawing over both phases: loss, MLM/NSP accuracy and the learning rate (A.2) per step.
    curves = kzoo.visualize.TrainingCurves(f"{args.output}-training_curves.png") if distributed.is_chief else None
    for phase in phases:
        dataset = kzoo.data.pretraining_dataset(
            train_documents, tokenizer, phase.sequence_length, phase.max_predictions_per_seq,
            batch_size=args.batch_size, seed=args.seed + phase.first_step, dupe_factor=args.dupe_factor,
            drop_remainder=True,
        )
        print(f"phase: length {phase.sequence_length}, {phase.steps} steps from step {phase.first_step}", flush=True)
        distributed.fit(model, dataset.repeat(), epochs=1, steps_per_epoch=phase.steps,
                        **fit_progress(distributed, curves))

    held_out = kzoo.data.pretraining_dataset(
        held_out_documents, tokenizer, 128, batch_size=args.batch_size, seed=1234, progress=False
    ).cache()
    with distributed.scope():
        results = model.evaluate(held_out, return_dict=True, verbose=0)
    mlm_baseline, nsp_baseline = baselines(held_out)
    print("\nheld-out documents (never seen in training):")
    print(f"  MLM accuracy {results['mlm_accuracy']:.3f}  (most frequent token: {mlm_baseline:.3f})")
    print(f"  NSP accuracy {results['nsp_accuracy']:.3f}  (majority label: {nsp_baseline:.3f})")

    if not distributed.is_chief:
        return  # process 0 writes the preset
    model.save_to_preset(args.output)
    print(f"training curves: {args.output}-training_curves.png")
    print(f"saved the pre-trained model to the preset directory {args.output}/ "
          f"(total {time.perf_counter() - start:.0f} s)")

    # The same preset loads as a backbone for fine-tuning.
    reloaded = kzoo.BertBackbone.from_preset(args.output)
    probe = {"token_ids": np.array([[tokenizer.cls_token_id, tokenizer.sep_token_id]])}
    pooled = [keras.ops.convert_to_numpy(m(probe)["pooled_output"]) for m in (reloaded, backbone)]
    assert np.allclose(*pooled, atol=1e-5)


if __name__ == "__main__":
    main()
