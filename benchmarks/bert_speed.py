"""BERT inference and training-step speed: kzoo vs KerasHub (same backend) vs Hugging Face torch eager.

Run by hand, never in tests (or through `benchmarks/run_all.py`):

    python benchmarks/bert_speed.py --configs bert_small --workloads inference training --rounds 3

Each measurement runs in its own process, contenders alternate within every
round, and the report quotes the median tokens/s over rounds and the ratio kzoo
/ peer measured in the same run. All models are randomly initialised with the
same architecture (dropout 0.1 configured; active in training, inactive at
inference). What each contender computes:

- inference: the encoder's forward pass on batch x length packed ids
  (`predict_on_batch` of kzoo's/KerasHub's `BertBackbone`, each with its
  default compilation unless the contender says otherwise; HF `BertModel` in
  `torch.inference_mode`).
- training: one optimizer step on a masked-LM loss: forward with dropout,
  backward, AdamW (lr 1e-4, weight decay 0.01).
  kzoo: `BertMaskedLM` + `kzoo.bert_pretraining_optimizer(global_clipnorm=None)`
  (AdamW without decay on LayerNorm/bias; the recipe's global-norm clipping
  is off because no peer clips), head at the 20 `mask_positions` per
  sequence, `train_on_batch` with kzoo's default compile.
  KerasHub: `BertMaskedLM` (head at the same 20 `mask_positions`),
  `keras.optimizers.AdamW`, its default loss and weighted accuracy,
  `train_on_batch` with Keras' default compile (or `jit_compile=True` for the
  `xla` option). HF: `BertForMaskedLM` in train mode, `torch.optim.AdamW`,
  the head over all positions with labels -100 except the 20 masked ones (HF
  has no masked-position input).

A contender is `impl:backend[:option]`; options: `xla` (`jit_compile=True`),
`eager` (`jit_compile=False`), `bf16` (`mixed_bfloat16` policy),
`threads1` (one intra-op thread).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

CONTENDERS = (
    "kzoo:tensorflow",
    "kerashub:tensorflow",
    "kerashub:tensorflow:xla",
    "kzoo:jax",
    "kerashub:jax",
    "kzoo:torch",
    "kerashub:torch",
    "hf:torch",
)
JIT_OPTIONS = {"xla": True, "eager": False}


def keras_step(impl, config_name, workload, option, batch, length):
    """One compiled step of kzoo's or KerasHub's model, as a function of no arguments."""
    import keras

    dtype = "mixed_bfloat16" if option == "bf16" else None
    compile_kwargs = {"jit_compile": JIT_OPTIONS[option]} if option in JIT_OPTIONS else {}
    features, labels = common.bert_batch(batch, length)
    if impl == "kzoo":
        import kzoo

        backbone = kzoo.BertBackbone(**common.bert_kwargs(config_name), dtype=dtype)
    else:
        import keras_hub

        backbone = keras_hub.models.BertBackbone(**common.bert_kwargs(config_name), dtype=dtype)

    if workload == "inference":
        backbone.compile(**compile_kwargs)
        inputs = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        return lambda: backbone.predict_on_batch(inputs)
    if impl == "kzoo":
        model = kzoo.BertMaskedLM(backbone)
        optimizer = kzoo.bert_pretraining_optimizer(global_clipnorm=None)  # the peers do not clip
        model.compile(optimizer=optimizer, **compile_kwargs)
        return lambda: model.train_on_batch(features, labels)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01), **compile_kwargs)
    return lambda: model.train_on_batch(
        features, labels["mask_ids"], sample_weight=labels["mask_weights"]
    )


def hf_step(config_name, workload, batch, length):
    """One eager step of Hugging Face's `BertModel` (inference) or `BertForMaskedLM` (training)."""
    import torch
    import transformers

    features, labels = common.bert_batch(batch, length)
    inputs = dict(
        input_ids=torch.as_tensor(features["token_ids"]).long(),
        token_type_ids=torch.as_tensor(features["segment_ids"]).long(),
        attention_mask=torch.as_tensor(features["padding_mask"]).long(),
    )
    config = common.hf_bert_config(config_name)
    if workload == "inference":
        model = transformers.BertModel(config, add_pooling_layer=True).eval()

        def infer():
            with torch.inference_mode():
                return model(**inputs)

        return infer
    model = transformers.BertForMaskedLM(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    targets = torch.full((batch, length), -100, dtype=torch.long)
    rows = torch.arange(batch)[:, None]
    targets[rows, torch.as_tensor(features["mask_positions"]).long()] = torch.as_tensor(
        labels["mask_ids"]
    ).long()

    def train():
        optimizer.zero_grad(set_to_none=True)
        model(**inputs, labels=targets).loss.backward()
        optimizer.step()

    return train


def child(contender, config_name, workload, batch, length, steps):
    impl, _, option = _parse(contender)
    if option == "threads1":
        import torch

        torch.set_num_threads(1)
    step = (
        hf_step(config_name, workload, batch, length)
        if impl == "hf"
        else keras_step(impl, config_name, workload, option, batch, length)
    )
    common.report(common.time_steps(step, steps))


def _parse(contender):
    impl, backend, *option = contender.split(":")
    return impl, backend, option[0] if option else ""


def measure(contenders, config_names, workloads, rounds, batch, length, steps, peak_gflops):
    """Runs every (config, workload) over alternating rounds of `contenders`;
    returns `{config: {workload: {contender: summary}}}` (see `common.summarize`)."""
    results = {}
    for config_name in config_names:
        for workload in workloads:
            raw = common.alternating_rounds(
                list(contenders),
                rounds,
                lambda c: common.run_child(
                    __file__,
                    _parse(c)[1],
                    ["--child", c, config_name, workload, batch, length, steps],
                ),
                label=f"{config_name} {workload}",
            )
            flops = batch * common.bert_flops(
                config_name,
                length,
                common.MAX_PREDICTIONS,
                training=workload == "training",
            )
            results.setdefault(config_name, {})[workload] = {
                c: common.summarize(r, batch * length, flops, peak_gflops) for c, r in raw.items()
            }
    return results


def ratio_rows(results):
    """Markdown rows: per config, workload and backend, kzoo's tokens/s and its
    ratios to KerasHub (best KerasHub variant on that backend) and to HF."""
    rows = []
    for config_name, workloads in results.items():
        for workload, summaries in workloads.items():
            hf = summaries.get("hf:torch", {}).get("per_s")
            for backend in ("tensorflow", "jax", "torch"):
                ours = summaries.get(f"kzoo:{backend}")
                peers = {c: s for c, s in summaries.items() if c.startswith(f"kerashub:{backend}")}
                if not ours or not peers:
                    continue
                best = max(peers, key=lambda c: peers[c]["per_s"])
                variant = _parse(best)[2] or "default"
                row = (
                    f"| {config_name} {workload} | {backend} | {ours['per_s']:.0f} "
                    f"| {ours.get('mfu', 0):.0%} | {ours['first_step_s']:.1f} "
                    f"| {ours['peak_rss_mb']:.0f} | {peers[best]['per_s']:.0f} ({variant}) "
                    f"| {peers[best]['peak_rss_mb']:.0f} | **{ours['per_s'] / peers[best]['per_s']:.2f}** "
                )
                row += f"| {hf:.0f} | {ours['per_s'] / hf:.2f} |" if hf else "| | |"
                rows.append(row)
    return rows


TABLE_HEADER = (
    "| workload | backend | kzoo tokens/s | kzoo MFU | kzoo first step (s) | kzoo peak RSS (MiB) "
    "| best KerasHub tokens/s | KerasHub peak RSS (MiB) | kzoo ÷ KerasHub | HF torch eager | kzoo ÷ HF |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["bert_small"], choices=sorted(common.BERT_CONFIGS))
    parser.add_argument("--workloads", nargs="+", default=["inference", "training"])
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--output", default="benchmarks/results/bert_speed.json")
    args = parser.parse_args()
    if args.child:
        contender, config_name, workload, batch, length, steps = args.child
        child(contender, config_name, workload, int(batch), int(length), int(steps))
        return

    peak = common.matmul_peak_gflops()
    results = measure(
        args.contenders, args.configs, args.workloads, args.rounds, args.batch, args.length,
        args.steps, peak,
    )
    print(f"\nmedian over {args.rounds} rounds, batch {args.batch} x {args.length}, "
          f"matmul peak {peak:.0f} GFLOP/s:")
    print(TABLE_HEADER)
    print("\n".join(ratio_rows(results)))
    for config_name, workloads in results.items():
        for workload, summaries in workloads.items():
            for contender, s in summaries.items():
                print(f"  {config_name} {workload} {contender}: {s['per_s']:.0f} tokens/s, "
                      f"first {s['first_step_s']:.1f} s, {s['peak_rss_mb']:.0f} MiB")
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"matmul_peak_gflops": peak, "bert": results}, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
