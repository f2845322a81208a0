"""The applications (the `kzoo` command, the examples) start without TensorFlow's C++
loading lines on the terminal; `import kzoo` alone leaves stderr as it is."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _stderr(code):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_import_kzoo_keeps_the_loading_lines_off_stderr_and_passes_others_on():
    stderr = _stderr("import sys\nfrom kzoo_cli.quiet import import_kzoo\nimport_kzoo()\n"
                     "print('after', file=sys.stderr)")
    assert "absl::InitializeLog" not in stderr and "cuda drivers" not in stderr
    assert stderr.strip().endswith("after")


def test_the_filter_knows_tensorflows_loading_lines():
    from kzoo_cli.quiet import STARTUP_LINES

    assert STARTUP_LINES.search("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR")
    assert STARTUP_LINES.search("I0000 00:00:1.2    8391 cudart_stub.cc:31] Could not find cuda drivers on your machine")
    assert not STARTUP_LINES.search("Traceback (most recent call last):")


def test_the_command_hides_tensorflows_c_plus_plus_log_unless_asked(monkeypatch, capsys):
    from kzoo_cli import main

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "")  # recorded, so that the test leaves the variable as it was
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL")
    assert main(["presets", "--family", "transformer"]) == 0
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"  # before TensorFlow's first op logs cuInit's error 303
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert main(["presets", "--family", "transformer"]) == 0
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"  # the user's own setting wins
