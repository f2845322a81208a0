"""Tokenize + pack speed: kzoo vs KerasHub (keras-nlp) vs Hugging Face `tokenizers`.

Run by hand, never in tests:

    python benchmarks/bert_tokenization.py --sentences 20000 --rounds 5

All three tokenize and pack the same generated corpus (sentence pairs,
`[CLS] A [SEP] B [SEP]`, sequence length 128, truncation and padding) with the
same vocabulary file, learned once from the corpus by kzoo. Contenders
alternate within each round; the report gives median sentences/s and the
ratios measured in the same run. Also reports how many packed pairs differ
from Hugging Face's (kzoo is expected to have none; KerasHub's uncased
tokenizer does not strip accents and its packer truncates differently).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tests.models.bert.synthetic_corpus import make_corpus  # noqa: E402


def kzoo_packer(vocabulary_path, sequence_length):
    import kzoo

    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(vocabulary_path), sequence_length)

    def pack(texts_a, texts_b):
        out = preprocessor((texts_a, texts_b))
        return out["token_ids"].numpy(), out["segment_ids"].numpy()

    return pack


def kerashub_packer(vocabulary_path, sequence_length):
    import keras_hub

    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary_path, lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=sequence_length, truncate="round_robin"
    )

    def pack(texts_a, texts_b):
        # A positional tuple would be read as (x, y): pass the pair as `x`.
        out = preprocessor(x=(np.array(texts_a), np.array(texts_b)))
        return np.asarray(out["token_ids"]), np.asarray(out["segment_ids"])

    return pack


def hf_packer(vocabulary_path, sequence_length):
    import transformers

    tokenizer = transformers.BertTokenizerFast(vocab=vocabulary_path, do_lower_case=True)

    def pack(texts_a, texts_b):
        out = tokenizer(
            texts_a, texts_b, truncation="longest_first", max_length=sequence_length,
            padding="max_length", return_tensors="np",
        )
        return out["input_ids"], out["token_type_ids"]

    return pack


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--vocabulary-size", type=int, default=4000)
    args = parser.parse_args()

    import kzoo

    corpus = make_corpus(2 * args.sentences, seed=0)
    texts_a, texts_b = corpus[: args.sentences], corpus[args.sentences :]
    directory = tempfile.mkdtemp()
    vocabulary_path = os.path.join(directory, "vocab.txt")
    start = time.perf_counter()
    kzoo.learn_wordpiece_vocabulary(
        corpus[:5000], args.vocabulary_size, output_path=vocabulary_path, progress=False
    )
    print(f"learned a vocabulary from 5000 sentences in {time.perf_counter() - start:.1f} s")

    packers = {
        "kzoo": kzoo_packer(vocabulary_path, args.sequence_length),
        "kerashub": kerashub_packer(vocabulary_path, args.sequence_length),
        "hf": hf_packer(vocabulary_path, args.sequence_length),
    }
    outputs, speeds = {}, {name: [] for name in packers}
    for round_index in range(args.rounds):
        order = list(packers) if round_index % 2 == 0 else list(packers)[::-1]
        for name in order:
            start = time.perf_counter()
            outputs[name] = packers[name](texts_a, texts_b)
            speeds[name].append(args.sentences / (time.perf_counter() - start))
        print(f"round {round_index + 1}: " + ", ".join(f"{n} {speeds[n][-1]:.0f}/s" for n in packers))

    reference = outputs["hf"]
    print(f"\n{args.sentences} sentence pairs, sequence length {args.sequence_length}, "
          f"median over {args.rounds} rounds:")
    print("| tokenizer + packer | pairs/s | kzoo / this | pairs differing from HF |")
    print("|---|---|---|---|")
    ours = statistics.median(speeds["kzoo"])
    for name in packers:
        median = statistics.median(speeds[name])
        ids, segments = outputs[name]
        differing = int(((ids != reference[0]).any(1) | (segments != reference[1]).any(1)).sum())
        print(f"| {name} | {median:.0f} | {ours / median:.2f} | {differing} |")


if __name__ == "__main__":
    main()
