"""`kzoo finetune` then `kzoo predict`, through the command's entry point
(in this process: `cli_fixtures.run_here`), on the default backend (TensorFlow): the classifier learns a separable task, its preset
keeps the class names and training curves, and the command's probabilities
equal the Python API's on the saved model. The command's code is the same on
every backend and the library under it is tested on each; test_cli_models.py
runs the command under torch, and `python -m kzoo` switching from TensorFlow to torch."""

import csv
import io
import json

import keras
import numpy as np
import pytest

import kzoo
from tests.cli.cli_fixtures import (
    NEGATIVE,
    POSITIVE,
    labelled_rows,
    run_here,
    save_classifier_preset,
    softmax,
    write_csv,
    write_jsonl,
)

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the command runs on the default backend here")


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    """A tiny preset fine-tuned by the command on good/bad film sentences (CSV), validated on JSON lines."""
    root = tmp_path_factory.mktemp("finetune")
    save_classifier_preset(root / "start")
    write_csv(root / "train.csv", labelled_rows(4))
    write_jsonl(root / "valid.jsonl", [{"text": t, "label": label} for t, label in labelled_rows(1)])
    result = run_here("finetune", root / "start", "--train", root / "train.csv", "--validation", root / "valid.jsonl",
                 "--output", root / "model", "--epochs", "6", "--batch-size", "8", "--learning-rate", "1e-2",
                 "--sequence-length", "8")
    assert result.returncode == 0, result.stderr[-4000:]
    return root, result


def test_finetune_learns_and_saves_names_and_curves(finetuned):
    root, result = finetuned
    accuracy = float(result.stdout.split("validation accuracy ")[1].split()[0])
    assert accuracy >= 0.9, result.stdout  # "good" vs "bad": separable; the majority class is 0.5
    assert "(majority class: 0.500)" in result.stdout
    model = kzoo.BertClassifier.from_preset(root / "model")
    assert model.class_names == ["negative", "positive"]  # sorted training labels
    assert model.preprocessor.sequence_length == 8
    picture = (root / "model" / "training_curves.png").read_bytes()
    assert picture.startswith(b"\x89PNG") and len(picture) > 10_000
    metadata = json.loads((root / "model" / "metadata.json").read_text())
    assert metadata["backend"] == keras.backend.backend()  # the command ran on the test run's backend


def test_predict_csv_matches_the_python_api(finetuned):
    root, _ = finetuned
    texts = POSITIVE[:2] + NEGATIVE[:2]
    write_csv(root / "new.csv", [(t, str(i)) for i, t in enumerate(texts)], header=("review", "id"))
    result = run_here("predict", root / "model", "--input", root / "new.csv", "--text-column", "review")
    assert result.returncode == 0, result.stderr[-4000:]
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0]) == ["review", "id", "predicted_label", "probability", "probability_negative",
                             "probability_positive"]
    assert [row["review"] for row in rows] == texts and [row["id"] for row in rows] == ["0", "1", "2", "3"]
    expected = softmax(np.asarray(kzoo.BertClassifier.from_preset(root / "model").predict(texts, verbose=0)))
    found = np.array([[float(row["probability_negative"]), float(row["probability_positive"])] for row in rows])
    np.testing.assert_allclose(found, expected, atol=2e-6)  # printed with 6 decimals
    assert [row["predicted_label"] for row in rows] == ["positive", "positive", "negative", "negative"]
    assert "predicting:" in result.stderr or result.stderr == ""  # progress goes to stderr, never into the table


def test_predict_reads_standard_input_and_writes_json_lines(finetuned, tmp_path):
    root, _ = finetuned
    result = run_here("predict", root / "model", "--output", tmp_path / "out.jsonl", stdin="good film\nbad plot\n")
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(row["text"], row["predicted_label"]) for row in rows] == [("good film", "positive"),
                                                                       ("bad plot", "negative")]
    for row in rows:
        assert abs(sum(row["probabilities"].values()) - 1) < 1e-5
        assert row["probability"] == max(row["probabilities"].values())


