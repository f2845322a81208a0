"""Every private Keras / TensorFlow / torch API that kzoo.backend uses is still
there (listed in kzoo/backend/__init__.py's docstring, with the versions they
were checked on). Were one to disappear, kzoo would be silently slower (an
override nobody calls) or broken at a distance: this test fails loudly instead.
It only imports and inspects: each backend's checks run in that backend's
process of tests/run_all_backends.py (importing JAX into another costs a minute
of a loaded machine), TensorFlow's and Keras' own everywhere."""

import importlib
import inspect

import keras
import pytest


def test_keras_trainer_still_resolves_auto_jit_compile_through_the_overridden_method():
    assert callable(getattr(keras.Model, "_resolve_auto_jit_compile", None))
    assert callable(getattr(keras.layers.Layer, "_flatten_layers", None))
    trainer = importlib.import_module("keras.src.backend.tensorflow.trainer").TensorFlowTrainer
    assert "_distribute_strategy" in inspect.getsource(trainer.__init__)


def test_keras_steps_compute_the_loss_through_the_overridden_method():
    # kzoo's BaseModel._compute_loss takes gradient accumulation's loss
    # normalisers out of the sample weights (kzoo.models.accumulation).
    assert callable(getattr(keras.Model, "_compute_loss", None))
    for backend in ("tensorflow", "jax", "torch"):
        source = inspect.getsource(importlib.import_module(f"keras.src.backend.{backend}.trainer"))
        assert "self._compute_loss(" in source or "self.stateless_compute_loss(" in source, backend
    assert "self._compute_loss(" in inspect.getsource(keras.Model.stateless_compute_loss)


def on(backend):
    return pytest.mark.skipif(keras.backend.backend() != backend, reason=f"checked in the {backend} process")


@on("torch")
@pytest.mark.parametrize("module, name", [("torch_adam", "Adam"), ("torch_adamw", "AdamW")])
def test_keras_torch_multi_tensor_adam(module, name):
    cls = getattr(importlib.import_module(f"keras.src.backend.torch.optimizers.{module}"), name)
    assert callable(getattr(cls, "_parallel_update_step", None))
    assert callable(getattr(cls, "_get_variable_index", None))


@pytest.mark.parametrize("amsgrad", [False, True])
def test_keras_adam_slots(amsgrad):
    """`adam_base`'s step reads Keras Adam's per-variable slots by index."""
    optimizer = keras.optimizers.AdamW(amsgrad=amsgrad)
    variable = keras.Variable([1.0, 2.0])
    optimizer.build([variable])
    index = optimizer._get_variable_index(variable)
    slots = [optimizer._momentums, optimizer._velocities] + ([optimizer._velocity_hats] if amsgrad else [])
    assert all(tuple(slot[index].shape) == (2,) for slot in slots)
    # Overridden by `adam_base`'s step, which evaluates the schedule once a step.
    assert callable(getattr(optimizer, "_get_current_learning_rate", None))


@on("torch")
def test_torch_fused_adam_kernel():
    import torch

    assert callable(getattr(torch, "_fused_adam_", None))


@on("jax")
def test_keras_jax_trainer_state():
    trainer = importlib.import_module("keras.src.backend.jax.trainer").JAXTrainer
    assert callable(getattr(trainer, "jax_state_sync", None))
    assert list(inspect.signature(trainer.predict_step).parameters) == ["self", "state", "data"]
    variable = importlib.import_module("keras.src.backend.jax.core").Variable
    assert "_value" in variable.__init__.__code__.co_names or hasattr(variable, "_value")


@on("jax")
def test_xla_cpu_still_takes_the_option_that_leaves_out_its_ynnpack_fusions():
    # Without it kzoo's searches and predict steps compile as before, 1.3x slower on a CPU.
    from kzoo.backend import jax  # noqa: PLC0415

    assert jax.inference_compiler_options() == {"xla_cpu_experimental_ynn_fusion_type": ""}


