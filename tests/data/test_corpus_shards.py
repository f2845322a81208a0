"""Pre-training data at corpus scale (BERT sec. 3.1, A.2): text shards to
TFRecord shards by `write_pretraining_shards`, read back split over hosts.
The examples keep the in-memory pipeline's statistics (the tolerances of
test_pretraining_dataset.py and test_sentence_pairs.py), depend only on the
seed and each file, and a rerun resumes where a run stopped."""

import collections
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import kzoo.data.corpus_shards as corpus_shards
from kzoo import BertTokenizer
from kzoo.data import pretraining_dataset, read_pretraining_tfrecords, write_pretraining_shards
from kzoo.data.corpus_shards import OPTIONS_FILE, document_windows
from tests.data.pretraining_corpus import (
    SPECIAL_TOKENS,
    VOCABULARY,
    assert_masking_statistics,
    collect,
    make_documents,
    original_ids,
    segment_lengths,
    write_text_files,
)

pytestmark = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)

SEQUENCE_LENGTH, MAX_PREDICTIONS = 128, 20


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCABULARY)


@pytest.fixture(scope="module")
def documents():
    return make_documents(800)


@pytest.fixture(scope="module")
def text_files(tmp_path_factory, documents):
    return write_text_files(tmp_path_factory.mktemp("text"), documents, num_files=4)


def write(paths, output_dir, tokenizer, **options):
    options = {
        "sequence_length": SEQUENCE_LENGTH, "max_predictions_per_seq": MAX_PREDICTIONS, "seed": 5,
        "documents_per_window": 64, "progress": False, **options,
    }
    return write_pretraining_shards(paths, output_dir, tokenizer, **options)


@pytest.fixture(scope="module")
def shards(tmp_path_factory, text_files, tokenizer):
    return write(text_files, tmp_path_factory.mktemp("shards"), tokenizer)


def read_all(files, **options):
    return collect(read_pretraining_tfrecords(files, batch_size=256, shuffle=False, **options))


def test_statistics_equal_the_in_memory_pipeline(shards, documents, tokenizer):
    """Masking rates, NSP balance and pair bounds within the tolerances of the
    in-memory pipeline's tests, as many examples (within 2%: pairs are drawn
    per document, partners per window) of the same lengths."""
    written = read_all(shards)
    in_memory = collect(
        pretraining_dataset(documents, tokenizer, SEQUENCE_LENGTH, MAX_PREDICTIONS, batch_size=256, seed=5,
                            progress=False)
    )
    for batch in (written, in_memory):
        assert_masking_statistics(batch, MAX_PREDICTIONS)
        labels = batch["next_sentence_label"]
        assert abs(np.mean(labels == 0) - 0.5) <= 0.02 and set(np.unique(labels)) == {0, 1}
        length_a, length_b = segment_lengths(batch)
        assert length_a.min() >= 1 and length_b.min() >= 1
        assert (length_a + length_b).max() <= SEQUENCE_LENGTH - 3
    # The same number of examples, and the same lengths of A, B and A + B
    # (means within ~3 standard errors of their difference over ~1,800 pairs).
    assert abs(len(written["token_ids"]) / len(in_memory["token_ids"]) - 1) <= 0.02
    (a, b), (a_in_memory, b_in_memory) = segment_lengths(written), segment_lengths(in_memory)
    for ours, theirs in [(a, a_in_memory), (b, b_in_memory), (a + b, a_in_memory + b_in_memory)]:
        assert abs(ours.mean() - theirs.mean()) <= 3.0, (ours.mean(), theirs.mean())
    full = [np.mean(lengths >= 0.75 * (SEQUENCE_LENGTH - 3)) for lengths in (a + b, a_in_memory + b_in_memory)]
    assert abs(full[0] - full[1]) <= 0.05, full


def document_corpus(folder, files=2, documents_per_file=30):
    """Text files whose document d is made of the word `w{d}` only, so that
    every token names its document; and the tokenizer of those words."""
    documents = [[" ".join([f"w{d}"] * (3 + (d + s) % 5)) for s in range(2 + d % 4)]
                 for d in range(files * documents_per_file)]
    paths = write_text_files(folder, documents, files)
    words = [f"w{d}" for d in range(len(documents))]
    return paths, BertTokenizer(SPECIAL_TOKENS + words), len(SPECIAL_TOKENS)


