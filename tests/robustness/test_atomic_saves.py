"""Saves are atomic: presets, `.keras` and weights files,
Hugging Face exports and conversions are written beside their destination
and renamed into place. Each save is failed at its 1st, 2nd, ... nth write
(a file opened for writing, an HDF5 or safetensors file created, a variable
written into an HDF5 file, a folder made, a rename): the previous save must be byte for byte as it was, load
with the same weights, and no scratch file may be left beside it."""

import builtins
import errno
import io
import os
import shutil
import subprocess
import sys
import textwrap

import h5py
import keras
import numpy as np
import pytest
import safetensors.numpy

import kzoo
from kzoo.presets import convert

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "good", "bad", "film"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The failed writes are kzoo's and h5py's / safetensors' on NumPy arrays, the same on every backend;
# saving and loading on each backend is tested elsewhere. One backend per test when the runs are divided.
pytestmark = pytest.mark.once


def _backbone(seed, vocabulary_size=len(VOCABULARY)):
    keras.utils.set_random_seed(seed)
    return kzoo.BertBackbone(vocabulary_size=vocabulary_size, num_layers=1, num_heads=2, hidden_dim=8,
                             intermediate_dim=16, max_sequence_length=16)


def _classifier(seed, vocabulary=VOCABULARY):
    return kzoo.BertClassifier(_backbone(seed, len(vocabulary)), num_classes=2, preprocessor=kzoo.BertTokenizer(vocabulary))


class WriteFailures:
    """Counts the writes of a save, or fails its `fail_at`-th with ENOSPC (a
    full disk) after the write has begun: a file created (empty, or a
    safetensors file cut short) and left behind, a rename or folder not made."""

    def __init__(self, monkeypatch, fail_at=None):
        self.count, self.fail_at, self.kinds = 0, fail_at, []
        real_open, real_h5, real_safetensors = builtins.open, h5py.File, safetensors.numpy.save_file
        real_rename, real_replace, real_mkdir = os.rename, os.replace, os.mkdir
        real_dataset = h5py.Group.create_dataset

        def opened(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            if isinstance(mode, str) and set(mode) & set("wax+"):
                self._step("open", handle.close)
            return handle

        def h5_file(name, mode="r", *args, **kwargs):
            handle = real_h5(name, mode, *args, **kwargs)
            if mode in ("w", "w-", "x", "a", "r+"):
                self._step("h5py", handle.close)
            return handle

        def save_file(tensors, filename, *args, **kwargs):
            self._step("safetensors", lambda: real_open(filename, "wb").write(b"\0" * 8))
            return real_safetensors(tensors, filename, *args, **kwargs)

        def dataset(group, *args, **kwargs):  # each variable written into an HDF5 file
            self._step("h5 dataset")
            return real_dataset(group, *args, **kwargs)

        def renamed(real, kind):
            def call(source, destination, *args, **kwargs):
                self._step(kind)
                return real(source, destination, *args, **kwargs)
            return call

        def made(path, *args, **kwargs):
            if not os.path.isdir(path):  # `os.makedirs(..., exist_ok=True)` tries existing ones too
                self._step("mkdir")
            return real_mkdir(path, *args, **kwargs)

        for target, name, value in [
            (builtins, "open", opened), (io, "open", opened), (h5py, "File", h5_file),
            (safetensors.numpy, "save_file", save_file), (os, "rename", renamed(real_rename, "rename")),
            (os, "replace", renamed(real_replace, "replace")), (os, "mkdir", made),
            (h5py.Group, "create_dataset", dataset),
        ]:
            monkeypatch.setattr(target, name, value)

    def _step(self, kind, begin_failing=None):
        self.count += 1
        self.kinds.append(kind)
        if self.count == self.fail_at:
            if begin_failing is not None:
                begin_failing()
            raise OSError(errno.ENOSPC, f"No space left on device (injected at write {self.count}, {kind})")


def _snapshot(folder):
    """Every file under `folder`: {relative path: bytes}."""
    return {
        os.path.relpath(os.path.join(root, name), folder): open(os.path.join(root, name), "rb").read()
        for root, _, names in os.walk(folder) for name in names
    }


def _count_writes(monkeypatch, save):
    with monkeypatch.context() as patch:
        counter = WriteFailures(patch)
        save()
    return counter


def _read(path):
    return _snapshot(path) if os.path.isdir(path) else open(path, "rb").read()


def _assert_every_failure_leaves_the_previous_save(monkeypatch, path, write_previous, save, check_previous, check_new):
    """Writes the previous save, then fails `save` over it at each of its
    writes. A failure the save survives (Keras writing a `.keras` file's
    weights in memory when it cannot create its temporary file; removing the
    previous save once the new one is in place) must leave the new save
    complete; the others must leave the previous one byte for byte."""
    write_previous()
    before = _read(path)
    name = os.path.basename(path)
    counted = os.path.join(os.path.dirname(path), "counted" + (name[name.find("."):] if "." in name else ""))
    (shutil.copytree if os.path.isdir(path) else shutil.copy2)(path, counted)  # counted over a copy
    writes = _count_writes(monkeypatch, lambda: save(counted))
    assert writes.count >= 4, writes.kinds
    survived = []
    for fail_at in range(1, writes.count + 1):
        with monkeypatch.context() as patch:
            WriteFailures(patch, fail_at)
            try:
                save(path)
            except OSError as error:
                assert f"injected at write {fail_at}," in str(error)
                assert _read(path) == before, f"changed by a save failed at write {fail_at} ({writes.kinds[fail_at - 1]})"
            else:  # saved: the new one complete, then the previous one written again
                survived.append(writes.kinds[fail_at - 1])
                check_new()
                write_previous()
                before = _read(path)
        assert sorted(os.listdir(os.path.dirname(path))) == sorted({os.path.basename(counted), name}), fail_at
    assert len(survived) <= 2, survived
    check_previous()
    save(path)  # and a save that does not fail replaces it
    check_new()
    return writes.kinds


def _same_weights(model, loaded):
    assert [v.path for v in model.weights] == [v.path for v in loaded.weights]
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))


