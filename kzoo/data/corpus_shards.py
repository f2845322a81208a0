"""Pre-training data at corpus scale (BERT sec. 3.1, A.2): text shards to
TFRecord shards in memory that does not grow with the corpus.

`pretraining_dataset` holds the whole packed corpus (12 bytes per position:
about 50 GB for BERT's 3.3 billion words). `write_pretraining_shards` writes
one TFRecord shard per input text file instead, as google-research/bert's
`create_pretraining_data.py` is run once per input file. Each file is
streamed: its documents are taken a window of `documents_per_window` at a
time, and each window goes through the stages of `pretraining_dataset`
(tokenize, NSP pairs, pack, mask) and is written with its masks fixed.
NotNext partners come from the other documents of the same window
(google-research draws them from the documents of its input, one file per
run), so the examples have the in-memory pipeline's statistics, and memory
holds one window per process.

Files are independent tasks: run in this process, in a pool of
`num_processes` spawned processes, or as a `Map` over the files on Apache
Beam (`runner=`) for corpora beyond one machine (on a file system that every
worker sees). A shard depends only on the seed, the options and its input
file (not on the engine, the other files or TensorFlow's global seed), is
written beside its destination and renamed into place when complete, and a
rerun skips the shards already there. `read_pretraining_tfrecords` reads
them interleaved, split over hosts.
"""

import collections
import functools
import gc
import hashlib
import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from kzoo.data.documents import stream_text_file, text_files
from kzoo.data.masked_lm import default_max_predictions
from kzoo.data.pretraining_dataset import _check_rates, _packed_examples, _vocabulary_roles, masked_batches
from kzoo.data.pretraining_tfrecords import serialized_batches
from kzoo.data.sentence_pairs import check_sequence_length, sentence_pair_spans, tokenize_documents
from kzoo.atomic import replacing_file

OPTIONS_FILE = "pretraining_shards.json"  # the options the shards were written with
BATCH_SIZE = 256  # examples masked per call inside a window (no effect on the statistics)
MASKING_OPTIONS = (
    "next_sentence_prediction", "max_predictions_per_seq", "masked_lm_rate", "mask_token_rate",
    "random_token_rate", "whole_word_masking",
)

_Task = collections.namedtuple(
    "_Task", ["input_path", "output_path", "tokenizer_class", "tokenizer_config", "options", "seed", "window"]
)


def document_windows(documents, size):
    """Consecutive windows of `size` documents from an iterable, holding at
    most `size + 2` at a time; the last window takes the remainder, so it
    holds 2 to `size + 1` (a lone last document would have no NotNext partner).

    Args:
        documents: iterable. The documents, read once.
        size: int. Documents per window, 2 or more.

    Yields:
        Lists of documents.

    Example:

    >>> [len(window) for window in document_windows(range(10), 4)]
    [4, 4, 2]
    >>> [len(window) for window in document_windows(range(9), 4)]
    [4, 5]
    """
    window = []
    for document in documents:
        window.append(document)
        if len(window) == size + 2:
            yield window[:size]
            window = window[size:]
    if window:
        yield window


def window_seed(seed, name, window):
    """The seed of window `window` of input file `name`: the same wherever
    and in whatever order the files are processed.

    >>> window_seed(0, "part-00001.txt", 3) == window_seed(0, "part-00001.txt", 3)
    True
    >>> window_seed(0, "part-00001.txt", 3) != window_seed(0, "part-00002.txt", 3)
    True
    """
    name_key = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")
    words = np.random.SeedSequence([seed, name_key, window]).generate_state(2, np.uint64)
    return int(words[0] >> np.uint64(1))  # a non-negative int64: tf.data's seeds


@functools.lru_cache(maxsize=2)
def _tokenizer(tokenizer_class, config_json):
    """One tokenizer per process and vocabulary (building one compiles its WordPiece model)."""
    return tokenizer_class.from_config(json.loads(config_json))


