"""The suite's time budget: every test's CPU seconds, the slowest listed at
the end of each run, and the tests over the budget that are not listed below
with the reason they need the time, in a section of their own. It reports and
never fails the run: CPU seconds depend on the machine (a host 1.9x slower
took 26.7 s for a test of under 8 with AVX-512, 2026-11-30), and speed is a benchmark's to
measure, not a test's to assert.

A test's CPU time is its setup, call and teardown (a module fixture's cost
goes to the first test that asks for it), in this process and in the
processes it started and waited for, all threads together: on a shared
machine that moves far less than wall time. The budget is set for 2 cores
without AVX-512, the slower kind of machine CI gets; a test that needs more
is either worth its time (the reason says why) or is cut to fit.

`--cpu-budget=SECONDS` sets the report's limit; `0` leaves the section out.
"""

import json
import os
import resource
from pathlib import Path

import pytest

BUDGET_CPU_SECONDS = 20.0
SLOWEST_SHOWN = 25
REPORTS = Path(__file__).resolve().parents[1] / ".pytest_cache" / "backend_reports"

# The tests allowed more, by the reason they need it: "file::test" (every parameter) or
# "file::test[parameter]". Listed: every test that took 8 s of CPU or more on some backend on
# 2 cores with AVX-512 (2026-11-28), since a machine without AVX-512 takes up to twice as long.
WHY = {
    "starts fresh Python processes, each importing TensorFlow and a backend (8-15 s of CPU apiece): "
    "a process's start, or several processes working together, is what it tests": [
        "tests/distribution/test_distribution.py::test_jax_two_processes_train_together_through_a_coordinator",
        "tests/distribution/test_distribution.py::test_jax_data_parallel_trains_like_one_device",
        "tests/distribution/test_distribution.py::test_torch_ddp_trains_like_one_device_on_every_rank",
        "tests/distribution/test_distribution.py::test_tensorflow_mirrored_strategy_trains_like_one_device",
        "tests/robustness/test_resume.py::test_fit_killed_at_an_epoch_end_and_resumed_matches_the_uninterrupted_run",
        "tests/cli/test_cli_models.py::test_backend_option_wins_over_the_environment_and_python_m_kzoo_switches",
        "tests/examples/test_serve.py::test_the_serving_half_does_not_import_kzoo",
        "tests/examples/test_serve.py::test_the_server_answers_like_the_keras_model",
        "tests/backend/test_setup.py::test_import_kzoo_changes_no_process_state",
        "tests/models/bert/test_bert_backbone.py::test_weights_and_preset_load_on_another_backend",
        "tests/cli/test_quiet.py::test_import_kzoo_keeps_the_loading_lines_off_stderr_and_passes_others_on",
    ],
    "builds the exports (SavedModel or ONNX; through a TensorFlow process on JAX and torch) and serves "
    "them from one process without kzoo; the other tests read what it built (the SavedModels of "
    "test_embedder_export.py and test_saved_model.py are one session fixture, `saved_models`: the first test "
    "of either file, or of tests/examples/test_serve.py, which serves its classifier, builds them all)": [
        "tests/export/test_saved_model.py::test_writes_a_saved_model_with_assets_and_variables",
        "tests/export/test_embedder_export.py::test_served_embeddings_equal_encode",
        "tests/export/test_onnx.py::test_files_and_config",
        "tests/models/test_lora.py::test_merged_model_and_exports_compute_the_same",
    ],
    "trains a task to a stated accuracy (once per run, under torch; each backend's own training "
    "steps are tested on it by cheaper tests)": [
        "tests/models/bert/test_bert_question_answerer.py::test_from_preset_makes_squad_windows_for_the_backbone",
        "tests/models/bert/test_bert_pretraining_end_to_end.py::test_mlm_loss_falls_and_nsp_generalises_to_held_out_documents",
        "tests/models/transformer/test_transformer_generate.py::test_learns_to_copy_and_reverse_with_greedy_and_beam_search",
        "tests/models/bert/test_bert_token_classifier.py::test_learns_entities_of_held_out_sentences",
        "tests/models/bert/test_bert_pretrainer.py::test_fit_on_tf_data_learns_the_toy_task",
        "tests/models/test_quantization.py::test_int8_keeps_accuracy_and_predictions_and_shrinks_the_weights",
        "tests/cli/test_cli_finetune.py::test_finetune_on_sentence_pairs_from_tsv",
        "tests/cli/test_cli_finetune.py::test_finetune_learns_and_saves_names_and_curves",
    ],
    "runs a guide's or the README's code as a user would, fits and exports included": [
        "tests/test_readme.py::test_readme_python_examples_run",
        "tests/test_docs.py::test_page_python_blocks_run[guides/deploy.md]",
        "tests/test_docs.py::test_page_python_blocks_run[guides/embeddings.md]",
    ],
    "compiles one step per padding length, batch size or model on purpose: that each length "
    "gives the same numbers, or compiles once, is what it checks": [
        "tests/models/test_batching.py::test_classifier_predictions_equal_fixed_padding",
        "tests/models/test_batching.py::test_fit_compiles_at_most_once_per_rung",
        "tests/models/test_batching.py::test_embeddings_equal_fixed_padding",
        "tests/models/bert/test_bert_text_embedder.py::test_raw_text_in_caller_order_whatever_the_batching",
        "tests/models/bert/test_bert_token_classifier.py::test_words_in_every_form_give_the_same_results",
        "tests/models/test_unknown_dimensions.py::test_pretraining_phases_at_two_lengths",
        "tests/models/test_unknown_dimensions.py::test_unknown_batch_and_sequence_dimensions",
        "tests/backend/test_fast_paths.py::test_several_models_predicting_log_no_retracing_warning",
    ],
    "runs the training it compares both ways, each compiled apart (compiled and eager, micro-batches "
    "and the big batch, kzoo's and Keras' optimizer; a list, an array and a dataset, each its own path)": [
        "tests/models/test_same_losses_any_container.py::test_list_array_and_dataset_give_the_same_epoch_losses",
        "tests/backend/test_fast_paths.py::test_default_compiled_training_equals_uncompiled",
        "tests/models/bert/test_gradient_accumulation.py::test_two_micro_batches_of_8_update_as_one_batch_of_16",
        "tests/models/bert/test_gradient_accumulation.py::test_keras_own_adamw_accumulates_as_the_big_batch",
        "tests/models/test_token_loss_accumulation.py::test_micro_batches_of_different_token_counts_update_as_the_big_batch",
    ],
    "fits, saves and reloads tasks (.keras, presets, int8, LoRA) and predicts with each copy: every "
    "new model compiles its own steps (XLA on JAX); the shared task checks of tests/test_case.py": [
        "tests/models/bert/test_bert_classifier.py::test_raw_text_dataset_and_validation_split",
        "tests/models/bert/test_bert_classifier.py::test_task",
        "tests/models/bert/test_bert_classifier.py::test_labels_as_names_train_exactly_as_ids",
        "tests/models/bert/test_bert_classifier.py::test_default_compile_is_the_fine_tuning_recipe",
        "tests/models/bert/test_bert_classifier.py::test_sentence_pairs_are_packed_with_segments",
        "tests/models/bert/test_bert_multiple_choice.py::test_task",
        "tests/models/bert/test_bert_text_embedder.py::test_hard_negatives_and_sample_weights_train",
        "tests/models/test_lora.py::test_int8_backbone_trains_under_lora_and_round_trips",
        "tests/models/test_quantization.py::test_config_keras_file_and_preset_give_the_quantized_model_back",
        "tests/models/test_fit_validation.py::test_validation_split_is_the_last_examples_and_takes_class_names",
        "tests/visualize/test_visualize.py::test_translation_figure_matches_cross_attention",
        "tests/models/bert/test_bert_pretrainer.py::test_keras_save_and_load_with_compiled_optimizer",
        "tests/models/test_fit_validation.py::test_token_classifier_validation_split_takes_tag_names",
    ],
    "builds a reference beside kzoo's model (transformers, sentence-transformers, a NumPy BERT, "
    "KerasHub's Kaggle files) and compares their outputs": [
        "tests/checkpoints/test_sentence_transformers.py::test_released_model_equals_sentence_transformers",
        "tests/checkpoints/test_google.py::test_pretrainer_matches_transformers_with_the_same_arrays",
        "tests/models/bert/test_fill_mask.py::test_fill_mask_matches_transformers",
        "tests/models/bert/test_bert_pretrainer.py::test_pretrainer_logits_and_loss_match_numpy",
    ],
    "traces tf.data pipelines of tokenizing and packing ops in graph mode, or writes a corpus to "
    "TFRecord shards several times (once with two worker processes)": [
        "tests/data/test_corpus_shards.py::test_shards_depend_only_on_the_seed_and_the_file",
        "tests/models/transformer/test_transformer_tokenizer.py::test_graph_mode_in_tf_data",
    ],
}
LISTED = {test: reason for reason, tests in WHY.items() for test in tests}


