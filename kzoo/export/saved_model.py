"""The TensorFlow SavedModel of a kzoo model, with its tokenizer inside: the
`format="tf_saved_model"` of `kzoo.models.Task.export` and `kzoo.Transformer.export`.

The SavedModel's `serving_default` signature takes batches of strings and
returns what a caller wants (`kzoo.export.serving`): tokenization, packing,
the network and the decoding (class names, answer spans, beam search) are
one TensorFlow graph. Serving it needs TensorFlow and tensorflow-text's ops,
not kzoo or Keras:

    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer's ops; before loading
    serve = tf.saved_model.load(path).signatures["serving_default"]
    serve(text=tf.constant(["a good film"]))["class_names"]

Under TensorFlow the graph is traced from the model in this process. Under
JAX or PyTorch, where Keras cannot trace TensorFlow graphs, the model is
saved to a temporary preset directory and exported by a new process on the
TensorFlow backend (`kzoo.export.tensorflow_worker`): the same weights, so
the same numbers, without the user switching backends. Either way the
SavedModel is written beside `path` and renamed into place
(`kzoo.atomic`), replacing an earlier SavedModel there.
"""

import inspect
import json
import os
import subprocess
import sys
import tempfile

import keras
import tensorflow as tf

from kzoo.export.answer_spans import serve_answers
from kzoo.export.serving import serve_classes, serve_embeddings, serve_features, serve_tags, serve_translations
from kzoo import atomic

BUILDERS = {
    "BertClassifier": serve_classes,
    "BertFeatureExtractor": serve_features,
    "BertTokenClassifier": serve_tags,
    "BertQuestionAnswerer": serve_answers,
    "BertTextEmbedder": serve_embeddings,
    "Transformer": serve_translations,
}
WORKER = "kzoo.export.tensorflow_worker"
SAVED_MODEL_FILE = "saved_model.pb"
# The folder holding the kzoo package, on the worker's PYTHONPATH: it runs this kzoo.
KZOO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def builder_for(model):
    """The builder of `model`'s serving: that of the nearest kzoo class in its
    hierarchy named in `BUILDERS` (so a subclass of a kzoo task is served as
    that task), or a `ValueError` naming the models that export.

    Args:
        model: `keras.Model`. The model to export.

    Returns:
        A builder, `(model, preprocessor, **options) -> kzoo.export.serving.Serving`.

    Example:

    >>> from kzoo import BertBackbone, BertClassifier
    >>> backbone = BertBackbone(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> builder_for(BertClassifier(backbone, num_classes=2)).__name__
    'serve_classes'
    >>> builder_for(backbone)
    Traceback (most recent call last):
    ...
    ValueError: kzoo exports BertClassifier, BertFeatureExtractor, ... as a TensorFlow SavedModel ...
    """
    for cls in type(model).__mro__:
        if cls.__name__ in BUILDERS and cls.__module__.startswith("kzoo."):
            return BUILDERS[cls.__name__]
    raise ValueError(
        f"kzoo exports {', '.join(BUILDERS)} as a TensorFlow SavedModel (strings in, "
        f"predictions out); a {type(model).__name__} has no such export."
    )


def build_serving(model, preprocessor, options):
    """`builder_for(model)(model, preprocessor, **options)`: the `Serving` of
    `model`, its options checked (an unknown one is a `ValueError` listing those it takes).

    Args:
        model: `keras.Model`. A model `BUILDERS` covers.
        preprocessor: `kzoo.models.Preprocessor`. Its preprocessor (a task's
            own, or the Transformer's).
        options: dict. The export's options (e.g. `text_pairs`, `beam_size`).

    Returns:
        A `kzoo.export.serving.Serving`.

    Example:

    >>> from kzoo import BertBackbone, BertClassifier, BertTokenizer
    >>> backbone = BertBackbone(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> model = BertClassifier(backbone, num_classes=2,
    ...                        preprocessor=BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]))
    >>> [spec.name for spec in build_serving(model, model.preprocessor, {"text_pairs": True}).inputs]
    ['text_a', 'text_b']
    >>> build_serving(model, model.preprocessor, {"beam_size": 4})
    Traceback (most recent call last):
    ...
    ValueError: BertClassifier.export takes no option beam_size; its options are ['text_pairs'].
    """
    builder = builder_for(model)
    known = [name for name in inspect.signature(builder).parameters if name not in ("model", "preprocessor")]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(
            f"{type(model).__name__}.export takes no option {', '.join(unknown)}; its options are {known}."
        )
    return builder(model, preprocessor, **options)