def test_backbone_preset(tmp_path, monkeypatch):
    previous, new, path = _backbone(1), _backbone(2), str(tmp_path / "preset")
    kinds = _assert_every_failure_leaves_the_previous_save(
        monkeypatch, path, lambda: previous.save_to_preset(path), new.save_to_preset,
        lambda: _same_weights(previous, kzoo.BertBackbone.from_preset(path)),
        lambda: _same_weights(new, kzoo.BertBackbone.from_preset(path)),
    )
    variables = len(new.weights) + sum(v.path.endswith("seed_generator_state") for v in new.variables)  # Dropout's
    assert kinds.count("h5 dataset") == variables == 27 and kinds.count("rename") == 3, kinds


def test_task_preset_keeps_task_and_backbone_weights_from_the_same_model(tmp_path, monkeypatch):
    previous, new, path = _classifier(1), _classifier(2, VOCABULARY + ["great"]), str(tmp_path / "preset")

    def check_previous():
        _same_weights(previous, kzoo.BertClassifier.from_preset(path))
        _same_weights(previous.backbone, kzoo.BertBackbone.from_preset(path))
        assert kzoo.BertTokenizer.from_preset(path).get_vocabulary() == VOCABULARY

    _assert_every_failure_leaves_the_previous_save(
        monkeypatch, path, lambda: previous.save_to_preset(path), new.save_to_preset, check_previous,
        lambda: _same_weights(new, kzoo.BertClassifier.from_preset(path)),
    )


def test_tokenizer_added_to_a_backbone_preset(tmp_path, monkeypatch):
    backbone, path = _backbone(1), str(tmp_path / "preset")

    def write_previous():
        backbone.save_to_preset(path)
        kzoo.BertTokenizer(VOCABULARY).save_to_preset(path)

    def check_previous():
        _same_weights(backbone, kzoo.BertBackbone.from_preset(path))
        assert kzoo.BertTokenizer.from_preset(path).get_vocabulary() == VOCABULARY

    def check_new():
        _same_weights(backbone, kzoo.BertBackbone.from_preset(path))  # kept beside the new tokenizer
        assert kzoo.BertTokenizer.from_preset(path).get_vocabulary()[-1] == "great"

    new = kzoo.BertTokenizer(VOCABULARY + ["great"])
    _assert_every_failure_leaves_the_previous_save(
        monkeypatch, path, write_previous, new.save_to_preset, check_previous, check_new
    )


