"""Bad files, columns and arguments: exit status 2 and one line in kzoo's words
that says what was wrong and what to do, before any model is loaded or trained
(the output directory is left as it was)."""

import os

import pytest

from tests.cli.cli_fixtures import expect_error, labelled_rows, run, write_csv, write_jsonl

pytestmark = pytest.mark.backend_independent  # refused before kzoo or a backend loads (tests/conftest.py)


@pytest.fixture
def files(tmp_path):
    write_csv(tmp_path / "train.csv", labelled_rows(1))
    write_csv(tmp_path / "one_class.csv", [("good film", "positive"), ("bad film", "positive")])
    write_csv(tmp_path / "empty_label.csv", [("good film", "positive"), ("bad film", "")])
    write_csv(tmp_path / "other.csv", [("good film", "neutral")])
    (tmp_path / "ragged.csv").write_text("text,label\ngood film,positive,extra\n")
    (tmp_path / "header_only.csv").write_text("text,label\n")
    (tmp_path / "blank.csv").write_text("")
    (tmp_path / "train.xlsx").write_text("not a table")
    (tmp_path / "latin1.csv").write_bytes("text,label\ncaf\xe9,positive\n".encode("latin-1"))
    write_jsonl(tmp_path / "numbers.jsonl", [{"text": "good film", "label": "positive"}, {"text": 5, "label": "x"}])
    (tmp_path / "broken.jsonl").write_text('{"text": "good film", "label": "positive"}\n{"text": "bad\n')
    write_jsonl(tmp_path / "list.jsonl", [["good film", "positive"]])
    (tmp_path / "texts.txt").write_text("good film\n")
    (tmp_path / "occupied").mkdir()
    (tmp_path / "occupied" / "notes.txt").write_text("mine")
    return tmp_path


