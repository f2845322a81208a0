"""Transformer base speed on every backend: training step and beam-search decoding (kzoo only).

Run by hand, never in tests (or through `benchmarks/run_all.py`):

    python benchmarks/transformer_speed.py --workloads training decoding --rounds 3

The model is `transformer_base` (Table 3: N=6, d_model 512, d_ff 2048, h=8,
shared 37,000-token vocabulary), randomly initialised.

- training: one `train_on_batch` of kzoo's default `compile()` (Adam with
  eq. 3's schedule, label-smoothed cross-entropy, accuracy and perplexity) on
  batch x source length and batch x target length random ids;
  throughput counts source + target tokens.
- decoding: `Transformer.generate(source, beam_size=4, length_penalty=0.6,
  max_length=...)` on `decode_batch` sources; a random model (almost) never
  ends a hypothesis, so every call decodes `max_length` steps; throughput
  counts the output tokens of the best hypothesis, batch x max_length.

KerasHub has no encoder-decoder Transformer model, and wiring its
`BeamSampler` to kzoo's cached step would measure kzoo's model anyway, so
there is no peer here.
"""

import argparse
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

CONTENDERS = ("kzoo:tensorflow", "kzoo:jax", "kzoo:torch")
DECODE_BATCH, DECODE_SOURCE_LENGTH, DECODE_LENGTH = 8, 32, 32


PRESET = os.path.join(os.path.dirname(__file__), "..", "presets", "transformer", "transformer_base.json")


def model_config():
    """`transformer_base`'s configuration (Table 3), read from the preset file.

    Example:

    >>> model_config()["hidden_dim"]
    512
    """
    with open(PRESET) as f:
        return json.load(f)["config"]


def child(contender, workload, batch, length, steps):
    import numpy as np

    import kzoo

    option = contender.split(":")[2] if contender.count(":") > 1 else ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = kzoo.Transformer.from_preset(
            "transformer_base", dtype="mixed_bfloat16" if option == "bf16" else None
        )
    rng = np.random.default_rng(0)
    vocabulary = model.vocabulary_size
    if workload == "training":
        compile_kwargs = {"jit_compile": {"xla": True, "eager": False}[option]} if option in ("xla", "eager") else {}
        model.compile(**compile_kwargs)
        x = {
            "encoder_token_ids": rng.integers(4, vocabulary, (batch, length)).astype("int32"),
            "decoder_token_ids": rng.integers(4, vocabulary, (batch, length)).astype("int32"),
        }
        y = rng.integers(4, vocabulary, (batch, length)).astype("int32")
        common.report(common.time_steps(lambda: model.train_on_batch(x, y), steps))
        return
    source = rng.integers(4, vocabulary, (DECODE_BATCH, DECODE_SOURCE_LENGTH)).astype("int32")
    step = lambda: model.generate(source, beam_size=4, length_penalty=0.6, max_length=DECODE_LENGTH)  # noqa: E731
    common.report(common.time_steps(step, steps))


def measure(contenders, workloads, rounds, batch, length, steps, peak_gflops):
    """`{workload: {contender: summary}}` over alternating rounds (see `common.summarize`)."""
    results = {}
    for workload in workloads:
        raw = common.alternating_rounds(
            list(contenders),
            rounds,
            lambda c: common.run_child(
                __file__, c.split(":")[1], ["--child", c, workload, batch, length, steps]
            ),
            label=f"transformer_base {workload}",
        )
        if workload == "training":
            work = 2 * batch * length
            flops = batch * common.transformer_flops(model_config(), length, length, training=True)
        else:
            work, flops = DECODE_BATCH * DECODE_LENGTH, None
        results[workload] = {c: common.summarize(r, work, flops, peak_gflops) for c, r in raw.items()}
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=["training", "decoding"])
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--output", default="benchmarks/results/transformer_speed.json")
    args = parser.parse_args()
    if args.child:
        contender, workload, batch, length, steps = args.child
        child(contender, workload, int(batch), int(length), int(steps))
        return

    peak = common.matmul_peak_gflops()
    results = measure(args.contenders, args.workloads, args.rounds, args.batch, args.length, args.steps, peak)
    for workload, summaries in results.items():
        for contender, s in summaries.items():
            mfu = f", MFU {s['mfu']:.0%}" if "mfu" in s else ""
            print(f"transformer_base {workload} {contender}: {s['per_s']:.0f} tokens/s{mfu}, "
                  f"first {s['first_step_s']:.1f} s, {s['peak_rss_mb']:.0f} MiB")
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"matmul_peak_gflops": peak, "transformer": results}, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
