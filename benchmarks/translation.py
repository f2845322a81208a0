"""Translation side by side: kzoo's Transformer on three backends next to a
plain PyTorch loop around `torch.nn.Transformer`, trained and scored alike.

Run by hand, never in tests:

    python benchmarks/translation.py                      # all five contenders, ~20 min on 2 cores
    python benchmarks/translation.py --smoke              # every code path, seconds per contender
    python benchmarks/translation.py --source train.en --target train.de --steps 2000
    python benchmarks/translation.py --contenders kzoo:torch pytorch --seed 1   # another draw

The parent reads the corpus (the English→German gettext catalogues the
translation example uses, or `--source FILE --target FILE`, two aligned
plain-text files, one sentence a line), splits it as the example does
(`examples/translation_data.py`: by message identity, test sources in
neither training nor development), learns one shared WordPiece vocabulary
from the training pairs and draws the training batches once, with the
example's `length_batches` (`kzoo.data.batch_by_length`: length buckets, the
same token budget per batch). Every contender then trains on the same
batches in the same order, in its own process, contenders in alternating
order over rounds:

- `kzoo:tensorflow`, `kzoo:jax`, `kzoo:torch`: `kzoo.Transformer`,
  `compile(optimizer=kzoo.transformer_optimizer(...))` (label smoothing 0.1,
  Adam 0.9 / 0.98 / 1e-9, eq. 3), `fit`, `evaluate` and `kzoo.translate`, as
  the example uses them;
- `pytorch`: `benchmarks/translation_torch.py`, written for the benchmark:
  `nn.Transformer` as PyTorch ships it, with a LayerNorm after each stack;
- `pytorch:paper`: the same without those two LayerNorms, the paper's stacks
  and kzoo's (every sub-layer already ends in one, sec. 3.1).

Reported per contender: training target tokens per second (whole run, and
steady: the steps after each batch shape's first), training wall and CPU
seconds, development perplexity (per wordpiece, unsmoothed), test BLEU and
chrF (sacreBLEU, scored by the parent alike for all) for greedy and beam
search (beam 4, α 0.6), and decoding speed in sentences per second (after
one call per shape, which compiles; the fastest of three passes over the
test sentences). Ratios are against `pytorch` (`pytorch:paper` without it).
"""

import argparse
import json
import os
import pickle
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import common  # noqa: E402

CONTENDERS = ("kzoo:tensorflow", "kzoo:jax", "kzoo:torch", "pytorch", "pytorch:paper")
SMOKE = dict(steps=8, warmup_steps=4, num_layers=1, hidden_dim=32, num_heads=4, intermediate_dim=64,
             tokens_per_batch=256, max_length=16, vocabulary_size=400, pairs=2000, test_sentences=16,
             decode_batch=8)


