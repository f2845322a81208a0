"""Pre-training input pipeline speed: kzoo vs KerasHub (keras-nlp) vs Hugging Face.

Run by hand, never in tests:

    python benchmarks/pretraining_data.py --rounds 3

All three start from the same raw text (CPython's own documentation, see
examples/offline_corpora.py) and the same vocabulary file, and produce masked
batches of 32 x 128 for BERT pre-training:

- kzoo: `kzoo.data.pretraining_dataset`: read → tokenize → NSP pairs (whole
  documents, filled to 125 tokens) → pack (the whole corpus at once) →
  batches of shuffled examples → MLM masking (15%, 80/10/10) per batch.
- KerasHub: `BertTokenizer` → `MultiSegmentPacker` → `MaskedLMMaskGenerator`
  in `tf.data`, on pairs of consecutive sentences (KerasHub has no NSP pairing).
- Hugging Face: `BertTokenizerFast` (pairs, truncation, padding) →
  `DataCollatorForLanguageModeling`, on the same sentence pairs.

kzoo's examples are longer (filled to the sequence length, as in BERT) than a
pair of sentences, so the report gives both examples/s and real (non-padding)
tokens/s. Contenders alternate within each round; medians and ratios come from
the same run.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from offline_corpora import python_documentation  # noqa: E402

SEQUENCE_LENGTH, BATCH_SIZE, MAX_PREDICTIONS = 128, 32, 20


def run_kzoo(documents, vocabulary_path, _pairs):
    import kzoo

    tokenizer = kzoo.BertTokenizer(vocabulary_path)
    dataset = kzoo.data.pretraining_dataset(
        documents, tokenizer, SEQUENCE_LENGTH, MAX_PREDICTIONS, BATCH_SIZE, seed=0, progress=False
    )
    return [(x["padding_mask"].numpy(), y["mask_weights"].numpy()) for x, y in dataset]


def run_kerashub(_documents, vocabulary_path, pairs):
    import keras_hub
    import tensorflow as tf

    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary_path, lowercase=True)
    packer = keras_hub.layers.MultiSegmentPacker(
        SEQUENCE_LENGTH, start_value=tokenizer.cls_token_id, end_value=tokenizer.sep_token_id,
        pad_value=tokenizer.pad_token_id,
    )
    masker = keras_hub.layers.MaskedLMMaskGenerator(
        vocabulary_size=tokenizer.vocabulary_size(), mask_selection_rate=0.15,
        mask_selection_length=MAX_PREDICTIONS, mask_token_id=tokenizer.mask_token_id,
        unselectable_token_ids=[tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id],
    )

    def prepare(a, b):
        token_ids, segment_ids = packer((tokenizer(a), tokenizer(b)))
        masked = masker(token_ids)
        return token_ids != tokenizer.pad_token_id, masked["mask_positions"], masked["mask_ids"]

    dataset = tf.data.Dataset.from_tensor_slices(pairs).batch(BATCH_SIZE)
    dataset = dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    return [(m.numpy(), None) for m, _, _ in dataset]


def run_hf(_documents, vocabulary_path, pairs):
    import transformers

    tokenizer = transformers.BertTokenizerFast(vocab=vocabulary_path, do_lower_case=True)
    collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    out = []
    for start in range(0, len(pairs[0]), BATCH_SIZE):
        encoded = tokenizer(
            list(pairs[0][start : start + BATCH_SIZE]), list(pairs[1][start : start + BATCH_SIZE]),
            truncation="longest_first", max_length=SEQUENCE_LENGTH, padding="max_length",
            return_special_tokens_mask=True,
        )
        examples = [dict(zip(encoded, values)) for values in zip(*encoded.values())]
        batch = collator(examples)
        out.append((batch["attention_mask"].numpy(), None))
    return out


def measure(rounds, vocabulary_size, copies=1):
    """Runs the three pipelines in alternating order over `rounds`, on the
    corpus repeated `copies` times (so that one-off set-up, such as tracing
    the `tf.data` functions, weighs as little as in a real corpus); returns
    `{pipeline: {"examples", "tokens_per_example", "per_s" (examples/s),
    "tokens_per_s"}}` with medians over rounds."""
    import kzoo

    documents = python_documentation() * copies
    pairs = (
        np.array([s for d in documents for s in d[:-1]]),
        np.array([s for d in documents for s in d[1:]]),
    )
    vocabulary_path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    kzoo.learn_wordpiece_vocabulary(
        [s for d in documents for s in d], vocabulary_size, output_path=vocabulary_path, progress=False
    )
    contenders = {"kzoo": run_kzoo, "kerashub": run_kerashub, "hf": run_hf}
    examples, tokens, speed, token_speed = {}, {}, {n: [] for n in contenders}, {n: [] for n in contenders}
    for round_index in range(rounds):
        order = list(contenders) if round_index % 2 == 0 else list(contenders)[::-1]
        for name in order:
            start = time.perf_counter()
            batches = contenders[name](documents, vocabulary_path, pairs)
            elapsed = time.perf_counter() - start
            examples[name] = sum(len(mask) for mask, _ in batches)
            tokens[name] = int(sum(mask.sum() for mask, _ in batches))
            speed[name].append(examples[name] / elapsed)
            token_speed[name].append(tokens[name] / elapsed)
        print(f"round {round_index + 1}: " + ", ".join(f"{n} {speed[n][-1]:.0f} ex/s" for n in contenders),
              flush=True)
    return {
        name: {
            "examples": examples[name],
            "tokens_per_example": tokens[name] / examples[name],
            "per_s": statistics.median(speed[name]),
            "tokens_per_s": statistics.median(token_speed[name]),
        }
        for name in contenders
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--copies", type=int, default=4, help="passes over the corpus (1: ~4,000 kzoo examples)")
    parser.add_argument("--json", action="store_true", help="end with the results as one JSON line")
    args = parser.parse_args()

    results = measure(args.rounds, args.vocabulary_size, args.copies)
    print(f"\nmasked batches of {BATCH_SIZE} x {SEQUENCE_LENGTH}, "
          f"median over {args.rounds} rounds (whole pipeline from raw text, corpus x {args.copies}):")
    print("| pipeline | examples | real tokens / example | examples/s | tokens/s | kzoo tokens/s ÷ this |")
    print("|---|---|---|---|---|---|")
    ours = results["kzoo"]["tokens_per_s"]
    for name, r in results.items():
        print(f"| {name} | {r['examples']} | {r['tokens_per_example']:.0f} | {r['per_s']:.0f} | "
              f"{r['tokens_per_s']:.0f} | {ours / r['tokens_per_s']:.2f} |")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
