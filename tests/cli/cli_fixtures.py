"""What the `kzoo` command's tests share: running the installed command in a
subprocess or its entry point in this process, and tiny models saved as
presets (built here, never downloaded)."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import traceback
from unittest import mock

import keras
import numpy as np

import kzoo
import kzoo_cli

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "a", "very", "plot", "is", "."]
POSITIVE = ["good film", "a very good film", "good plot", "the plot is good", "a good film ."]
NEGATIVE = ["bad film", "a very bad film", "bad plot", "the plot is bad", "a bad film ."]


def kzoo_command():
    """The `kzoo` console script installed beside the interpreter running the tests (pip install
    puts it there), else the first on PATH: another Python's `kzoo` on PATH is not this one."""
    found = shutil.which("kzoo", path=os.path.dirname(sys.executable)) or shutil.which("kzoo")
    assert found, "`kzoo` is not on PATH: install the project (pip install -e .) before running the tests"
    return found


def run(*arguments, stdin=None, cwd=None, env=None, timeout=600):
    """`kzoo ARGUMENTS...` in a subprocess on this test run's backend: `CompletedProcess` (text)."""
    environment = dict(os.environ, KERAS_BACKEND=keras.backend.backend(), TF_CPP_MIN_LOG_LEVEL="2")
    environment.update(env or {})
    return subprocess.run([kzoo_command(), *map(str, arguments)], input=stdin, capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=timeout)


def run_here(*arguments, stdin=None):
    """`kzoo ARGUMENTS...` as the console script runs it (`kzoo_cli.main`, the
    `kzoo` entry point) but in this process, with stdin, stdout and stderr
    captured: a `CompletedProcess` (text) like `run`'s, an uncaught exception
    giving status 1 and its traceback on stderr as the interpreter would. It
    spares each test a fresh interpreter's imports (TensorFlow, Keras and the
    backend: 10-15 CPU seconds); test_cli_help.py and test_cli_bad_input.py
    run the installed script itself."""
    arguments = [str(argument) for argument in arguments]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), \
            mock.patch.object(sys, "stdin", io.StringIO(stdin or "")):
        try:
            code = kzoo_cli.main(arguments)
        except SystemExit as exit:  # argparse's errors
            code = exit.code
        except Exception:  # noqa: BLE001 (what the interpreter does with it)
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["kzoo", *arguments], code, stdout.getvalue(), stderr.getvalue())


def expect_error(result, *fragments):
    """Exit status 2 and one line on stderr naming what was wrong; nothing on stdout."""
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-4000:])
    message = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def tiny_backbone(vocabulary_size=len(VOCABULARY), max_sequence_length=32):
    return kzoo.BertBackbone(vocabulary_size=vocabulary_size, num_layers=1, num_heads=2, hidden_dim=32,
                             intermediate_dim=64, max_sequence_length=max_sequence_length)


def save_classifier_preset(path):
    """A tiny classifier preset (random weights) to fine-tune from."""
    model = kzoo.BertClassifier(tiny_backbone(), num_classes=2,
                                preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16))
    model.save_to_preset(path)
    return path


def save_pretrainer_preset(path):
    model = kzoo.BertPretrainer(tiny_backbone(), tokenizer=kzoo.BertTokenizer(VOCABULARY))
    model.save_to_preset(path)
    return model


def write_csv(path, rows, header=("text", "label"), delimiter=","):
    import csv  # noqa: PLC0415

    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as file:
        file.writelines(json.dumps(row) + "\n" for row in rows)
    return path


def labelled_rows(repeats=4):
    rows = [(text, "positive") for text in POSITIVE] + [(text, "negative") for text in NEGATIVE]
    return [row for _ in range(repeats) for row in rows]


def softmax(logits):
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)