def _window_dataset(documents, tokenizer, options, seed):
    """One window's examples, masks fixed, as `(features, labels)` batches: the
    stages of `pretraining_dataset`, with the order and the mask seeds drawn
    in NumPy from `seed` alone (`tf.data`'s seeded ops also depend on
    TensorFlow's global seed, which a shard must not)."""
    corpus = tokenize_documents(documents, tokenizer, progress=False)
    pairs = sentence_pair_spans(
        corpus,
        options["sequence_length"],
        next_sentence_prediction=options["next_sentence_prediction"],
        short_sequence_probability=options["short_sequence_probability"],
        dupe_factor=options["dupe_factor"],
        seed=seed,
        progress=False,
    )
    examples = _packed_examples(
        corpus, pairs, tokenizer, options["sequence_length"], options["next_sentence_prediction"]
    )
    count = len(pairs.next_sentence_label)
    rng = np.random.default_rng([seed, 1])  # a stream apart from the pairs'
    indices = tf.data.Dataset.from_tensor_slices(rng.permutation(count)).batch(BATCH_SIZE)
    seeds = rng.integers(0, 2**63 - 1, size=(-(-count // BATCH_SIZE), 2))
    masking = {k: options[k] for k in MASKING_OPTIONS}
    return masked_batches(examples, indices, tf.data.Dataset.from_tensor_slices(seeds), tokenizer, **masking)


def _write_shard(task):
    """Writes the TFRecord shard of one input text file; returns its path."""
    if os.path.exists(task.output_path):
        return task.output_path  # finished by an earlier run
    tokenizer = _tokenizer(task.tokenizer_class, task.tokenizer_config)
    name = os.path.basename(task.input_path)
    with replacing_file(task.output_path) as scratch, tf.io.TFRecordWriter(scratch) as writer:
        windows = document_windows(stream_text_file(task.input_path), task.window)
        for index, documents in enumerate(windows):
            try:
                dataset = _window_dataset(documents, tokenizer, task.options, window_seed(task.seed, name, index))
            except ValueError as error:
                raise ValueError(f"{task.input_path}, window {index} (of {task.window} documents): {error}") from error
            for records in serialized_batches(dataset):
                for record in records:
                    writer.write(record)
            del dataset
            gc.collect()  # the window's tf.data objects sit in reference cycles: free them now
    return task.output_path


def _check_options_file(output_dir, recorded):
    """Writes the options beside the shards, or refuses to add to shards
    written with other ones; returns the seed to use."""
    path = os.path.join(output_dir, OPTIONS_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            earlier = json.load(f)
        if recorded["seed"] is None:
            recorded["seed"] = earlier.get("seed")  # a rerun resumes with the first run's fresh seed
        changed = sorted(key for key in {**earlier, **recorded} if earlier.get(key) != recorded.get(key))
        if changed:
            raise ValueError(
                f"{output_dir} holds shards written with other options ({', '.join(changed)} differ; "
                f"see {OPTIONS_FILE}). Write to a new directory, or delete it to start over."
            )
        return recorded["seed"]
    if recorded["seed"] is None:
        recorded["seed"] = int(np.random.SeedSequence().entropy % 2**63)
    with replacing_file(path) as scratch, open(scratch, "w", encoding="utf-8") as f:
        json.dump(recorded, f, indent=1, sort_keys=True)
    return recorded["seed"]


def _output_paths(input_paths, output_dir):
    """`{output_dir}/{input name without its extension}.tfrecord` per input file."""
    outputs = [os.path.join(output_dir, os.path.splitext(os.path.basename(p))[0] + ".tfrecord") for p in input_paths]
    seen = {}
    for source, output in zip(input_paths, outputs):
        if output in seen:
            raise ValueError(
                f"{seen[output]} and {source} would both write {output}: input files need distinct "
                "names (without their extension), since each names its shard and seeds its examples."
            )
        seen[output] = source
    return outputs


def write_pretraining_shards(
    text_patterns,
    output_dir,
    tokenizer,
    sequence_length=128,
    max_predictions_per_seq=None,
    seed=None,
    *,
    documents_per_window=10_000,
    num_processes=1,
    runner=None,
    pipeline_options=None,
    next_sentence_prediction=True,
    masked_lm_rate=0.15,
    mask_token_rate=0.8,
    random_token_rate=0.1,
    whole_word_masking=False,
    short_sequence_probability=0.1,
    dupe_factor=1,
    progress=True,
):
    """Writes BERT pre-training examples, masks fixed, from text shards to
    TFRecord shards, one per input file, in memory that does not grow with the
    corpus (BERT sec. 3.1, A.2; see the module docstring).

    Args:
        text_patterns: str or list of str. Text files in the google-research
            format (a sentence per line, a blank line between documents), or
            glob patterns. Each file is one task and one output shard.
        output_dir: str. Where the shards go: `{input name}.tfrecord` each,
            beside `pretraining_shards.json` (the options; a rerun with other
            options is refused, one with the same options skips the shards
            already written).
        tokenizer: `kzoo.BertTokenizer`. The WordPiece tokenizer.
        sequence_length: int. The packed length, special tokens included.
            Defaults to `128`.
        max_predictions_per_seq: int or None. The cap on masked tokens per
            sequence. Defaults to `None`: `default_max_predictions`.
        seed: int or None. Seeds every window (with the input file's name and
            the window's index). Defaults to `None`: a fresh one, kept in
            `pretraining_shards.json` for reruns.
        documents_per_window: int. Documents per window, at least 2: NotNext
            partners come from the same window, and memory holds one window
            per process. Defaults to `10_000`.
        num_processes: int. Processes writing shards in parallel (spawned;
            1 writes in this process). Defaults to `1`.
        runner: str, Beam runner or None. Runs the files as a `Map` on Apache
            Beam instead (`pip install apache-beam`): `"DirectRunner"`, or a
            cluster's runner (`"FlinkRunner"`, `"SparkRunner"`, ...) whose
            workers have kzoo and see the paths (local file operations: a
            shared file system, not `gs://`). Defaults to `None`: the process pool.
        pipeline_options: list of str or `PipelineOptions` or None. Beam's
            options (e.g. `["--direct_num_workers=2",
            "--direct_running_mode=multi_processing"]`). Defaults to `None`.
        next_sentence_prediction: bool. As in `pretraining_dataset`. Defaults to `True`.
        masked_lm_rate: float. As in `pretraining_dataset`. Defaults to `0.15`.
        mask_token_rate: float. As in `pretraining_dataset`. Defaults to `0.8`.
        random_token_rate: float. As in `pretraining_dataset`. Defaults to `0.1`.
        whole_word_masking: bool. As in `pretraining_dataset`. Defaults to `False`.
        short_sequence_probability: float. As in `pretraining_dataset`. Defaults to `0.1`.
        dupe_factor: int. Passes over each window, each with new pairs and
            masks (google-research/bert uses 10). Defaults to `1`.
        progress: bool. Whether to show a tqdm bar over the files. Defaults to `True`.

    Returns:
        The list of shard paths, in input order; read them with
        `kzoo.data.read_pretraining_tfrecords`.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertTokenizer
    >>> folder = tempfile.mkdtemp()
    >>> for part in range(2):
    ...     with open(os.path.join(folder, f"part-{part}.txt"), "w") as f:
    ...         _ = f.write("a b c. d a b.\\nc d a.\\n\\nb b c.\\nd d a c.\\n\\n" * 3)
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "a", "b", "c", "d"])
    >>> shards = write_pretraining_shards(os.path.join(folder, "part-*.txt"), os.path.join(folder, "out"),
    ...     tokenizer, sequence_length=16, seed=0, documents_per_window=4, progress=False)
    >>> [os.path.basename(path) for path in shards]
    ['part-0.tfrecord', 'part-1.tfrecord']
    >>> from kzoo.data import read_pretraining_tfrecords
    >>> features, labels = next(iter(read_pretraining_tfrecords(shards, batch_size=4)))
    >>> tuple(features["token_ids"].shape), sorted(labels)
    ((4, 16), ['mask_ids', 'mask_weights', 'next_sentence_label'])
    """
    if max_predictions_per_seq is None:
        max_predictions_per_seq = default_max_predictions(sequence_length)
    check_sequence_length(sequence_length)
    _check_rates(masked_lm_rate, mask_token_rate, random_token_rate, max_predictions_per_seq)
    _vocabulary_roles(tokenizer)  # a vocabulary without ordinary tokens is refused before any work
    if int(documents_per_window) < 2:
        raise ValueError(
            f"documents_per_window must be >= 2 (NotNext partners come from it); got {documents_per_window}."
        )
    if int(num_processes) < 1:
        raise ValueError(f"num_processes must be >= 1; got {num_processes}.")
    if runner is not None and num_processes != 1:
        raise ValueError(
            "num_processes sizes the local process pool; with a Beam runner, set its parallelism in "
            "pipeline_options (e.g. --direct_num_workers=2 for the DirectRunner)."
        )
    beam = _import_beam() if runner is not None else None
    inputs = text_files(text_patterns)
    outputs = _output_paths(inputs, os.fspath(output_dir))
    options = dict(
        sequence_length=int(sequence_length),
        max_predictions_per_seq=int(max_predictions_per_seq),
        next_sentence_prediction=bool(next_sentence_prediction),
        masked_lm_rate=masked_lm_rate,
        mask_token_rate=mask_token_rate,
        random_token_rate=random_token_rate,
        whole_word_masking=bool(whole_word_masking),
        short_sequence_probability=short_sequence_probability,
        dupe_factor=int(dupe_factor),
    )
    config_json = json.dumps(tokenizer.get_config(), sort_keys=True)
    os.makedirs(output_dir, exist_ok=True)
    seed = _check_options_file(os.fspath(output_dir), {
        **options,
        "seed": seed,
        "documents_per_window": int(documents_per_window),
        "tokenizer": f"{type(tokenizer).__name__} sha256:{hashlib.sha256(config_json.encode()).hexdigest()}",
    })
    tasks = [
        _Task(source, output, type(tokenizer), config_json, options, seed, int(documents_per_window))
        for source, output in zip(inputs, outputs)
        if not os.path.exists(output)
    ]
    if beam is not None:
        _run_on_beam(beam, tasks, runner, pipeline_options)
    else:
        _run_in_processes(tasks, int(num_processes), len(inputs), progress)
    return outputs


def _run_in_processes(tasks, num_processes, num_files, progress):
    with tqdm(total=num_files, initial=num_files - len(tasks), desc="shards", unit="file", disable=not progress) as bar:
        if num_processes == 1 or len(tasks) <= 1:
            for task in tasks:
                _write_shard(task)
                bar.update()
            return
        # Spawned, not forked: a fork of a process that runs TensorFlow threads can deadlock.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(num_processes, len(tasks)), mp_context=context) as pool:
            futures = [pool.submit(_write_shard, task) for task in tasks]
            try:
                for future in as_completed(futures):
                    future.result()
                    bar.update()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


def _import_beam():
    try:
        import apache_beam  # noqa: PLC0415 (optional: the `beam` extra)
    except ImportError as error:
        raise ImportError(
            "runner= writes the shards on Apache Beam, which is not installed: `pip install apache-beam` "
            "(or `pip install 'kzoo[beam]'`; or leave runner out to use a local process pool, num_processes=...)."
        ) from error
    return apache_beam


def _run_on_beam(beam, tasks, runner, pipeline_options):
    """The files as a `Map` on Beam: each element writes one shard."""
    from apache_beam.options.pipeline_options import PipelineOptions  # noqa: PLC0415 (optional)

    if not isinstance(pipeline_options, PipelineOptions):
        pipeline_options = PipelineOptions(list(pipeline_options or []))
    with beam.Pipeline(runner=runner, options=pipeline_options) as pipeline:
        _ = pipeline | "Input files" >> beam.Create(tasks) | "Write shards" >> beam.Map(_write_shard)