def test_finetune_on_sentence_pairs_from_tsv(tmp_path):
    save_classifier_preset(tmp_path / "start")
    pairs = [("a good film", "good plot", "same"), ("a bad film", "bad plot", "same"),
             ("a good film", "bad plot", "different"), ("a bad film", "good plot", "different")] * 4
    write_csv(tmp_path / "pairs.tsv", pairs, header=("premise", "hypothesis", "label"), delimiter="\t")
    result = run_here("finetune", tmp_path / "start", "--train", tmp_path / "pairs.tsv", "--text-column", "premise",
                 "--text-column", "hypothesis", "--output", tmp_path / "model", "--epochs", "1",
                 "--batch-size", "8", "--sequence-length", "12")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "16 examples, 2 classes (different, same)" in result.stdout
    result = run_here("predict", tmp_path / "model", "--input", tmp_path / "pairs.tsv", "--text-column", "premise",
                 "--text-column", "hypothesis", "--output-format", "jsonl")
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    model = kzoo.BertClassifier.from_preset(tmp_path / "model")
    expected = softmax(np.asarray(model.predict(([p[0] for p in pairs], [p[1] for p in pairs]), verbose=0)))
    found = np.array([[row["probabilities"]["different"], row["probabilities"]["same"]] for row in rows])
    np.testing.assert_allclose(found, expected, atol=2e-6)


def test_validation_split_early_stopping_and_accumulation(tmp_path):
    """The held-out rows (the last quarter) have the opposite labels, so the
    validation loss worsens as the model learns: the command keeps an early
    epoch, and the saved preset is that epoch's model."""
    save_classifier_preset(tmp_path / "start")
    flip = {"positive": "negative", "negative": "positive"}
    rows = labelled_rows(3) + [(text, flip[label]) for text, label in labelled_rows(1)]
    write_csv(tmp_path / "train.csv", rows)
    result = run_here("finetune", tmp_path / "start", "--train", tmp_path / "train.csv", "--output", tmp_path / "model",
                      "--validation-split", "0.25", "--early-stopping", "1", "--accumulate", "2", "--epochs", "4",
                      "--batch-size", "8", "--learning-rate", "1e-2", "--sequence-length", "8")
    assert result.returncode == 0, result.stderr[-4000:]
    # 30 training rows: 4 batches of 8 an epoch, an optimizer step every 2 of them.
    assert "on 30 examples, 2 classes (negative, positive), 8 steps of 2 x 8 examples" in result.stdout
    kept = result.stdout.split("kept epoch ")[1]
    epoch, epochs = int(kept.split()[0]), int(kept.split()[2])
    assert epoch < epochs, result.stdout
    loss = float(kept.split("validation loss ")[1].split(",")[0])
    held = rows[30:]
    model = kzoo.BertClassifier.from_preset(tmp_path / "model")
    results = model.evaluate([t for t, _ in held], [label for _, label in held], return_dict=True, verbose=0)
    assert abs(results["loss"] - loss) < 1e-4


def test_lora_rank_trains_adapters_and_the_preset_records_them(tmp_path):
    save_classifier_preset(tmp_path / "start")
    write_csv(tmp_path / "train.csv", labelled_rows(2))
    result = run_here("finetune", tmp_path / "start", "--train", tmp_path / "train.csv", "--output", tmp_path / "model",
                      "--lora-rank", "2", "--epochs", "1", "--batch-size", "8", "--sequence-length", "8")
    assert result.returncode == 0, result.stderr[-4000:]
    model = kzoo.BertClassifier.from_preset(tmp_path / "model")
    trained = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    assert f"LoRA rank 2 ({trained:,} of {model.count_params():,} parameters train)" in result.stdout
    assert model.backbone.get_config()["lora"]["rank"] == 2