def _cpu_seconds():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _entries(item):
    """The keys that can list `item`: its test (every parameter) and, when parametrized, itself."""
    test = f"{item.path.relative_to(Path(__file__).resolve().parents[1]).as_posix()}::{item.originalname}"
    return (test, f"{test}[{item.callspec.id}]") if hasattr(item, "callspec") else (test,)


def pytest_addoption(parser):
    parser.addoption("--cpu-budget", type=float, default=BUDGET_CPU_SECONDS,
                     help=f"CPU seconds over which a test not listed in tests/time_budget.py is reported "
                          f"(default {BUDGET_CPU_SECONDS:g}; 0: no report)")


_spent = {}
_log = []  # the open report, one line per test as it ends: a run stopped part way still says where time went


def pytest_sessionstart(session):
    REPORTS.mkdir(parents=True, exist_ok=True)
    _log.append(open(REPORTS / f"{os.environ.get('KERAS_BACKEND', 'tensorflow')}.cpu.jsonl", "w"))  # noqa: SIM115


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = _cpu_seconds()
    yield
    _spent[item.nodeid] = (_entries(item), _cpu_seconds() - start)
    _log[0].write(json.dumps([item.nodeid, round(_spent[item.nodeid][1], 2)]) + "\n")
    _log[0].flush()


