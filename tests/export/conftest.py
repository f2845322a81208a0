"""The SavedModels of tests/export, exported once per run and served by one process.

test_saved_model.py and test_embedder_export.py each list the models they
export (`models_to_export()`); `saved_models` exports them all and serves
every one from a single fresh process without kzoo (`serve_without_kzoo`,
mode "ops"): a new interpreter costs 4-5 s of CPU (TensorFlow's import)
before it loads a model, so the two files share one. Each file's `exported`
fixture picks out its own models.
"""

import os
import time

import keras
import pytest

from tests.export.serving_fixtures import serve_without_kzoo


@pytest.fixture(scope="session")
def saved_models(tmp_path_factory):
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
        start = time.time()
        model.export(paths[name], **options)
        print(f"export {name}: {time.time() - start:.1f} s")
    requests = [{"path": paths[name], "inputs": inputs} for name, (_, _, inputs) in models.items()]
    start = time.time()
    served = dict(zip(models, serve_without_kzoo(requests, mode="ops")))
    print(f"served in {time.time() - start:.1f} s")
    return {name: (model, paths[name], inputs) for name, (model, _, inputs) in models.items()}, served