CASES = {
    "missing file": (["finetune", "p", "--train", "nothing.csv", "--output", "out"], ["No such file: 'nothing.csv'"]),
    "unknown extension": (["finetune", "p", "--train", "train.xlsx", "--output", "out"],
                          ["Cannot tell the format of 'train.xlsx'", "--input-format"]),
    "misspelt column": (["finetune", "p", "--train", "train.csv", "--text-column", "txet", "--output", "out"],
                        ["train.csv has no column 'txet' (its columns: text, label). Did you mean 'text'?"]),
    "missing label column": (["finetune", "p", "--train", "train.csv", "--label-column", "class", "--output", "o"],
                             ["train.csv has no column 'class'", "--label-column"]),
    "one class": (["finetune", "p", "--train", "one_class.csv", "--output", "out"],
                  ["The training labels hold one class ('positive')"]),
    "empty label": (["finetune", "p", "--train", "empty_label.csv", "--output", "out"],
                    ["empty_label.csv, line 3: the label in column 'label' is empty"]),
    "unknown validation label": (["finetune", "p", "--train", "train.csv", "--validation", "other.csv",
                                  "--output", "out"], ["other.csv has labels that are not among the classes",
                                                       "'neutral'"]),
    "class names miss a label": (["finetune", "p", "--train", "train.csv", "--class-names", "positive,neutral",
                                  "--output", "out"], ["'negative'", "--class-names"]),
    "ragged row": (["finetune", "p", "--train", "ragged.csv", "--output", "out"],
                   ["ragged.csv, line 2: 3 fields where the header has 2"]),
    "no rows": (["finetune", "p", "--train", "header_only.csv", "--output", "out"], ["header_only.csv holds no rows"]),
    "empty file": (["finetune", "p", "--train", "blank.csv", "--output", "out"], ["blank.csv is empty"]),
    "not utf-8": (["finetune", "p", "--train", "latin1.csv", "--output", "out"], ["latin1.csv is not UTF-8 text"]),
    "number as text": (["finetune", "p", "--train", "numbers.jsonl", "--output", "out"],
                       ["numbers.jsonl, line 2: the text in column 'text' is a int (5), not a string"]),
    "broken json": (["finetune", "p", "--train", "broken.jsonl", "--output", "out"],
                    ["broken.jsonl, line 2: not JSON"]),
    "json list": (["finetune", "p", "--train", "list.jsonl", "--output", "out"],
                  ["list.jsonl, line 1: a JSON list, not an object"]),
    "output holds other files": (["finetune", "p", "--train", "train.csv", "--output", "occupied"],
                                 ["--output 'occupied' holds ['notes.txt'], which are not preset files"]),
    "output is a file": (["finetune", "p", "--train", "train.csv", "--output", "train.csv"],
                         ["--output 'train.csv' is a file"]),
    "validation split not a fraction": (["finetune", "p", "--train", "train.csv", "--output", "o",
                                         "--validation-split", "1.5"],
                                        ["--validation-split must be a fraction between 0 and 1", "got 1.5"]),
    "validation split leaves none": (["finetune", "p", "--train", "train.csv", "--output", "o",
                                      "--validation-split", "0.95"], ["--validation-split 0.95 of 10 rows leaves none for training"]),
    "two validations": (["finetune", "p", "--train", "train.csv", "--output", "o", "--validation", "train.csv",
                         "--validation-split", "0.2"], ["--validation FILE or --validation-split F, not both"]),
    "early stopping without validation": (["finetune", "p", "--train", "train.csv", "--output", "o",
                                           "--early-stopping", "2"], ["--early-stopping watches the validation"]),
    "zero patience": (["finetune", "p", "--train", "train.csv", "--output", "o", "--validation-split", "0.2",
                       "--early-stopping", "0"], ["--early-stopping must be at least 1; got 0"]),
    "zero accumulation": (["finetune", "p", "--train", "train.csv", "--output", "o", "--accumulate", "0"],
                          ["--accumulate must be at least 1; got 0"]),
    "zero LoRA rank": (["finetune", "p", "--train", "train.csv", "--output", "o", "--lora-rank", "0"],
                       ["--lora-rank must be at least 1; got 0"]),
    "zero epochs": (["finetune", "p", "--train", "train.csv", "--output", "out", "--epochs", "0"],
                    ["--epochs must be at least 1; got 0"]),
    "three text columns": (["predict", "m", "--input", "train.csv", "--text-column", "a", "--text-column", "b",
                            "--text-column", "c"], ["--text-column was given 3 times"]),
    "columns of a txt file": (["predict", "m", "--input", "texts.txt", "--text-column", "review"],
                              ["A .txt input holds one text a line and no columns"]),
    "not a translation model": (["translate", "occupied", "--input", "texts.txt"],
                                ["'occupied' is not a saved translation model", "transformer_translation.keras"]),
    "layers not numbers": (["attention", "p", "text", "--out", "a.png", "--layers", "first,last"],
                           ["--layers takes integers separated by commas"]),
    "picture format": (["attention", "p", "text", "--out", "a.jpg"], ["name the picture .png, .svg or .pdf"]),
    "zero top-k": (["fill-mask", "p", "[MASK]", "--top-k", "0"], ["--top-k must be at least 1; got 0"]),
    "embedding output format": (["embed", "p", "--input", "texts.txt", "--output", "vectors.csv"],
                                ["--output 'vectors.csv': name it .npy", ".jsonl"]),
    "embedding output directory missing": (["embed", "p", "--input", "texts.txt", "--output", "no/vectors.npy"],
                                           ["Cannot write 'no/vectors.npy'", "does not exist"]),
    "embed column misspelt": (["embed", "p", "--input", "train.csv", "--column", "review", "--output", "v.npy"],
                              ["train.csv has no column 'review'", "Name the text column with --column."]),
    "embed column of a txt file": (["embed", "p", "--input", "texts.txt", "--column", "review", "--output",
                                    "v.npy"], ["texts.txt is plain text", "leave out --column"]),
    "embedder preset path missing": (["embed", "./absent", "--input", "texts.txt", "--output", "v.npy"],
                                     ["No such preset directory: './absent'", "all_minilm_l6_v2"]),
    "zero batch size": (["embed", "p", "--input", "texts.txt", "--output", "v.npy", "--batch-size", "0"],
                        ["--batch-size must be at least 1; got 0"]),
    "search top-k": (["search", "p", "--corpus", "texts.txt", "--queries", "texts.txt", "--top-k", "0"],
                     ["--top-k must be at least 1; got 0"]),
    "search empty corpus": (["search", "p", "--corpus", "header_only.csv", "--queries", "texts.txt"],
                            ["header_only.csv holds no rows"]),
    "search from standard input twice": (["search", "p", "--corpus", "-"],
                                         ["--corpus and --queries cannot both be standard input"]),
    "search query column": (["search", "p", "--corpus", "texts.txt", "--queries", "train.csv", "--query-column",
                             "question"], ["train.csv has no column 'question'", "--query-column"]),
    "zero steps": (["pretrain", "--corpus", "*.txt", "--output", "out", "--steps", "0"],
                   ["--steps must be at least 1; got 0"]),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_exits_2_with_a_clear_message(files, case):
    arguments, fragments = CASES[case]
    before = sorted(os.listdir(files))
    # The backend is TensorFlow's, which kzoo imports anyway: the one case refused after kzoo is
    # imported (a foreign file in --output, checked against kzoo's list of preset files) then
    # imports no torch (2-3 s of CPU).
    expect_error(run(*arguments, cwd=files, env={"KERAS_BACKEND": "tensorflow"}), *fragments)
    assert sorted(os.listdir(files)) == before  # no output directory, no half-written file
    assert os.listdir(files / "occupied") == ["notes.txt"]