def over_budget(spent, budget):
    """The tests of `spent` ({nodeid: (keys, seconds)}) over `budget` that no key lists."""
    return {node: seconds for node, (keys, seconds) in spent.items()
            if seconds > budget and not any(key in LISTED for key in keys)}


def pytest_sessionfinish(session, exitstatus):
    _log.pop().close()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _spent:
        return
    total = sum(seconds for _, seconds in _spent.values())
    slowest = sorted(_spent.items(), key=lambda kv: -kv[1][1])[:SLOWEST_SHOWN]
    terminalreporter.section(f"{len(slowest)} slowest tests by CPU seconds ({total:.0f} s CPU in all)")
    for node, (keys, seconds) in slowest:
        listed = any(key in LISTED for key in keys)
        terminalreporter.write_line(f"{seconds:7.1f} s  {node}{'  (listed)' if listed else ''}")
    budget = config.getoption("--cpu-budget")
    over = over_budget(_spent, budget) if budget else {}
    if over:
        terminalreporter.section("over the time budget (reported; the run's result is the tests')", red=True)
        for node, seconds in sorted(over.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{seconds:7.1f} s CPU  {node}", red=True)
        terminalreporter.write_line(
            f"Each test above took more than {budget:g} s of CPU. Make it cheaper (a tiny configuration, a "
            f"fixture shared by the file, one shape per test), or list it in tests/time_budget.py with the "
            f"reason it needs the time.", red=True)
