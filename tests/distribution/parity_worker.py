"""Worker process for tests/distribution: distributed training of a tiny BERT vs one device.

    python tests/distribution/parity_worker.py jax|tensorflow|torch|jax-hosts [options]

Trains a tiny `kzoo.BertMaskedLM` (L=1, H=16, A=4, d_ff=32, no dropout) for 3
steps of global batch 8 with `kzoo.distribution.setup()`, and the same model
from the same initial weights on one device: on the same global batches (the
reference) and on only the first half of each (what one of two replicas sees:
a comparison that must fail). Prints one JSON line (`RESULT {...}`) with the
losses, the largest weight differences and, on JAX, the weights' shardings.
The environment (device counts) is set here, before the backend starts.
"""

import argparse
import json
import os
import sys

GLOBAL_BATCH, SEQUENCE, PREDICTIONS, VOCABULARY, STEPS = 8, 8, 2, 50, 3


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("engine", choices=["jax", "tensorflow", "torch", "jax-hosts"])
    parser.add_argument("--model-parallel", type=int, nargs="+", default=[1], help="one run for each")
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--coordinator", default="127.0.0.1:0")
    parser.add_argument("--one-replica", action="store_true", help="also train on half batches (must differ)")
    parser.add_argument("--no-reference", action="store_true", help="skip the single-device run")
    return parser.parse_args()


def start_backend(args):
    """Device counts and the Keras backend, before anything imports them."""
    backend = "jax" if args.engine.startswith("jax") else args.engine
    os.environ["KERAS_BACKEND"] = backend
    os.environ["JAX_PLATFORMS"] = "cpu"
    if args.engine == "jax":
        flags = os.environ.get("XLA_FLAGS", "")  # the suite's optimisation level, if any
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count=8".strip()
    import tensorflow as tf

    tf.config.set_visible_devices([], "GPU")
    if args.engine == "tensorflow":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    if backend == "torch":
        import torch

        torch.set_num_threads(1)


def batches():
    """3 global batches of masked-LM examples. Every half batch holds 6 real
    predictions (rows with 1 or 2), so per-replica normalisation over 2
    replicas equals the global one (see kzoo.BertPretrainer.task_losses)."""
    import numpy as np

    rng = np.random.default_rng(0)
    n = STEPS * GLOBAL_BATCH
    features = {
        "token_ids": rng.integers(5, VOCABULARY, (n, SEQUENCE)).astype("int32"),
        "segment_ids": np.repeat([[0] * 4 + [1] * 4], n, 0).astype("int32"),
        "padding_mask": np.ones((n, SEQUENCE), "int32"),
        "mask_positions": np.sort(rng.choice(np.arange(1, SEQUENCE), (n, PREDICTIONS)), -1).astype("int32"),
    }
    weights = np.tile([[1, 1], [1, 0], [1, 1], [1, 0], [1, 0], [1, 1], [1, 0], [1, 1]], (STEPS, 1))
    labels = {
        "mask_ids": rng.integers(5, VOCABULARY, (n, PREDICTIONS)).astype("int32"),
        "mask_weights": weights.astype("float32"),
    }
    return features, labels


def dataset(features, labels, batch_size, rows=slice(None)):
    import tensorflow as tf

    x = {k: v.reshape(STEPS, GLOBAL_BATCH, -1)[:, rows].reshape(-1, v.shape[-1]) for k, v in features.items()}
    y = {k: v.reshape(STEPS, GLOBAL_BATCH, -1)[:, rows].reshape(-1, v.shape[-1]) for k, v in labels.items()}
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size, drop_remainder=True).repeat()


def build(initial_weights=None):
    import kzoo

    backbone = kzoo.BertBackbone(
        vocabulary_size=VOCABULARY, num_layers=1, num_heads=4, hidden_dim=16,
        intermediate_dim=32, dropout=0.0, max_sequence_length=16,
    )
    model = kzoo.BertMaskedLM(backbone)
    model.compile(optimizer=kzoo.bert_pretraining_optimizer(total_steps=STEPS, warmup_steps=1, learning_rate=1e-2))
    if initial_weights is not None:
        model.set_weights(initial_weights)
    return model


def train(fit, model, data):
    history = fit(model, data, epochs=STEPS, steps_per_epoch=1, verbose=0)
    return history.history["loss"], [w for w in model.get_weights()]


def max_difference(a, b):
    import numpy as np

    return float(max(np.max(np.abs(np.asarray(x) - np.asarray(y))) for x, y in zip(a, b)))


def shardings(model):
    """path -> (partition spec, shape of this device's shard) on JAX."""
    return {
        v.path: [[a for a in v.value.sharding.spec], list(v.value.addressable_shards[0].data.shape)]
        for v in model.weights
    }


def main():
    args = parse_args()
    start_backend(args)
    import keras

    import kzoo

    cluster = {}
    if args.engine == "jax-hosts":
        cluster = dict(multi_host=True, job_addresses=args.coordinator, num_processes=2, process_id=args.process_id)
    engines = [kzoo.distribution.setup(model_parallel=k, **cluster) for k in args.model_parallel]

    keras.utils.set_random_seed(0)
    features, labels = batches()
    initial = build().get_weights()

    def single_device_fit(model, data, **kwargs):
        return model.fit(data, **kwargs)

    result = {"runs": []}
    reference = (None, initial)
    if not args.no_reference:
        reference = train(single_device_fit, build(initial), dataset(features, labels, GLOBAL_BATCH))
        result.update(reference_losses=reference[0], weights_changed=max_difference(initial, reference[1]))
    if args.one_replica:
        half = GLOBAL_BATCH // 2
        one_replica = train(single_device_fit, build(initial), dataset(features, labels, half, slice(0, half)))
        result["one_replica_losses"] = one_replica[0]
        result["one_replica_weight_difference"] = max_difference(one_replica[1], reference[1])
    for distributed in engines:
        with distributed.scope():
            model = build(initial)
        losses, weights = train(distributed.fit, model, dataset(features, labels, GLOBAL_BATCH))
        run = {
            "engine": distributed.engine,
            "num_replicas": distributed.num_replicas,
            "num_processes": distributed.num_processes,
            "process_id": distributed.process_id,
            "losses": losses,
            "weight_difference": max_difference(weights, reference[1]),  # from `initial` without reference
        }
        if args.engine.startswith("jax"):
            run["shardings"] = shardings(model)
        result["runs"].append(run)
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")  # one write, so that ranks' lines stay whole
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
