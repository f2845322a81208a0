"""examples/serve.py: a SavedModel served over HTTP by a process that never
imports kzoo answers like the Keras model, and refuses malformed
requests with a 4xx and a message saying what was wrong."""

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import keras
import numpy as np
import pytest

from tests.cli.cli_fixtures import NEGATIVE, POSITIVE

SERVE = Path(__file__).resolve().parents[2] / "examples" / "serve.py"
# Serving a SavedModel is the same whatever backend wrote it: once, under TensorFlow, whose run exports
# the classifier in the process (tests/conftest.py), where torch's would start a TensorFlow process.
pytestmark = pytest.mark.once(backend="tensorflow")


def _post(port, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/predict", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture(scope="module")
def served(saved_models, tmp_path_factory):
    """(Keras classifier, port, server process, its stderr's path) serving tests/export's fine-tuned classifier
    (`saved_models`, tests/export/saved_models.py: exported once per run)."""
    model, path, _ = saved_models[0]["classifier"]
    log = tmp_path_factory.mktemp("serve") / "server.stderr"
    # `-X importtime`: the server writes each module it imports to stderr, the record
    # test_the_serving_half_does_not_import_kzoo reads (no second process to load the model again).
    stderr = open(log, "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [sys.executable, "-X", "importtime", str(SERVE), "--saved-model", path,
         "--port", "0", "--max-request-bytes", "65536", "--max-batch", "8"],
        stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        line = server.stdout.readline()
        assert "serving" in line, line
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        yield model, port, server, log
    finally:
        server.terminate()
        server.wait(timeout=30)
        stderr.close()


def test_the_server_answers_like_the_keras_model(served):
    model, port, _, _ = served
    texts = POSITIVE[:3] + NEGATIVE[:3]
    status, answer = _post(port, json.dumps({"text": texts}).encode())
    assert status == 200, answer
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(model.predict(texts, verbose=0)))
    assert np.allclose(answer["probabilities"], expected, atol=1e-5)
    assert answer["class_names"] == [model.class_names[i] for i in expected.argmax(-1)]


def test_the_server_answers_as_the_saved_model_served_by_its_ops_alone(served, saved_models):
    """What a user's serving does (`import tensorflow_text`; no kzoo: see the last test) gives exactly
    the probabilities of tests/export's serving process, which has TensorFlow and tensorflow-text's ops alone."""
    _, port, _, _ = served
    _, _, inputs = saved_models[0]["classifier"]
    status, answer = _post(port, json.dumps(inputs).encode())
    assert status == 200, answer
    np.testing.assert_allclose(answer["probabilities"], saved_models[1]["classifier"]["probabilities"], atol=0, rtol=0)


@pytest.mark.parametrize(
    "body, status, words",
    [
        (b"texts=good", 400, "not JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (json.dumps({"texts": ["good"]}).encode(), 400, "missing ['text']; unknown ['texts']"),
        (json.dumps({"text": ["good", 5]}).encode(), 400, "'text'[1] is a number (5), not a string"),
        (json.dumps({"text": [None]}).encode(), 400, "'text'[0] is null"),
        (json.dumps({"text": "good"}).encode(), 400, "must be a non-empty list of strings"),
        (json.dumps({"text": []}).encode(), 400, "must be a non-empty list of strings"),
        (json.dumps({"text": ["good"] * 9}).encode(), 400, "at most 8 per request"),
        (json.dumps({"text": ["good " * 210_000]}).encode(), 413, "the limit is 65,536"),
    ],
    ids=["not-json", "not-object", "missing-field", "number", "null", "string-not-list", "empty", "too-many",
         "1MB-text"],
)
def test_malformed_requests_get_a_4xx_saying_what_was_wrong(served, body, status, words):
    _, port, server, _ = served
    got, answer = _post(port, body)
    assert (got, words in answer["error"]) == (status, True), answer
    assert server.poll() is None  # still serving
    assert _post(port, json.dumps({"text": ["good film"]}).encode())[0] == 200


def test_the_serving_half_does_not_import_kzoo(served):
    _, port, _, log = served
    assert _post(port, json.dumps({"text": ["good film"]}).encode())[0] == 200  # it has loaded and served
    # `-X importtime` lines: "import time: self [us] | cumulative | module", one per module imported.
    imported = [line.rsplit("|", 1)[1].strip() for line in log.read_text().splitlines()
                if line.startswith("import time:") and not line.rstrip().endswith("imported package")]
    assert "tensorflow_text" in imported and "tensorflow" in imported  # the record holds the server's imports
    # tensorflow-text imports Keras for its own layers; tests/export checks the
    # SavedModel with tensorflow-text's ops alone, without Keras.
    assert sorted(m for m in imported if m.split(".")[0] == "kzoo") == []
