"""The SavedModels of tests/export, exported once per run and served by one process.

test_saved_model.py and test_embedder_export.py each list the models they
export (`models_to_export()`); `export_and_serve`, the session fixture
`saved_models` of tests/conftest.py, exports them all and serves
every one from a single fresh process without kzoo (`serve_without_kzoo`):
a new interpreter costs 4-5 s of CPU (TensorFlow's import)
before it loads a model, so the two files share one. Each file's `exported`
fixture picks out its own models; tests/examples/test_serve.py serves the
classifier over HTTP, in TensorFlow's run (one export fewer).
"""

import os

import keras

from tests.export.serving_fixtures import serve_without_kzoo


def export_and_serve(tmp_path_factory):
    """({name: (model, path, inputs)}, {name: served outputs}) for every model of both files."""
    from tests.export import test_embedder_export, test_saved_model  # noqa: PLC0415 (their lists of models)

    root = tmp_path_factory.mktemp("saved_models")
    models = {}
    for module in (test_saved_model, test_embedder_export):
        keras.utils.set_random_seed(0)  # each file's models as it alone would build them
        listed = module.models_to_export()
        assert not set(listed) & set(models), sorted(set(listed) & set(models))
        models.update(listed)
    paths = {}
    for name, (model, options, _) in models.items():
        paths[name] = os.path.join(root, name)
        model.export(paths[name], **options)
    requests = [{"path": paths[name], "inputs": inputs} for name, (_, _, inputs) in models.items()]
    served = dict(zip(models, serve_without_kzoo(requests)))
    return {name: (model, paths[name], inputs) for name, (model, _, inputs) in models.items()}, served

