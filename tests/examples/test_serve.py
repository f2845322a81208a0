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

import kzoo
from tests.cli.cli_fixtures import NEGATIVE, POSITIVE, VOCABULARY, tiny_backbone

SERVE = Path(__file__).resolve().parents[2] / "examples" / "serve.py"


def _post(port, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/predict", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(Keras classifier, port, server process) for an exported tiny classifier."""
    directory = tmp_path_factory.mktemp("serve")
    model = kzoo.BertClassifier(tiny_backbone(), class_names=["negative", "positive"],
                                preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 16))
    model.export(directory / "saved_model", format="tf_saved_model")
    # `-X importtime`: the server writes each module it imports to stderr, the record
    # test_the_serving_half_does_not_import_kzoo reads (no second process to load the model again).
    stderr = open(directory / "server.stderr", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [sys.executable, "-X", "importtime", str(SERVE), "--saved-model", str(directory / "saved_model"),
         "--port", "0", "--max-request-bytes", "65536", "--max-batch", "8"],
        stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        line = server.stdout.readline()
        assert "serving" in line, line
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        yield model, port, server
    finally:
        server.terminate()
        server.wait(timeout=30)
        stderr.close()


@pytest.mark.backend_independent
def test_the_server_answers_like_the_keras_model(served):
    model, port, _ = served
    texts = POSITIVE[:3] + NEGATIVE[:3]
    status, answer = _post(port, json.dumps({"text": texts}).encode())
    assert status == 200, answer
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(model.predict(texts, verbose=0)))
    assert np.allclose(answer["probabilities"], expected, atol=1e-5)
    assert answer["class_names"] == [["negative", "positive"][i] for i in expected.argmax(-1)]


@pytest.mark.backend_independent
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
    _, port, server = served
    got, answer = _post(port, body)
    assert (got, words in answer["error"]) == (status, True), answer
    assert server.poll() is None  # still serving
    assert _post(port, json.dumps({"text": ["good film"]}).encode())[0] == 200


@pytest.mark.backend_independent
def test_the_serving_half_does_not_import_kzoo(served):
    _, port, server = served
    assert _post(port, json.dumps({"text": ["good film"]}).encode())[0] == 200  # it has loaded and served
    log = Path(server.args[server.args.index("--saved-model") + 1]).parent / "server.stderr"
    # `-X importtime` lines: "import time: self [us] | cumulative | module", one per module imported.
    imported = [line.rsplit("|", 1)[1].strip() for line in log.read_text().splitlines()
                if line.startswith("import time:") and not line.rstrip().endswith("imported package")]
    assert "tensorflow_text" in imported and "tensorflow" in imported  # the record holds the server's imports
    # tensorflow-text imports Keras for its own layers; tests/export checks the
    # SavedModel with tensorflow-text's ops alone, without Keras.
    assert sorted(m for m in imported if m.split(".")[0] == "kzoo") == []
