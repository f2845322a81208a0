"""Builds a BERT from a preset, runs it on a batch and prints shapes and size.

    python examples/bert_backbone_demo.py --preset bert_base_uncased
    KERAS_BACKEND=jax python examples/bert_backbone_demo.py --preset bert_tiny --random-weights

A preset with released weights downloads them once (see `kzoo.list_presets()`);
`--random-weights` builds the architecture only (`load_weights=False`: no
network), as do the architecture-only presets. `--smoke` runs the same steps
with the smallest preset (bert_tiny) and random weights on a batch of 2 x 16
tokens. The batch is random token ids, so the outputs show shapes and speed,
not meaning.
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
import warnings

import keras
import numpy as np

from example_runs import parse_arguments


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="bert_base_uncased", choices=sorted(kzoo.list_presets("bert")))
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--random-weights", action="store_true",
                        help="build the architecture only (load_weights=False): no download")
    args = parse_arguments(parser, {"preset": "bert_tiny", "batch_size": 2, "sequence_length": 16,
                                    "random_weights": True})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an architecture-only preset's "random weights" warning, explained above
        backbone = kzoo.BertBackbone.from_preset(args.preset, load_weights=not args.random_weights)
    print(f"backend: {keras.backend.backend()}")
    print(f"preset: {args.preset}: {kzoo.list_presets()[args.preset]}")
    print(f"parameters: {backbone.count_params():,}")

    # A batch of [CLS] A [SEP] B [SEP] sequences, the second half of the batch padded.
    rng = np.random.default_rng(0)
    batch, length = args.batch_size, args.sequence_length
    token_ids = rng.integers(1000, backbone.vocabulary_size, size=(batch, length))
    lengths = np.where(np.arange(batch) < batch // 2, length, length // 2)
    padding_mask = (np.arange(length)[None, :] < lengths[:, None]).astype("int32")
    segment_ids = (np.arange(length)[None, :] >= lengths[:, None] // 2).astype("int32") * padding_mask
    token_ids = np.where(padding_mask == 1, token_ids, 0)
    token_ids[:, 0] = 101  # [CLS]
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}

    start = time.perf_counter()
    outputs = backbone(inputs, return_hidden_states=True)
    elapsed = time.perf_counter() - start
    print(f"inputs: token_ids {token_ids.shape}, {int(padding_mask.sum())} real tokens")
    for name, value in outputs.items():
        if isinstance(value, list):
            print(f"{name}: {len(value)} x {tuple(value[0].shape)}")
        else:
            print(f"{name}: {tuple(value.shape)}")
    print(f"forward pass: {elapsed:.2f} s (eager, first call)")


if __name__ == "__main__":
    main()
