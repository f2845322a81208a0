"""Serve the main job's fine-tuned classifier over HTTP from its SavedModel alone (no kzoo).

    python examples/serve.py                              # export finetuned/bert_python_docs_areas, then serve
    python examples/serve.py --saved-model exported/areas # serve an export that exists
    curl -s 127.0.0.1:8000/predict -d '{"text": ["Return the square root of x."]}'

1. Export: the classifier that `bert_finetuning.py` saved (a kzoo preset
   directory) becomes a TensorFlow SavedModel with its WordPiece tokenizer
   and packing inside the graph (`task.export(path, format="tf_saved_model")`),
   so its `serving_default` signature takes a batch of strings and returns
   class names and probabilities.
2. Serve: a small HTTP server on 127.0.0.1 (Python's `http.server`) that
   loads the SavedModel with TensorFlow and tensorflow-text only: the
   serving half of this file never imports kzoo, so a serving machine needs
   `pip install tensorflow tensorflow-text` and the exported directory.
   `GET /` describes the inputs and outputs; `POST /predict` takes a JSON
   object with one list of strings per input of the signature
   (`{"text": [...]}`; a pair classifier wants `"text_a"` and `"text_b"`) and answers
   with one list per output. A request that is not JSON, misses an input,
   holds something other than strings, is empty, is larger than
   `--max-request-bytes` (64 KiB) or holds more than `--max-batch` (64)
   texts gets a 4xx answer whose `error` says what was wrong; the model
   never sees it.

`--smoke` exports what `bert_finetuning.py --smoke` saved (or, when that
has not run, the untrained all_minilm_l6_v2 classifier), starts the server
on a free port, sends good and malformed requests, checks the answers and
stops: every code path, in about 20 seconds (a TensorFlow process exports on
JAX and torch).
"""

import argparse
import http.server
import json
import os
import sys
import threading
import urllib.error
import urllib.request

# TensorFlow's C++ lines (CUDA probes, oneDNN notices) report nothing wrong: this server, an
# application, hides them unless you set TF_CPP_MIN_LOG_LEVEL yourself (0 shows them).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

DEFAULT_PRESET = "finetuned/bert_python_docs_areas"
DISCARD_LIMIT = 16 << 20  # a refused body larger than this is not read: the connection is closed


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default=DEFAULT_PRESET, help="the fine-tuned classifier to export")
    parser.add_argument("--saved-model", help="serve this SavedModel directory (skips the export)")
    parser.add_argument("--export-to", help="where to write the SavedModel (default: <preset>-saved_model)")
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--max-request-bytes", type=int, default=64 * 1024)
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--smoke", action="store_true",
                        help="export, serve on a free port, send good and bad requests, stop (CI runs it)")
    return parser.parse_args(argv)


# === Export (kzoo) ===


def export(preset, path, smoke):
    """Writes `preset`'s classifier as a SavedModel at `path`; returns `path`."""
    from kzoo_cli.quiet import import_kzoo  # noqa: PLC0415  (only the export needs kzoo)

    kzoo = import_kzoo()  # TensorFlow's C++ start-up lines off the terminal

    if smoke:
        from example_runs import smoke_directory  # noqa: PLC0415

        preset = smoke_directory("bert_python_docs_areas")
        path = smoke_directory("bert_python_docs_areas-saved_model")
        if not os.path.isdir(preset):
            print(f"no {preset} (bert_finetuning.py --smoke writes it): exporting the untrained "
                  "all_minilm_l6_v2 classifier instead", flush=True)
            preset = None
    if preset is None:
        model = kzoo.BertClassifier.from_preset("all_minilm_l6_v2", class_names=["a", "b"], sequence_length=16)
    elif not os.path.isdir(preset):
        sys.exit(f"No preset directory {preset!r}. The main job writes it:\n    python examples/bert_finetuning.py")
    else:
        model = kzoo.BertClassifier.from_preset(preset)
    model.export(path, format="tf_saved_model")
    print(f"exported {preset or 'all_minilm_l6_v2'} to the SavedModel {path}/", flush=True)
    return path


# === Serving (TensorFlow and tensorflow-text only) ===


class RequestError(Exception):
    """A request the server refuses: HTTP `status` and a message for the caller."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Model:
    """The SavedModel's `serving_default` signature with the names of its string inputs and outputs."""

    def __init__(self, path):
        import tensorflow as tf  # noqa: PLC0415
        import tensorflow_text  # noqa: F401, PLC0415  (registers the tokenizer's ops before loading)

        self.tf = tf
        self.signature = tf.saved_model.load(path).signatures["serving_default"]
        self.inputs = sorted(self.signature.structured_input_signature[1])
        self.outputs = sorted(self.signature.structured_outputs)

    def describe(self):
        return {"inputs": {name: "list of strings" for name in self.inputs}, "outputs": self.outputs,
                "post": "/predict", "example": {name: ["some text"] for name in self.inputs}}

    def __call__(self, batch):
        outputs = self.signature(**{name: self.tf.constant(texts) for name, texts in batch.items()})
        return {name: _jsonable(value.numpy()) for name, value in outputs.items()}


def _jsonable(array):
    if array.dtype == object:  # tf.string outputs: bytes
        return [_jsonable(row) for row in array] if array.ndim > 1 else [b.decode("utf-8") for b in array]
    return array.tolist()


