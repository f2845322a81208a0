"""Serves kzoo SavedModels in a process that has neither kzoo nor Keras: run
as `python serve_without_kzoo.py` with a JSON list of requests
`{"path": ..., "inputs": {name: [str, ...]}}` on stdin; prints a JSON list of
`serving_default`'s outputs (strings decoded, arrays as nested lists), then
the blocked modules this process holds.

It blocks kzoo, Keras and tensorflow-text's Python package, and loads
tensorflow-text's compiled op libraries alone: the SavedModel needs
TensorFlow and those ops, nothing else. What a user does (`import
tensorflow_text`, which imports Keras for its own layers) is examples/serve.py's
server, which tests/examples/test_serve.py checks against this process.
"""

import glob
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

BLOCKED = ("kzoo", "keras", "tf_keras", "tensorflow_text")


class _Refused(importlib.abc.Loader):
    def create_module(self, spec):
        raise ImportError(f"{spec.name} may not be imported in this serving process")

    def exec_module(self, module):
        raise ImportError(module.__name__)


class _Block(importlib.abc.MetaPathFinder):
    """Makes `import NAME` fail for the blocked top-level names (found, but
    refusing to load, so TensorFlow's optional Keras imports fail quietly)."""

    def __init__(self, names):
        self.names = names

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(name, _Refused())
        return None


def _plain(value):
    array = value.numpy()
    if array.dtype == object:
        return [[v.decode("utf-8") for v in row] for row in array.tolist()] if array.ndim == 2 else [
            v.decode("utf-8") for v in array.tolist()]
    return array.tolist()


def main():
    names = BLOCKED
    # Where tensorflow-text's op libraries are, before it is blocked (this
    # finds the package without importing it).
    text_ops = os.path.join(importlib.util.find_spec("tensorflow_text").submodule_search_locations[0], "python", "ops")
    sys.meta_path.insert(0, _Block(names))
    import tensorflow as tf  # noqa: PLC0415

    for library in sorted(glob.glob(os.path.join(text_ops, "_*.so"))):
        tf.load_op_library(library)

    results = []
    for request in json.load(sys.stdin):
        serve = tf.saved_model.load(request["path"]).signatures["serving_default"]
        outputs = serve(**{name: tf.constant(values, tf.string) for name, values in request["inputs"].items()})
        results.append({name: _plain(value) for name, value in outputs.items()})
    loaded = sorted({name.split(".")[0] for name in sys.modules} & set(names))
    print(json.dumps({"outputs": results, "blocked_modules_loaded": loaded}))


if __name__ == "__main__":
    main()
