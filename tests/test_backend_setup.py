"""kzoo's process set-up (kzoo.backend): a run in a clean environment prints no
TensorFlow C++ log line, and the thread pools and devices are what kzoo chose
unless the user chose otherwise. The runs are fresh processes with only PATH,
HOME and KERAS_BACKEND (the current backend) set: what a user gets (and the
suite's XLA_FLAGS, for shorter compiles)."""

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import keras
import pytest

from kzoo.backend import tensorflow as tensorflow_setup
from kzoo.backend import torch_threads as torch_setup

ROOT = Path(__file__).resolve().parents[1]
BACKEND = keras.backend.backend()
NOISE = re.compile(r"^[IWEF]\d{4} |cuInit|oneDNN|Ignoring Assert|absl::InitializeLog", re.MULTILINE)


def run_clean(code, **environment):
    """Runs `code` in a fresh Python with a clean environment; returns (stdout, stderr)."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": str(ROOT),
           "KERAS_BACKEND": BACKEND, **environment}
    if "XLA_FLAGS" in os.environ:  # conftest.py's faster XLA compiles; they change no log line
        env["XLA_FLAGS"] = os.environ["XLA_FLAGS"]
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                            text=True, timeout=900, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout, result.stderr


# Pre-training at two sequence lengths (the second trace has an unknown length
# on TensorFlow: position checks, loss shapes) and a classifier on raw text
# through tf.data: every source of C++ log lines seen in the examples.
TINY_RUN = """
    import kzoo
    import os, sys, tempfile
    print("imported kzoo", file=sys.stderr, flush=True)
    directory = tempfile.mkdtemp()
    sentences = [f"the {a} sat on the {b}." for a in ("cat", "dog", "bird") for b in ("mat", "log", "sofa")] * 3
    with open(os.path.join(directory, "corpus.txt"), "w") as f:
        f.write("\\n\\n".join("\\n".join(sentences[i:i + 3]) for i in range(0, len(sentences), 3)))
    vocabulary = os.path.join(directory, "vocabulary.txt")
    kzoo.learn_wordpiece_vocabulary(sentences, vocabulary_size=60, output_path=vocabulary, progress=False)
    tokenizer = kzoo.BertTokenizer(vocabulary)
    backbone = kzoo.BertBackbone(vocabulary_size=tokenizer.vocabulary_size(), num_layers=1, num_heads=2,
                                 hidden_dim=8, intermediate_dim=16, max_sequence_length=32)
    model = kzoo.BertPretrainer(backbone, tokenizer=tokenizer)
    model.compile(optimizer=kzoo.bert_pretraining_optimizer(4, warmup_steps=1))
    for length in (16, 32):
        dataset = kzoo.data.pretraining_dataset(os.path.join(directory, "corpus.txt"), tokenizer, length,
                                                batch_size=4, seed=0, progress=False)
        model.fit(dataset.repeat(), steps_per_epoch=2, epochs=1, verbose=0)
    classifier = kzoo.BertClassifier(backbone, num_classes=2,
                                     preprocessor=kzoo.BertPreprocessor(tokenizer, sequence_length=16))
    classifier.fit(sentences, [i % 2 for i in range(len(sentences))], batch_size=8, epochs=1, verbose=0)
    classifier.predict(sentences[:4], verbose=0)
    print("done", file=sys.stderr)