def test_preprocessor_into_a_new_directory_leaves_nothing(tmp_path, monkeypatch):
    preprocessor, path = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=8), str(tmp_path / "new")
    writes = _count_writes(monkeypatch, lambda: preprocessor.save_to_preset(str(tmp_path / "counted")))
    for fail_at in range(1, writes.count + 1):
        with monkeypatch.context() as patch:
            WriteFailures(patch, fail_at)
            with pytest.raises(OSError, match="injected"):
                preprocessor.save_to_preset(path)
        assert sorted(os.listdir(tmp_path)) == ["counted"], fail_at


def test_keras_file_and_weights_file(tmp_path, monkeypatch):
    previous, new = _classifier(1), _classifier(2)
    path = str(tmp_path / "model.keras")
    _assert_every_failure_leaves_the_previous_save(
        monkeypatch, path, lambda: previous.save(path), new.save,
        lambda: _same_weights(previous, keras.saving.load_model(path)),
        lambda: _same_weights(new, keras.saving.load_model(path)),
    )
    weights, model = str(tmp_path / "weights" / "model.weights.h5"), _classifier(3)
    _assert_every_failure_leaves_the_previous_save(
        monkeypatch, weights, lambda: previous.save_weights(weights), new.save_weights,
        lambda: (model.load_weights(weights), _same_weights(previous, model)),
        lambda: (model.load_weights(weights), _same_weights(new, model)),
    )


def test_huggingface_export_and_conversion(tmp_path, monkeypatch):
    previous, new, path = _classifier(1), _classifier(2), str(tmp_path / "hf")
    _assert_every_failure_leaves_the_previous_save(
        monkeypatch, path, lambda: previous.save_to_preset(path, format="huggingface"),
        lambda p: new.save_to_preset(p, format="huggingface"),
        lambda: _same_weights(previous, kzoo.BertClassifier.from_preset(path, num_classes=2)),
        lambda: _same_weights(new, kzoo.BertClassifier.from_preset(path, num_classes=2)),
    )
    source, converted = str(tmp_path / "source" / "kzoo"), str(tmp_path / "converted")
    _backbone(3).save_to_preset(source)
    kzoo.BertTokenizer(VOCABULARY).save_to_preset(source)
    writes = _count_writes(monkeypatch, lambda: convert(source, str(tmp_path / "source" / "counted"), progress=False))
    for fail_at in range(1, writes.count + 1):
        with monkeypatch.context() as patch:
            WriteFailures(patch, fail_at)
            with pytest.raises(OSError, match="injected"):
                convert(source, converted, progress=False)
        assert sorted(os.listdir(tmp_path)) == ["counted", "hf", "source"], fail_at
    convert(source, converted, progress=False)
    assert sorted(os.listdir(converted)) == ["assets", "config.json", "metadata.json", "model.weights.h5", "tokenizer.json"]


def test_a_save_killed_between_its_two_renames_is_recovered(tmp_path):
    """The process dies (os._exit) after moving the previous preset aside and
    before renaming the new one in: loading puts the previous one back."""
    previous, path = _backbone(1), str(tmp_path / "preset")
    previous.save_to_preset(path)
    before = _snapshot(path)
    script = textwrap.dedent(f"""
        import os, keras, kzoo
        real_rename = os.rename
        def rename(source, destination):
            real_rename(source, destination)
            if destination.endswith(".old"):
                os._exit(9)
        os.rename = rename
        keras.utils.set_random_seed(2)
        kzoo.BertBackbone(vocabulary_size={len(VOCABULARY)}, num_layers=1, num_heads=2, hidden_dim=8,
                          intermediate_dim=16, max_sequence_length=16).save_to_preset({path!r})
    """)
    # On TensorFlow, which kzoo imports anyway (the save's files are the same on every backend; a
    # torch process would import torch too, 2-3 s of CPU more).
    finished = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                              env=dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2"))
    assert finished.returncode == 9, finished.stderr[-2000:]
    left = sorted(os.listdir(tmp_path))
    assert "preset" not in left and len(left) == 2, left  # the previous save aside, the new one in scratch
    _same_weights(previous, kzoo.BertBackbone.from_preset(path))
    assert _snapshot(path) == before
    _backbone(2).save_to_preset(path)  # the next save removes the killed one's scratch copy
    assert os.listdir(tmp_path) == ["preset"]