def test_not_next_partners_come_from_the_same_window(tmp_path):
    paths, tokenizer, first_word = document_corpus(tmp_path / "text")
    window_size = 8
    shard_files = write(paths, tmp_path / "shards", tokenizer, documents_per_window=window_size)
    # The window of each document: files of 30 documents in windows of 8, 8, 8 and 6.
    window_of = {}
    for file_index in range(len(paths)):
        windows = document_windows(range(file_index * 30, (file_index + 1) * 30), window_size)
        window_of.update({d: (file_index, w) for w, window in enumerate(windows) for d in window})

    batch = read_all(shard_files)
    ids, segments, padding = original_ids(batch), batch["segment_ids"], batch["padding_mask"]
    words = (ids >= first_word) & (padding == 1)
    not_next = 0
    for row, label in enumerate(batch["next_sentence_label"]):
        document_a = set(ids[row][words[row] & (segments[row] == 0)] - first_word)
        document_b = set(ids[row][words[row] & (segments[row] == 1)] - first_word)
        assert len(document_a) == len(document_b) == 1
        a, b = document_a.pop(), document_b.pop()
        if label == 0:
            assert a == b
        else:
            assert a != b and window_of[a] == window_of[b], (a, b)
            not_next += 1
    assert 0.3 < not_next / len(batch["next_sentence_label"]) < 0.7


def test_shards_depend_only_on_the_seed_and_the_file(tmp_path, text_files, shards, tokenizer, monkeypatch):
    """One process, two spawned processes, or one file written alone, under
    any TensorFlow global seed: the same bytes; another seed: other examples."""
    def contents(files):
        return [open(f, "rb").read() for f in files]

    expected = contents(shards)
    # A file per process; they start on Keras' TensorFlow backend (the shards
    # are TensorFlow data code): each import of torch cost ~3 s of CPU.
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    assert contents(write(text_files[:2], tmp_path / "two", tokenizer, num_processes=2)) == expected[:2]
    monkeypatch.undo()
    tf.random.set_seed(99)
    assert contents(write(text_files[2:3], tmp_path / "alone", tokenizer)) == expected[2:3]
    other = contents(write(text_files[:1], tmp_path / "seed", tokenizer, seed=6))
    assert other[0] != expected[0]


def test_rerun_skips_finished_shards_and_a_failed_shard_leaves_nothing(tmp_path, text_files, shards, tokenizer, monkeypatch):
    output = tmp_path / "shards"
    real_batches = corpus_shards.serialized_batches

    def fail_on_part_2(dataset):
        for records in real_batches(dataset):
            if dataset_is_part_2[0]:
                raise OSError("No space left on device")
            yield records

    # The third file's shard fails after some records: no shard, no scratch file left.
    dataset_is_part_2 = [False]
    real_write_shard = corpus_shards._write_shard

    def write_shard(task):
        dataset_is_part_2[0] = task.input_path.endswith("part-2.txt")
        return real_write_shard(task)

    monkeypatch.setattr(corpus_shards, "serialized_batches", fail_on_part_2)
    monkeypatch.setattr(corpus_shards, "_write_shard", write_shard)
    with pytest.raises(OSError, match="No space left"):
        write(text_files, output, tokenizer)
    assert sorted(os.listdir(output)) == ["part-0.tfrecord", "part-1.tfrecord", OPTIONS_FILE]
    finished = os.stat(output / "part-0.tfrecord").st_mtime_ns

    # The rerun writes the missing shards, the same as an uninterrupted run, and keeps the others.
    monkeypatch.undo()
    files = write(text_files, output, tokenizer)
    assert os.stat(output / "part-0.tfrecord").st_mtime_ns == finished
    assert [open(f, "rb").read() for f in files] == [open(f, "rb").read() for f in shards]


def test_rerun_with_other_options_is_refused_and_a_fresh_seed_is_kept(tmp_path, text_files, tokenizer):
    output = tmp_path / "shards"
    first = write(text_files[:1], output, tokenizer, seed=None)
    with pytest.raises(ValueError, match="other options \\(documents_per_window differ"):
        write(text_files[:1], output, tokenizer, seed=None, documents_per_window=32)
    with pytest.raises(ValueError, match="other options \\(seed differ"):
        write(text_files[:1], output, tokenizer, seed=7)
    # seed=None again: the first run's seed, from the options file; elsewhere, a fresh one.
    first_bytes = open(first[0], "rb").read()
    os.remove(first[0])
    again = write(text_files[:1], output, tokenizer, seed=None)
    fresh = write(text_files[:1], tmp_path / "other", tokenizer, seed=None)
    assert open(again[0], "rb").read() == first_bytes != open(fresh[0], "rb").read()