def test_tensorflow_xla_context_query():
    import tensorflow as tf

    from kzoo.backend.tensorflow import in_xla_compilation

    control_flow_util = importlib.import_module("tensorflow.python.ops.control_flow_util")
    assert callable(getattr(control_flow_util, "GraphOrParentsInXlaContext", None))
    assert not in_xla_compilation() and not bool(tf.function(in_xla_compilation)())
    assert bool(tf.function(in_xla_compilation, jit_compile=True)())


def test_the_optimizer_state_names_the_fused_step_reads():
    optimizer = keras.optimizers.AdamW()
    optimizer.build([keras.Variable([1.0])])
    assert len(optimizer._momentums) == len(optimizer._velocities) == 1


def test_fits_validation_pass_reads_the_cached_iterator():
    # kzoo's BaseModel.evaluate passes fit's validation call through unprepared.
    for backend in ("tensorflow", "jax", "torch"):
        trainer = importlib.import_module(f"keras.src.backend.{backend}.trainer")
        source = inspect.getsource(trainer)
        assert "_use_cached_eval_dataset=True" in source, backend
        assert "epoch_iterator = self._eval_epoch_iterator" in source, backend


def test_an_optimizer_keeps_its_schedule_and_drops_the_constant_rate_for_one():
    # kzoo.models.Task gives its default optimizer the run's schedule at `fit`.
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    assert keras.optimizers.SGD(learning_rate=schedule)._learning_rate is schedule
    optimizer = keras.optimizers.SGD()
    optimizer.learning_rate = schedule
    optimizer.build([keras.Variable([1.0])])
    assert optimizer._learning_rate is schedule and len(optimizer.variables) == 1  # iterations only


def test_backup_and_restore_metadata_file(tmp_path):
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    assert backup._training_metadata_path == str(tmp_path / "backup" / "training_metadata.json")
    assert '"epoch": self._current_epoch' in inspect.getsource(type(backup)._save_model)


def test_keras_layers_collect_garbage_per_dropped_variable():
    """kzoo.models.quantization holds back the `gc.collect()` that Keras runs
    for each variable a layer drops (int8 quantization)."""
    assert "gc.collect()" in inspect.getsource(keras.layers.Layer.__delattr__)


def test_tensorflow_functions_can_omit_the_retracing_warning():
    import tensorflow as tf
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    assert tf.function(lambda: 0)._omit_frequent_tracing_warning is False
    assert "self._omit_frequent_tracing_warning" in inspect.getsource(polymorphic_function.Function.__call__)


def test_tensorflow_optimizers_keep_their_strategy():
    # kzoo.BertAdamW sums the replicas' gradients before clipping only under more than one replica.
    if keras.backend.backend() != "tensorflow":
        pytest.skip("TensorFlow's optimizers only")
    assert keras.optimizers.AdamW()._distribution_strategy.num_replicas_in_sync == 1


@on("torch")
def test_torch_jit_trace():
    # Deprecated in torch 2.13; kzoo.backend.torch.small_batch_traces predicts eagerly without it.
    import torch

    assert callable(getattr(getattr(torch, "jit", None), "trace", None))


@on("torch")
def test_torch_jit_trace_keeps_a_tensor_slice_bound_and_in_place_writes():
    # The Transformer's decoder-step traces read the cache up to a step's index
    # (`x[:, :n]`, n a tensor) and write the step in place (kzoo.backend.torch).
    import warnings

    import torch

    def step(cache, update, index):
        cache.index_copy_(1, index.reshape(1), update)
        return cache[:, : index + 1].sum(1)

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(step, (torch.zeros(1, 4), torch.ones(1, 1), torch.tensor(0)), check_trace=False)
    cache = torch.zeros(1, 4)
    sums = [float(traced(cache, torch.full((1, 1), i + 1.0), torch.tensor(i))) for i in range(4)]
    assert sums == [1.0, 3.0, 6.0, 10.0]
