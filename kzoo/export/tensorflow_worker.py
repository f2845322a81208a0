"""Exports a model saved in a preset directory as a SavedModel, on the
TensorFlow backend: the process `kzoo.export.saved_model` starts to export
a model that lives on JAX or PyTorch (`python -m kzoo.export.tensorflow_worker
REQUEST`, REQUEST a JSON object with `model`, `preprocessor` (classes as
"module:name"), `preset`, `path` and `options`)."""

import importlib
import json
import sys


def class_from_path(path):
    """The class named by `path`, "module:qualified.name".

    Args:
        path: str. As `kzoo.export.saved_model` writes it.

    Example:

    >>> class_from_path("kzoo.models.bert.bert_classifier:BertClassifier").__name__
    'BertClassifier'
    >>> class_from_path("kzoo:NoSuchModel")
    Traceback (most recent call last):
    ...
    ValueError: kzoo.export.tensorflow_worker: no class NoSuchModel in kzoo.
    """
    module, _, name = path.partition(":")
    target = importlib.import_module(module)
    for part in name.split("."):
        if not hasattr(target, part):
            raise ValueError(f"kzoo.export.tensorflow_worker: no class {name} in {module}.")
        target = getattr(target, part)
    return target


def main(request):
    """Loads the request's model (and preprocessor) from its preset and
    exports it with `kzoo.export.saved_model.export_saved_model`.

    Args:
        request: dict. As in the module docstring.

    Example:

    >>> main({"model": "kzoo:NoSuchModel", "preset": "", "path": "", "options": {}})
    Traceback (most recent call last):
    ...
    ValueError: kzoo.export.tensorflow_worker: no class NoSuchModel in kzoo.
    """
    import keras  # noqa: PLC0415 (after `import kzoo` below in a real run: kzoo sets up the process)

    model_class = class_from_path(request["model"])
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "kzoo.export.tensorflow_worker runs on the TensorFlow backend only; kzoo starts it with "
            "KERAS_BACKEND=tensorflow."
        )
    from kzoo.export.saved_model import export_saved_model  # noqa: PLC0415

    model = model_class.from_preset(request["preset"])
    preprocessor = request.get("preprocessor")
    preprocessor = None if preprocessor is None else class_from_path(preprocessor).from_preset(request["preset"])
    export_saved_model(model, request["path"], preprocessor=preprocessor, **request["options"])


if __name__ == "__main__":
    import kzoo  # noqa: F401 (first: sets up the process and registers the preset formats)

    main(json.loads(sys.argv[1]))