def _json_kind(value):
    kinds = {bool: "true/false", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def parse_request(body, inputs, max_batch):
    """The batch a JSON `body` asks for, `{input name: [str, ...]}`, or a `RequestError` saying what is wrong."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(400, f"the request body is not JSON ({error}); send e.g. "
                                f"{json.dumps({name: ['some text'] for name in inputs})}") from None
    if not isinstance(request, dict):
        raise RequestError(
            400, f"the request must be a JSON object with the keys {inputs}, got {type(request).__name__}")
    missing, unknown = [n for n in inputs if n not in request], sorted(set(request) - set(inputs))
    if missing or unknown:
        raise RequestError(400, f"the request must have the keys {inputs}" + (f"; missing {missing}" if missing else "")
                           + (f"; unknown {unknown}" if unknown else ""))
    batch = {}
    for name in inputs:
        texts = request[name]
        if not isinstance(texts, list) or not texts:
            raise RequestError(400, f"{name!r} must be a non-empty list of strings, got {json.dumps(texts)[:80]}")
        bad = next((i for i, text in enumerate(texts) if not isinstance(text, str)), None)
        if bad is not None:
            raise RequestError(400, f"{name!r}[{bad}] is {_json_kind(texts[bad])} ({json.dumps(texts[bad])[:40]}), "
                                    "not a string: send every text as a JSON string")
        if len(texts) > max_batch:
            raise RequestError(400, f"{name!r} holds {len(texts)} texts; at most {max_batch} per request")
        batch[name] = texts
    if len({len(texts) for texts in batch.values()}) > 1:
        raise RequestError(400, "the lists " + ", ".join(f"{n!r} ({len(t)})" for n, t in batch.items())
                           + " must have the same length: one pair per position")
    return batch


def make_server(model, port, max_request_bytes, max_batch):
    """A threading HTTP server on 127.0.0.1:`port` answering `GET /` and `POST /predict` with `model`."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path != "/":
                return self._answer(404, {"error": f"no page {self.path}; GET / or POST /predict"})
            return self._answer(200, model.describe())

        def do_POST(self):  # noqa: N802
            try:
                if self.path != "/predict":
                    raise RequestError(404, f"no endpoint {self.path}; POST /predict")
                length = self.headers.get("Content-Length")
                if length is None or not length.isdigit():
                    raise RequestError(411, "send a Content-Length header with the JSON body")
                if int(length) > max_request_bytes:
                    self._discard(int(length))
                    raise RequestError(413, f"the request is {int(length):,} bytes; the limit is "
                                            f"{max_request_bytes:,} (split the batch, or shorten the texts: "
                                            "the model reads only their first tokens)")
                batch = parse_request(self.rfile.read(int(length)), model.inputs, max_batch)
            except RequestError as error:
                self.close_connection = True  # an unread body must not be taken for the next request
                return self._answer(error.status, {"error": str(error)})
            return self._answer(200, model(batch))

        def _discard(self, length):
            """Reads (and drops) a refused body, so the client reads the answer instead of a reset connection."""
            while length > 0 and length <= DISCARD_LIMIT:
                chunk = self.rfile.read(min(length, 1 << 16))
                if not chunk:
                    break
                length -= len(chunk)

        def _answer(self, status, payload):
            body = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):  # one short line per request on stderr
            sys.stderr.write(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else ''}\n")

    return http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)


# === Smoke: a client ===


def post(port, body):
    """(status, JSON answer) of POST /predict with `body` (bytes)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/predict", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def smoke_requests(port, inputs):
    """Sends one good request and each kind of malformed one; checks the status codes."""
    good = {name: ["Return the square root of x.", "Open the file and read its lines."] for name in inputs}
    status, answer = post(port, json.dumps(good).encode())
    assert status == 200, answer
    print(f"POST {json.dumps(good)}\n  -> 200 {json.dumps(answer)[:300]}", flush=True)
    malformed = {
        "not JSON": b"texts=hello",
        "missing input": json.dumps({"texts": ["hello"]}).encode(),
        "a number, not a string": json.dumps({name: ["fine", 5] for name in inputs}).encode(),
        "empty list": json.dumps({name: [] for name in inputs}).encode(),
        "1 MB text": json.dumps({name: ["word " * 200_000] for name in inputs}).encode(),
    }
    for what, body in malformed.items():
        status, answer = post(port, body)
        assert 400 <= status < 500 and "error" in answer, (what, status, answer)
        print(f"{what}: {status} {answer['error'][:110]}", flush=True)


def main():
    args = parse_args()
    path = args.saved_model or export(args.preset, args.export_to or f"{args.preset}-saved_model", args.smoke)
    model = Model(path)
    server = make_server(model, 0 if args.smoke else args.port, args.max_request_bytes, args.max_batch)
    port = server.server_address[1]
    print(f"serving {path} on http://127.0.0.1:{port}/ (inputs {model.inputs}, outputs {model.outputs})",
          flush=True)
    if not args.smoke:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped")
        return
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        smoke_requests(port, model.inputs)
    finally:
        server.shutdown()
        server.server_close()
    print("smoke run: the good request answered, every malformed one refused with a 4xx")


if __name__ == "__main__":
    main()