def test_mlm_only_shards(tmp_path, text_files, tokenizer):
    files = write(text_files[:1], tmp_path / "shards", tokenizer, next_sentence_prediction=False)
    batch = read_all(files)
    assert "next_sentence_label" not in batch
    assert (batch["segment_ids"] == 0).all()


def rows(batch):
    """Each example's values as one bytes key."""
    return collections.Counter(
        b"".join(np.ascontiguousarray(batch[name][i]).tobytes() for name in sorted(batch))
        for i in range(len(batch["token_ids"]))
    )


def test_hosts_read_disjoint_parts_that_make_the_whole(shards):
    everything = rows(read_all(shards))
    parts = [rows(read_all(shards, num_hosts=3, host_index=i)) for i in range(3)]
    assert sum(parts, collections.Counter()) == everything
    assert all(not (parts[i] & parts[j]) for i in range(3) for j in range(i + 1, 3))
    # A tf.distribute.InputContext gives the same split, and no strategy shards it again.
    context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=1)
    dataset = read_pretraining_tfrecords(shards, batch_size=256, shuffle=False, input_context=context)
    assert rows(collect(dataset)) == parts[1]
    assert dataset.options().experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.OFF


@pytest.mark.parametrize(
    "options,message",
    [
        ({"num_hosts": 5, "host_index": 0}, "4 file\\(s\\) cannot be split over 5 hosts"),
        ({"num_hosts": 2, "host_index": 2}, "host_index in \\[0, num_hosts\\)"),
        ({"num_hosts": 2}, "give both"),
        ({"num_hosts": 2, "host_index": 0, "input_context": tf.distribute.InputContext()}, "not both"),
    ],
)
def test_bad_host_splits_are_refused(shards, options, message):
    with pytest.raises(ValueError, match=message):
        read_pretraining_tfrecords(shards, **options)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"documents_per_window": 1}, "documents_per_window must be >= 2"),
        ({"num_processes": 0}, "num_processes must be >= 1"),
        ({"runner": "DirectRunner", "num_processes": 2}, "set its parallelism in pipeline_options"),
        ({"masked_lm_rate": 0.0}, "masked_lm_rate must be in"),
        ({"sequence_length": 4}, "sequence_length=4 is too short"),
    ],
)
def test_bad_options_are_refused_before_any_work(tmp_path, text_files, tokenizer, options, message):
    with pytest.raises(ValueError, match=message):
        write(text_files, tmp_path / "shards", tokenizer, **options)
    assert not (tmp_path / "shards").exists()


def test_inputs_must_exist_and_have_distinct_names(tmp_path, text_files, tokenizer):
    with pytest.raises(ValueError, match="No file matches"):
        write(str(tmp_path / "missing-*.txt"), tmp_path / "shards", tokenizer)
    twin = tmp_path / "elsewhere" / "part-0.txt"
    twin.parent.mkdir()
    twin.write_text("a.\n")
    with pytest.raises(ValueError, match="would both write .*part-0.tfrecord.*distinct"):
        write([text_files[0], twin], tmp_path / "shards", tokenizer)
    assert not (tmp_path / "shards").exists()


def test_runner_without_beam_says_what_to_install(tmp_path, text_files, tokenizer, monkeypatch):
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # as if not installed
    with pytest.raises(ImportError, match="pip install apache-beam"):
        write(text_files, tmp_path / "shards", tokenizer, runner="DirectRunner")
    assert not (tmp_path / "shards").exists()


def test_beam_direct_runner_writes_the_same_shards(tmp_path, text_files, shards, tokenizer):
    pytest.importorskip("apache_beam", reason="Apache Beam is optional (pip install apache-beam)")
    files = write(text_files, tmp_path / "beam", tokenizer, runner="DirectRunner")
    assert [open(f, "rb").read() for f in files] == [open(f, "rb").read() for f in shards]