def export_saved_model(model, path, preprocessor=None, **options):
    """Writes `model` as a TensorFlow SavedModel that serves strings, its
    tokenizer and packing inside the graph (see the module docstring).

    Args:
        model: `keras.Model`. A `kzoo.BertClassifier`, `BertFeatureExtractor`,
            `BertTokenClassifier`, `BertQuestionAnswerer` or `BertTextEmbedder`
            with a preprocessor, or a `kzoo.Transformer`.
        path: str or os.PathLike. A new or empty directory, or an earlier
            SavedModel (replaced).
        preprocessor: `kzoo.TransformerPreprocessor` or None. The
            Transformer's preprocessor; a task uses its own. Defaults to `None`.
        **options: the model's serving options (`kzoo.export.serving`):
            `text_pairs` (classifier, feature extractor), `max_answer_length`
            and `null_score_threshold` (question answerer), `beam_size`,
            `length_penalty` and `max_length` (Transformer).

    Example (`kzoo.models.Task.export` shows a SavedModel written and served):

    >>> import tempfile
    >>> from kzoo import BertBackbone, BertClassifier
    >>> backbone = BertBackbone(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> export_saved_model(BertClassifier(backbone, num_classes=2), tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    ValueError: This BertClassifier has no preprocessor, and its SavedModel takes strings: attach one ...
    """
    name = type(model).__name__
    path = _checked_path(path, name)
    preprocessor = _preprocessor_of(model, preprocessor, name)
    serving = build_serving(model, preprocessor, options)  # checks the options before any work
    if keras.backend.backend() == "tensorflow":
        _write(serving, path)
    else:
        _write_through_tensorflow(model, preprocessor, path, options)


def _checked_path(path, owner):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{owner}.export: path must be a str or os.PathLike (a directory); got {type(path).__name__}.")
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{owner}.export: {path!r} is a file; the SavedModel is a directory. Choose another path.")
    if os.path.isdir(path) and os.listdir(path) and not os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
        raise ValueError(
            f"{owner}.export: {path!r} holds files that are not a SavedModel; kzoo replaces only an earlier "
            "SavedModel. Choose a new or empty directory."
        )
    return path


def _preprocessor_of(model, preprocessor, owner):
    """The Transformer's `preprocessor` argument, or a task's own preprocessor."""
    if not hasattr(model, "preprocessor"):
        return preprocessor
    if preprocessor is not None:
        raise ValueError(f"{owner}.export takes no preprocessor argument: it exports its own (model.preprocessor).")
    if model.preprocessor is None:
        raise ValueError(
            f"This {owner} has no preprocessor, and its SavedModel takes strings: attach one "
            f"(model.preprocessor = kzoo.{type(model).preprocessor_class.__name__}(tokenizer, sequence_length)), "
            "or load the model from a preset directory that holds a tokenizer."
        )
    return model.preprocessor


def _write(serving, path):
    """Traces `serving` into a SavedModel at `path` (TensorFlow backend), once."""
    # The concrete function itself is the signature: `tf.saved_model.save`
    # given a `tf.function` (as Keras' `ExportArchive.write_out` passes it)
    # traces it again inside its save context, whose variable policy is part
    # of tf.function's cache key; the graph would be built twice.
    traced = tf.function(serving.function, input_signature=serving.inputs, autograph=False).get_concrete_function()
    root = tf.Module()
    root.serving_default = traced
    root.variables_read = list(traced.variables)  # a function's variables must be tracked to be saved
    with atomic.replacing_directory(path) as scratch:
        tf.saved_model.save(root, scratch, signatures={"serving_default": traced})


def _class_path(obj):
    cls = type(obj)
    if cls.__module__ == "__main__":
        raise ValueError(
            f"Exporting from {keras.backend.backend()} re-loads the model under TensorFlow in a new process, "
            f"which imports its class: define {cls.__name__} in a module (not the main script), or export "
            "under KERAS_BACKEND=tensorflow."
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def _plain(value):
    """A NumPy scalar option (e.g. `beam_size=np.int64(4)`) as a Python number, for JSON."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"An export option of type {type(value).__name__} cannot be passed to the TensorFlow process.")


def _write_through_tensorflow(model, preprocessor, path, options):
    """The model (and a preprocessor it does not hold) saved as a preset, then
    exported by `WORKER` in a new process on the TensorFlow backend."""
    extra = preprocessor if preprocessor is not getattr(model, "preprocessor", None) else None
    request = {
        "model": _class_path(model),
        "preprocessor": None if extra is None else _class_path(extra),
        "path": os.path.abspath(path),
        "options": options,
    }
    with tempfile.TemporaryDirectory(prefix="kzoo-export-") as preset:
        model.save_to_preset(preset)
        if extra is not None:
            extra.save_to_preset(preset)
        request["preset"] = preset
        environment = dict(
            os.environ,
            KERAS_BACKEND="tensorflow",
            CUDA_VISIBLE_DEVICES="",  # tracing needs no accelerator, and this process may hold it
            PYTHONPATH=os.pathsep.join(p for p in (KZOO_ROOT, os.environ.get("PYTHONPATH")) if p),
        )
        result = subprocess.run(
            [sys.executable, "-m", WORKER, json.dumps(request, default=_plain)], capture_output=True, text=True,
            env=environment,
        )
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        raise RuntimeError(
            f"Exporting the {type(model).__name__} went through TensorFlow (Keras cannot trace a TensorFlow "
            f"graph from {keras.backend.backend()}): the model was saved to a preset and re-loaded under "
            "KERAS_BACKEND=tensorflow in a new process, which failed:\n" + "\n".join(lines[-15:])
        )
