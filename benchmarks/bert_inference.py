"""BERT encoder inference speed: kzoo vs KerasHub (same backend) vs Hugging Face (torch eager).

Run by hand, never in tests:

    python benchmarks/bert_inference.py --configs bert_small bert_base --rounds 3

Each measurement runs in its own process (the Keras backend is fixed at
import), contenders alternate within every round, and the report quotes the
median tokens/s over rounds and the ratio kzoo / peer measured in the same run.
The machine is shared and noisy (about +-25% between runs): read ratios, not
absolute numbers. All models are randomly initialised with the same
architecture (dropout 0.1 configured, inactive at inference).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CONFIGS = {
    "bert_small": dict(num_layers=4, hidden_dim=512, num_heads=8),
    "bert_base": dict(num_layers=12, hidden_dim=768, num_heads=12),
}
CONTENDERS = [
    ("kzoo", "tensorflow"),
    ("kerashub", "tensorflow"),
    ("kzoo", "jax"),
    ("kerashub", "jax"),
    ("kzoo", "torch"),
    ("kerashub", "torch"),
    ("hf", "torch"),
]
VOCABULARY_SIZE = 30522


def build_inputs(batch, length):
    import numpy as np

    rng = np.random.default_rng(0)
    return {
        "token_ids": rng.integers(1000, VOCABULARY_SIZE, size=(batch, length)).astype("int32"),
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
    }


def keras_forward(impl, config):
    """A function running one compiled forward pass of kzoo's or KerasHub's backbone."""
    kwargs = dict(
        vocabulary_size=VOCABULARY_SIZE,
        intermediate_dim=4 * config["hidden_dim"],
        max_sequence_length=512,
        **config,
    )
    if impl == "kzoo":
        import kzoo

        model = kzoo.BertBackbone(**kwargs)
    else:
        import keras_hub

        model = keras_hub.models.BertBackbone(**kwargs)
    return lambda inputs: model.predict_on_batch(inputs)


def hf_forward(config):
    import torch
    import transformers

    hf_config = transformers.BertConfig(
        vocab_size=VOCABULARY_SIZE,
        hidden_size=config["hidden_dim"],
        num_hidden_layers=config["num_layers"],
        num_attention_heads=config["num_heads"],
        intermediate_size=4 * config["hidden_dim"],
    )
    model = transformers.BertModel(hf_config).eval()

    def forward(inputs):
        with torch.inference_mode():
            return model(
                input_ids=torch.as_tensor(inputs["token_ids"]).long(),
                token_type_ids=torch.as_tensor(inputs["segment_ids"]).long(),
                attention_mask=torch.as_tensor(inputs["padding_mask"]).long(),
            )

    return forward


def measure(impl, config_name, batch, length, steps):
    """Runs in the child process; prints one JSON line."""
    config = CONFIGS[config_name]
    forward = hf_forward(config) if impl == "hf" else keras_forward(impl, config)
    inputs = build_inputs(batch, length)
    start = time.perf_counter()
    forward(inputs)
    first_step = time.perf_counter() - start
    forward(inputs)  # second warm-up call
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        forward(inputs)
        times.append(time.perf_counter() - start)
    step = statistics.median(times)
    print(json.dumps({"tokens_per_s": batch * length / step, "first_step_s": first_step}))


def run_child(impl, backend, config_name, args):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    command = [
        sys.executable, __file__, "--child", impl, "--configs", config_name,
        "--batch", str(args.batch), "--length", str(args.length), "--steps", str(args.steps),
    ]
    output = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["bert_small"], choices=sorted(CONFIGS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--output", default="benchmarks/results/bert_inference.json")
    args = parser.parse_args()
    if args.child:
        measure(args.child, args.configs[0], args.batch, args.length, args.steps)
        return

    results = {}
    for config_name in args.configs:
        for round_index in range(args.rounds):
            order = CONTENDERS if round_index % 2 == 0 else CONTENDERS[::-1]
            for impl, backend in order:
                result = run_child(impl, backend, config_name, args)
                results.setdefault((config_name, impl, backend), []).append(result)
                print(f"round {round_index + 1}: {config_name} {impl:8s} {backend:10s} "
                      f"{result['tokens_per_s']:9.0f} tokens/s", flush=True)

    print(f"\nmedian tokens/s over {args.rounds} rounds, batch {args.batch} x {args.length}:")
    print("| config | backend | kzoo | KerasHub | kzoo / KerasHub | HF torch eager | kzoo / HF |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for config_name in args.configs:
        hf = statistics.median(r["tokens_per_s"] for r in results[(config_name, "hf", "torch")])
        for backend in ("tensorflow", "jax", "torch"):
            ours = statistics.median(r["tokens_per_s"] for r in results[(config_name, "kzoo", backend)])
            peer = statistics.median(r["tokens_per_s"] for r in results[(config_name, "kerashub", backend)])
            summary[f"{config_name}/{backend}"] = {"kzoo": ours, "kerashub": peer, "hf_torch": hf}
            print(f"| {config_name} | {backend} | {ours:.0f} | {peer:.0f} | {ours / peer:.2f} "
                  f"| {hf:.0f} | {ours / hf:.2f} |")
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(summary, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