"""


@pytest.mark.skipif(BACKEND != "tensorflow", reason=(
    "on the default backend here; the examples' smoke runs (tests/run_examples.py) check every backend's output"))
def test_clean_run_prints_no_tensorflow_log_lines():
    _, stderr = run_clean(TINY_RUN)
    assert "done" in stderr
    assert not NOISE.findall(stderr), stderr[-4000:]


@pytest.mark.skipif(BACKEND != "tensorflow", reason=(
    "kzoo filters TensorFlow's log lines before Keras loads a backend: the same code on every backend"))
def test_user_log_level_zero_shows_tensorflow_lines_again():
    # TF_CPP_MIN_LOG_LEVEL=0: every line TensorFlow logs while loading, as without kzoo.
    sources = re.compile(r"^[IWEF]\d{4} .*? ([^ ]+:\d+)\] ", re.MULTILINE)
    _, alone = run_clean("import tensorflow", TF_CPP_MIN_LOG_LEVEL="0")
    _, with_kzoo = run_clean("import kzoo", TF_CPP_MIN_LOG_LEVEL="0")
    assert set(sources.findall(alone)) <= set(sources.findall(with_kzoo)), with_kzoo[-2000:]


def test_filter_drops_info_lines_and_keeps_the_rest():
    info = "I0000 00:00:1795444923.983301    3065 cpu_feature_guard.cc:227] This TensorFlow binary is optimized\n"
    continuation = "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow.\n"
    banner = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    error = "E0000 00:00:1795444923.98 3065 some_op.cc:12] a real error\n"
    warning = "W0000 00:00:1795444923.98 3065 some_op.cc:12] a real warning\n"
    python = "/x/y.py:3: UserWarning: a Python warning\n"
    text = banner + info + continuation + error + warning + python
    assert tensorflow_setup.drop_lines(text, 1) == error + warning + python
    assert tensorflow_setup.drop_lines(text, 2) == error + python
    assert tensorflow_setup.drop_lines(text, 0) == text
    provoked = "E0000 00:00:1795444924.1 3065 util.cc:131] oneDNN supports DT_INT32 only on platforms with AVX-512.\n"
    assert tensorflow_setup.drop_lines(provoked + error, 1) == error


def test_in_xla_compilation_uses_a_private_api_that_still_exists():
    # kzoo.backend.tensorflow.in_xla_compilation reads TensorFlow's private
    # control_flow_util.GraphOrParentsInXlaContext: fail loudly if it goes.
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    assert callable(control_flow_util.GraphOrParentsInXlaContext)
    assert not tensorflow_setup.in_xla_compilation()
    assert bool(tf.function(tensorflow_setup.in_xla_compilation, jit_compile=True)())
    assert not bool(tf.function(tensorflow_setup.in_xla_compilation)())


# XLA's CPU threads at work after `import kzoo`: the CPU seconds of each OS
# thread of the process (/proc/self/task) over a chain of 1024² matmuls.
XLA_THREADS = """
    import kzoo, os, tensorflow as tf

    def cpu_by_thread():
        ticks = {}
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks[task] = int(fields[11]) + int(fields[12])  # utime + stime
        return ticks

    a = tf.random.normal((1024, 1024))
    chain = tf.function(lambda a: tf.reduce_sum(a @ a @ a @ a), jit_compile=True)
    chain(a).numpy()
    before = cpu_by_thread()
    for _ in range(30):
        chain(a).numpy()
    after = cpu_by_thread()
    used = sorted((after[t] - before.get(t, 0) for t in after), reverse=True)
    print(used[0], used[1])
"""


@pytest.mark.skipif(BACKEND != "tensorflow" or len(os.sched_getaffinity(0)) < 2,
                    reason="TensorFlow's XLA threads, on a machine with 2 or more CPUs")
def test_import_kzoo_leaves_xla_all_its_threads():
    """`import kzoo` uses up a oneDNN notice by running one op in a
    `tf.compat.v1.Session`; a session limited to one thread made TensorFlow's
    CPU device, and so every XLA step of the process, run on one thread
    (bert_small training 1.9 s per step instead of 1.3 s on 2 cores, found
    2026-11-26). Work counted per OS thread, not timed: the second busiest
    thread must do at least a third of the busiest one's."""
    stdout, _ = run_clean(XLA_THREADS)
    busiest, second = map(int, stdout.split())
    assert busiest > 0 and second >= busiest / 3, (busiest, second)


THREADS = """
    import kzoo, torch
    print(torch.get_num_threads())
"""


def _torch_default_threads():
    stdout, _ = run_clean("import torch; print(torch.get_num_threads())")
    return int(stdout)