def prepare(args, folder):
    """Splits, vocabulary and batches, written once to `folder/data.pkl` for every contender."""
    import numpy as np  # noqa: PLC0415
    from transformer_translation import length_batches  # noqa: PLC0415 (the example's batching; quiet import)

    import tensorflow as tf  # noqa: PLC0415
    from translation_data import describe, translation_splits  # noqa: PLC0415

    from kzoo import TransformerPreprocessor, TransformerTokenizer  # noqa: PLC0415

    splits = translation_splits(args.source, args.target, max_words=args.max_words)
    print(f"corpus: {describe(splits)}", flush=True)
    if args.pairs:
        splits = {name: tuple(side[: args.pairs if name == "train" else args.pairs // 10] for side in pair)
                  for name, pair in splits.items()}
    (train_sources, train_targets), dev, test = splits["train"], splits["dev"], splits["test"]
    tf.random.set_seed(0)
    tokenizer = TransformerTokenizer.train(train_sources + train_targets, args.vocabulary_size, progress=False)
    preprocessor = TransformerPreprocessor(tokenizer, args.max_length, args.max_length, pad=False)
    train = length_batches(preprocessor, train_sources, train_targets, args.tokens_per_batch, True)
    as_numpy = lambda batches: [  # noqa: E731
        (x["encoder_token_ids"], x["decoder_token_ids"], y) for x, y in batches.as_numpy_iterator()
    ]
    count = args.test_sentences or len(test[0])
    data = {
        "vocabulary": tokenizer.get_vocabulary(),
        "train": as_numpy(train.repeat().take(args.steps)),
        "dev": as_numpy(length_batches(preprocessor, *dev, args.tokens_per_batch, False)),
        "test_sources": test[0][:count],
        "test_references": test[1][:count],
        "test_ids": [ids for ids in preprocessor(tf.constant(test[0][:count])).to_list()],
    }
    tokens = sum(int((y != 0).sum()) for _, _, y in data["train"])
    print(f"vocabulary {len(data['vocabulary'])}; {args.steps} steps of <= {args.tokens_per_batch} tokens "
          f"({tokens / args.steps:.0f} target tokens a step on average); {len(data['dev'])} development "
          f"batches; {count} test sentences", flush=True)
    with open(os.path.join(folder, "data.pkl"), "wb") as f:
        pickle.dump(data, f)
    return data, tokenizer, np


def steady_rate(step_ends, start, batches):
    """Target tokens per second over the steps whose batch shape was seen before
    (a step's time runs from the previous step's end)."""
    seen, tokens, seconds, previous = set(), 0, 0.0, start
    for (source, _, labels), end in zip(batches, step_ends):
        if source.shape in seen:
            tokens, seconds = tokens + int((labels != 0).sum()), seconds + end - previous
        seen.add(source.shape)
        previous = end
    return tokens / seconds if seconds else float("nan")


def timed(function):
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    result = function()
    return result, time.perf_counter() - start_wall, time.process_time() - start_cpu


def fastest(function, passes=3):
    """`function()`'s result and its fastest wall time over `passes` calls: a
    decoding pass takes seconds, and one pass moved by 15% between runs."""
    runs = [timed(function) for _ in range(passes)]
    return runs[0][0], min(wall for _, wall, _ in runs)


def kzoo_child(args, data):
    import keras  # noqa: PLC0415

    import kzoo  # noqa: PLC0415

    keras.utils.set_random_seed(args.seed)
    preprocessor = kzoo.TransformerPreprocessor(kzoo.TransformerTokenizer(data["vocabulary"]),
                                                args.max_length, args.max_length, pad=False)
    model = kzoo.Transformer(
        vocabulary_size=len(data["vocabulary"]), num_layers=args.num_layers, hidden_dim=args.hidden_dim,
        intermediate_dim=args.intermediate_dim, num_heads=args.num_heads, dropout=0.1, label_smoothing=0.1,
        max_sequence_length=args.max_length + 64,
    )
    model.compile(optimizer=kzoo.transformer_optimizer(args.hidden_dim, warmup_steps=args.warmup_steps))

    class Batches(keras.utils.PyDataset):
        def __init__(self, batches):
            super().__init__()
            self.batches = batches

        def __len__(self):
            return len(self.batches)

        def __getitem__(self, index):
            source, decoder, labels = self.batches[index]
            return {"encoder_token_ids": source, "decoder_token_ids": decoder}, labels

    def dataset(batches):
        # As kzoo's tasks feed `fit`: a tf.data generator on TensorFlow, the PyDataset elsewhere. A
        # tf.data generator on torch leaves its steps 1.6x slower (5x the page faults) for the
        # rest of the process.
        return kzoo.backend.variable_length_batches(Batches(batches))

    ends = []
    record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs=None: ends.append(time.perf_counter()))
    start = time.perf_counter()
    # shuffle=False: Keras would shuffle a PyDataset's batches (JAX, torch), not TensorFlow's generator.
    _, wall, cpu = timed(lambda: model.fit(dataset(data["train"]), epochs=1, verbose=0, callbacks=[record],
                                           shuffle=False))
    result = {"train_wall_s": wall, "train_cpu_s": cpu, "steady_tokens_per_s": steady_rate(ends, start, data["train"]),
              "dev_perplexity": float(model.evaluate(dataset(data["dev"]), return_dict=True, verbose=0)["perplexity"])}
    sources = data["test_sources"]
    # One call per ladder rung first (one call for all would pad them to the longest): every
    # shape the timed pass meets is compiled.
    rungs = {kzoo.data.ladder_length(len(ids), args.max_length): s for ids, s in zip(data["test_ids"], sources)}
    for name, beam in (("greedy", 1), ("beam", 4)):
        search = dict(beam_size=beam, length_penalty=0.6)
        for source in rungs.values():
            kzoo.translate(model, preprocessor, [source], args.decode_batch, **search)
        hypotheses, wall = fastest(lambda: kzoo.translate(model, preprocessor, sources, args.decode_batch, **search))
        result[f"{name}_per_s"], result[f"{name}_hypotheses"] = len(sources) / wall, hypotheses
    return result


def pytorch_child(args, data):
    import torch  # noqa: PLC0415
    import translation_torch as reference  # noqa: PLC0415

    torch.manual_seed(args.seed)
    model = reference.Translator(len(data["vocabulary"]), args.num_layers, args.hidden_dim, args.num_heads,
                                 args.intermediate_dim, 0.1, args.max_length + 64,
                                 final_norms=args.child == "pytorch")
    tensors = lambda batches: [tuple(torch.from_numpy(a).long() for a in b) for b in batches]  # noqa: E731
    train, dev = tensors(data["train"]), tensors(data["dev"])
    ends = []
    start = time.perf_counter()
    _, wall, cpu = timed(lambda: reference.train(model, train, args.hidden_dim, args.warmup_steps,
                                                 lambda step: ends.append(time.perf_counter())))
    result = {"train_wall_s": wall, "train_cpu_s": cpu, "steady_tokens_per_s": steady_rate(ends, start, data["train"]),
              "dev_perplexity": reference.perplexity(model, dev)}
    if args.smoke:
        reference.check_cache(model, *dev[0][:2])
    ids = data["test_ids"]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # batches of similar length, as kzoo.translate
    for name, search in (("greedy", reference.greedy_search), ("beam", reference.beam_search)):
        def run():
            outputs = [None] * len(ids)
            for at in range(0, len(order), args.decode_batch):
                rows = order[at:at + args.decode_batch]
                source = torch.zeros(len(rows), max(len(ids[i]) for i in rows), dtype=torch.long)
                for row, i in enumerate(rows):
                    source[row, : len(ids[i])] = torch.tensor(ids[i])
                for row, tokens in zip(rows, search(model, source).tolist()):
                    outputs[row] = tokens
            return outputs
        hypotheses, wall = fastest(run)
        result[f"{name}_per_s"], result[f"{name}_hypotheses"] = len(ids) / wall, hypotheses
    return result


def child(args):
    with open(os.path.join(args.folder, "data.pkl"), "rb") as f:
        data = pickle.load(f)
    result = (pytorch_child if args.child.startswith("pytorch") else kzoo_child)(args, data)
    tokens = sum(int((y != 0).sum()) for _, _, y in data["train"])
    result["tokens_per_s"] = tokens / result["train_wall_s"]
    result["tokens_per_cpu_s"] = tokens / result["train_cpu_s"]
    with open(os.path.join(args.folder, f"{args.child.replace(':', '_')}.json"), "w") as f:
        json.dump(result, f)  # the hypotheses are too long for one line of stdout
    common.report({k: v for k, v in result.items() if not k.endswith("hypotheses")})


def score(hypotheses, references):
    """sacreBLEU's corpus BLEU and chrF, with their signatures."""
    from sacrebleu.metrics import BLEU, CHRF  # noqa: PLC0415

    bleu, chrf = BLEU(), CHRF()
    return (bleu.corpus_score(hypotheses, [references]).score, chrf.corpus_score(hypotheses, [references]).score,
            f"BLEU {bleu.get_signature()}; chrF {chrf.get_signature()}")


COLUMNS = (("tokens_per_s", "train tok/s", "{:.0f}"), ("steady_tokens_per_s", "steady tok/s", "{:.0f}"),
           ("train_wall_s", "train wall s", "{:.0f}"), ("train_cpu_s", "train CPU s", "{:.0f}"),
           ("tokens_per_cpu_s", "tok/CPU s", "{:.0f}"),
           ("dev_perplexity", "dev PPL", "{:.2f}"), ("greedy_bleu", "greedy BLEU", "{:.1f}"),
           ("beam_bleu", "beam BLEU", "{:.1f}"), ("beam_chrf", "beam chrF", "{:.1f}"),
           ("greedy_per_s", "greedy sent/s", "{:.1f}"), ("beam_per_s", "beam sent/s", "{:.1f}"))
RATIOS = ("tokens_per_s", "tokens_per_cpu_s", "steady_tokens_per_s", "greedy_per_s", "beam_per_s")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="source sentences, one a line (default: the gettext catalogues)")
    parser.add_argument("--target", help="their translations, aligned with --source")
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--warmup-steps", type=int, default=400)
    parser.add_argument("--num-layers", type=int, default=2, help="N, encoder and decoder each")
    parser.add_argument("--hidden-dim", type=int, default=128, help="d_model")
    parser.add_argument("--num-heads", type=int, default=4, help="h")
    parser.add_argument("--intermediate-dim", type=int, default=512, help="d_ff")
    parser.add_argument("--tokens-per-batch", type=int, default=2048, help="the token budget of a batch")
    parser.add_argument("--vocabulary-size", type=int, default=4000)
    parser.add_argument("--max-length", type=int, default=64, help="tokens per source or target")
    parser.add_argument("--max-words", type=int, default=30, help="longest sentence kept, in words")
    parser.add_argument("--pairs", type=int, default=0, help="first N training, N / 10 dev and test pairs (0: all)")
    parser.add_argument("--test-sentences", type=int, default=0, help="test sentences decoded (0: all)")
    parser.add_argument("--decode-batch", type=int, default=64, help="sources per search call")
    parser.add_argument("--seed", type=int, default=0,
                        help="each contender's initialisation and dropout draws (the batches stay the same)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: every code path in seconds")
    parser.add_argument("--output", default="benchmarks/results/translation.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        for name, value in SMOKE.items():
            setattr(args, name, value)
    return args


def main():
    args = parse_args()
    if args.child:
        return child(args)
    print(f"{common.machine_description()}; N={args.num_layers} d_model={args.hidden_dim} h={args.num_heads} "
          f"d_ff={args.intermediate_dim}, {args.steps} steps (warmup {args.warmup_steps})", flush=True)
    folder = tempfile.mkdtemp(prefix="kzoo_translation_")
    data, tokenizer, np = prepare(args, folder)
    passed = [a for a in sys.argv[1:] if a not in ("--contenders", *args.contenders)]

    def measure(contender):
        backend = "torch" if contender.startswith("pytorch") else contender.split(":")[1]
        summary = common.run_child(__file__, backend, [*passed, "--child", contender, "--folder", folder])
        with open(os.path.join(folder, f"{contender.replace(':', '_')}.json")) as f:
            result = json.load(f)
        for name in ("greedy", "beam"):
            hypotheses = result.pop(f"{name}_hypotheses")
            if contender.startswith("pytorch"):  # token ids, of each batch's length: padded to one
                width = max(map(len, hypotheses))
                ids = np.asarray([h + [0] * (width - len(h)) for h in hypotheses])
                hypotheses = [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()]
            result[f"{name}_bleu"], result[f"{name}_chrf"], result["signature"] = score(
                hypotheses, data["test_references"])
        result["peak_rss_mb"] = summary["peak_rss_mb"]
        print(f"  {contender}: " + ", ".join(f"{k} {v:.4g}" for k, v in result.items() if k != "signature"),
              flush=True)
        return result

    results = common.alternating_rounds(args.contenders, args.rounds, measure)
    medians = {c: {k: statistics.median(r[k] for r in runs) for k, _, _ in COLUMNS} for c, runs in results.items()}
    reference = next((c for c in ("pytorch", "pytorch:paper") if c in medians), args.contenders[0])
    print(f"\n| contender | {' | '.join(label for _, label, _ in COLUMNS)} | ÷ {reference}: train, "
          "per CPU s, steady, greedy, beam |\n" + "|---" * (len(COLUMNS) + 2) + "|")
    for contender, row in medians.items():
        ratios = " / ".join(f"{row[k] / medians[reference][k]:.2f}x" for k in RATIOS)
        print(f"| {contender} | {' | '.join(f.format(row[k]) for k, _, f in COLUMNS)} | {ratios} |")
    print(f"\n{next(iter(results.values()))[0]['signature']}")
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"machine": common.machine_description(), "arguments": vars(args), "results": results}, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
