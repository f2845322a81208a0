"""kzoo.distribution trains like one device on the same global batch, on each engine.

Each test runs `parity_worker.py` in fresh processes (device counts must be set
before the backend starts) and checks its numbers: a tiny BertMaskedLM
trained 3 steps (global batch 8, kzoo's BERT optimizer with gradient clipping)
distributed and on one device from the same weights. Each engine is tested
under its own KERAS_BACKEND only (the others skip).
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

WORKER = Path(__file__).with_name("parity_worker.py")
ROOT = WORKER.parents[2]
TOLERANCE = 1e-5


def only_on(backend):
    return pytest.mark.skipif(
        keras.backend.backend() != backend,
        reason=f"tests the {backend} engine: runs under KERAS_BACKEND={backend} only",
    )


def results(*commands, timeout=240):
    """Runs the commands side by side; the `RESULT` JSON each printed."""
    # XLA_FLAGS passes on (the suite's optimisation level, tests/conftest.py).
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    processes = [
        subprocess.Popen(c, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for c in commands
    ]
    outputs = [p.communicate(timeout=timeout)[0] for p in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    # torchrun's ranks share one pipe: one rank's line was seen glued to the
    # end of the other's, so every "RESULT " is decoded where it starts.
    decoder = json.JSONDecoder()
    return [
        decoder.raw_decode(part)[0]
        for out in outputs
        for part in out.split("RESULT ")[1:]
        if part.startswith("{")
    ]


def worker(*args):
    return [sys.executable, str(WORKER), *args]


def assert_same_training(result, run, num_replicas):
    assert run["num_replicas"] == num_replicas
    assert result["weights_changed"] > 1e-3  # training moved the weights far beyond the tolerance
    np.testing.assert_allclose(run["losses"], result["reference_losses"], rtol=0, atol=TOLERANCE)
    assert run["weight_difference"] < TOLERANCE


@pytest.fixture(scope="module")
def jax_result():
    """8 simulated devices: data parallel, then a 2 x 4 (batch x model) mesh."""
    return results(worker("jax", "--model-parallel", "1", "4"))[0]


@only_on("jax")
def test_jax_data_parallel_trains_like_one_device(jax_result):
    data_parallel = jax_result["runs"][0]
    assert data_parallel["engine"] == "keras.distribution.DataParallel"
    assert_same_training(jax_result, data_parallel, num_replicas=8)
    assert all(set(spec) == {None} for spec, _ in data_parallel["shardings"].values())  # replicated


@only_on("jax")
def test_jax_model_parallel_trains_like_one_device_with_sharded_weights(jax_result):
    model_parallel = jax_result["runs"][1]
    assert model_parallel["engine"] == "keras.distribution.ModelParallel"
    assert_same_training(jax_result, model_parallel, num_replicas=2)
    shardings = model_parallel["shardings"]
    layer = "transformer_layer_0/"
    # (partition spec, shape of one device's shard): H=16, A=4 heads of 4, d_ff=32, over 4 devices.
    expected = {
        "token_embedding/embeddings": ([None, "model"], [50, 4]),
        layer + "self_attention/query/kernel": ([None, "model", None], [16, 1, 4]),
        layer + "self_attention/value/bias": (["model", None], [1, 4]),
        layer + "self_attention/attention_output/kernel": (["model", None, None], [1, 4, 16]),
        layer + "feed_forward/intermediate_dense/kernel": ([None, "model"], [16, 8]),
        layer + "feed_forward/output_dense/kernel": (["model", None], [8, 16]),
        layer + "feed_forward_layer_norm/gamma": ([None], [16]),
        "mlm_head/bias": ([None], [50]),
    }
    assert {path: tuple(shardings[path]) for path in expected} == expected


@only_on("jax")
def test_jax_two_processes_train_together_through_a_coordinator(jax_result):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    runs = results(*(
        worker("jax-hosts", "--process-id", str(i), "--coordinator", address, "--no-reference")
        for i in range(2)
    ))
    assert sorted(r["runs"][0]["process_id"] for r in runs) == [0, 1]
    for result in runs:
        run = result["runs"][0]
        assert (run["num_processes"], run["num_replicas"]) == (2, 2)
        np.testing.assert_allclose(run["losses"], jax_result["reference_losses"], rtol=0, atol=TOLERANCE)
    # Same updates on both processes: the same distance from the initial weights.
    assert runs[0]["runs"][0]["weight_difference"] == runs[1]["runs"][0]["weight_difference"] > 1e-3


@only_on("tensorflow")
def test_tensorflow_mirrored_strategy_trains_like_one_device():
    result = results(worker("tensorflow"))[0]
    run = result["runs"][0]
    assert run["engine"] == "tf.distribute.MirroredStrategy"
    assert_same_training(result, run, num_replicas=2)


@only_on("torch")
def test_torch_ddp_trains_like_one_device_on_every_rank():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
               "--master_addr=127.0.0.1", f"--master_port={port}", str(WORKER), "torch", "--one-replica"]
    ranks = results(command)
    assert sorted(r["runs"][0]["process_id"] for r in ranks) == [0, 1]
    for result in ranks:
        assert result["runs"][0]["engine"] == "torch.nn.parallel.DistributedDataParallel"
        assert_same_training(result, result["runs"][0], num_replicas=2)
        # One rank's half batches alone train a different model: the comparison can fail.
        assert result["one_replica_weight_difference"] > 100 * TOLERANCE


def test_one_device_is_plain_keras_and_batch_sizes_convert():
    import kzoo

    distributed = kzoo.distribution.setup()
    assert (distributed.engine, distributed.num_replicas) == ("single device", 1)
    eight = kzoo.distribution.Distributed(num_replicas=8)
    assert (eight.global_batch_size(32), eight.per_replica_batch_size(256)) == (256, 32)
    with pytest.raises(ValueError, match="multiple of 8, e.g. 96"):
        eight.per_replica_batch_size(100)


def test_model_parallel_needs_jax_and_enough_devices():
    import kzoo

    message = "does not divide the 1 devices" if keras.backend.backend() == "jax" else "runs on JAX only"
    with pytest.raises(ValueError, match=message):
        kzoo.distribution.setup(model_parallel=4)


@pytest.mark.backend_independent
def test_torch_ranks_need_global_batches_that_split_evenly():
    import tensorflow as tf

    from kzoo.distribution.torch import shard_batches

    ragged_end = tf.data.Dataset.range(10).batch(4)  # last batch of 2: unknown static size
    with pytest.raises(ValueError, match="drop_remainder=True"):
        shard_batches(ragged_end, 2, 0)
    with pytest.raises(ValueError, match="multiple of 3"):
        shard_batches(tf.data.Dataset.range(8).batch(4, drop_remainder=True), 3, 0)
