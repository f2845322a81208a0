"""`kzoo --help` and every command's help: on PATH after `pip install`, fast
(no TensorFlow loaded), exit statuses scripts can rely on."""

import contextlib
import io
import os
import subprocess
import sys

import pytest

import kzoo_cli
from tests.cli.cli_fixtures import expect_error, run

COMMANDS = ("presets", "convert", "finetune", "predict", "embed", "search", "rerank", "fill-mask", "attention", "translate",
            "pretrain")
pytestmark = pytest.mark.backend_independent  # nothing here runs a model (tests/conftest.py)


def test_help_lists_every_command():
    result = run("--help")
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("positional arguments:")[1].split("options:")[0]
    assert [line.split()[0] for line in listed.splitlines() if line.startswith("    ") and
            not line.startswith("     ")] == list(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    result = run(command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: kzoo {command}"), result.stdout[:200]
    assert "--backend" in result.stdout or command == "presets"


def test_help_loads_no_tensorflow_and_no_keras():
    code = ("import sys, contextlib, io, kzoo_cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    for argv in (['--help'], ['finetune', '--help'], ['embed', '--help'], ['search', '--help']):\n"
            "        try: kzoo_cli.main(argv)\n"
            "        except SystemExit as exit: assert exit.code == 0\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'kzoo', 'jax', 'torch')))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


def test_no_command_is_a_usage_error():
    result = run()
    assert result.returncode == 2
    assert result.stderr.startswith("usage: kzoo")


def test_unknown_command_and_option_are_usage_errors():
    assert run("finetuen").returncode == 2
    result = run("predict", "model", "--inptu", "x.csv")
    assert result.returncode == 2 and "unrecognized arguments: --inptu" in result.stderr


def test_version():
    result = run("--version")
    assert result.returncode == 0 and result.stdout.startswith("kzoo 0."), result.stdout


def test_unknown_backend_in_the_environment():
    result = run("presets", env={"KERAS_BACKEND": "tensorflw"})
    expect_error(result, "KERAS_BACKEND='tensorflw' is not a backend kzoo runs on", "tensorflow, jax, torch")


def test_python_dash_m_kzoo_is_the_same_command():
    # `python -m kzoo` imports the kzoo package, hence Keras and its backend, before the help: on
    # TensorFlow, which kzoo imports anyway, rather than also torch's 2-3 s of CPU per process.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
    result = subprocess.run([sys.executable, "-m", "kzoo", "fill-mask", "--help"], capture_output=True, text=True,
                            env=env)
    assert result.returncode == 0 and result.stdout.startswith("usage: python -m kzoo fill-mask"), result.stderr
    # Every command's parser takes its name from the one `python -m kzoo` passes (kzoo_cli.main's
    # `prog`): another command checked here, without a second process's imports (6 s of CPU).
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), pytest.raises(SystemExit) as exit:
        kzoo_cli.main(["convert", "--help"], prog="python -m kzoo")
    assert exit.value.code == 0 and stdout.getvalue().startswith("usage: python -m kzoo convert"), stdout.getvalue()