def test_set_up_state_threads_and_devices():
    """torch's threads are kzoo's choice on torch and untouched elsewhere;
    TensorFlow sees no GPU next to another backend and stays configurable."""
    default = _torch_default_threads()
    stdout, _ = run_clean("""
        import kzoo, torch
        import tensorflow as tf
        print(torch.get_num_threads())
        gpus = tf.config.list_physical_devices("GPU")
        print(tf.config.get_visible_devices("GPU") == [] if gpus else "no-gpu")
        tf.config.threading.set_inter_op_parallelism_threads(2)  # raises once TensorFlow has started
        print(tf.config.threading.get_inter_op_parallelism_threads())
    """)
    threads, hidden, inter_op = stdout.split()
    cpus = torch_setup.available_cpus()
    if BACKEND == "torch":  # busy or quiet as the child imported kzoo: not known here
        assert int(threads) in (torch_setup.default_threads(default, cpus), torch_setup.default_threads(default, cpus, cpus))
    else:
        assert int(threads) == default
    assert hidden in ("no-gpu", "True" if BACKEND != "tensorflow" else "False")
    assert inter_op == "2"


@pytest.mark.skipif(BACKEND != "torch", reason="kzoo sets torch's threads on the torch backend only")
def test_users_thread_choice_wins():
    stdout, _ = run_clean(THREADS, OMP_NUM_THREADS="2")
    assert int(stdout) == 2  # torch reads OMP_NUM_THREADS itself; kzoo leaves it
    # A lower count set before `import kzoo` is kept; a call after it wins.
    stdout, _ = run_clean("""
        import torch
        torch.set_num_threads(1)
        import kzoo
        before = torch.get_num_threads()
        torch.set_num_threads(2)
        print(before, torch.get_num_threads())
    """)
    assert stdout.split() == ["1", "2"]


@pytest.mark.parametrize("cpus, torch_default, idle, expected", [
    (1, 1, None, 1), (2, 2, None, 1), (4, 4, None, 3), (16, 8, None, 8), (64, 32, None, 32),  # load unknown
    (2, 2, 2.0, 2), (2, 2, 1.75, 2), (2, 2, 1.6, 1), (2, 2, 1.0, 1), (4, 4, 3.8, 4), (4, 4, 2.9, 3), (1, 1, 0.0, 1),
])
def test_default_threads_leave_one_cpu_unless_all_are_idle(cpus, torch_default, idle, expected):
    assert torch_setup.default_threads(torch_default, cpus, idle) == expected


@pytest.mark.once  # /proc/stat and spinning processes: no Keras backend involved
def test_idle_cpus_sees_busy_cores():
    """Every CPU this process may use kept busy by a process of its own: at
    most a few tenths of one CPU idle, far below the quiet threshold."""
    cpus = torch_setup.available_cpus()
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cpus)]
    try:
        time.sleep(0.3)  # the spinners running
        idle = torch_setup.idle_cpus(0.3)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert idle is not None and 0.0 <= idle < cpus - torch_setup.QUIET_MARGIN - 0.3, idle


def test_idle_cpus_is_none_without_the_kernels_counters(tmp_path):
    assert torch_setup.idle_cpus(0.0, stat=str(tmp_path / "missing")) is None


@pytest.mark.skipif(BACKEND != "jax", reason="the JAX platform is set on the jax backend only")
def test_jax_suggests_no_cuda_jaxlib_when_only_the_cpu_one_is_installed():
    # Pretends a GPU is present (hardware_utils looks for /dev/nvidia*); JAX
    # would suggest a CUDA jaxlib at its first op. The check shows it does
    # without kzoo, so the assertion below tests something.
    code = """
        import sys
        {kzoo}
        from jax._src import hardware_utils
        hardware_utils.has_visible_nvidia_gpu = lambda: True
        import jax
        print(jax.devices()[0].platform)
    """
    from kzoo.backend import jax as jax_setup

    if not jax_setup.only_cpu_installed():
        pytest.skip("an accelerator plugin is installed")
    stdout, stderr = run_clean(code.format(kzoo="import kzoo"))
    assert stdout.strip() == "cpu"
    assert "jaxlib" not in stderr, stderr
    _, stderr = run_clean(code.format(kzoo=""))
    assert "CUDA-enabled jaxlib is not installed" in stderr
