"""Pre-masked BERT pre-training examples as sharded TFRecord files (BERT sec. 3.1, A.2),
in google-research/bert's format: files written by its
`create_pretraining_data.py` read here, and files written here feed its
`run_pretraining.py`.

| feature (TFRecord)      | kzoo name             | dtype   | shape |
|-------------------------|-----------------------|---------|-------|
| `input_ids`             | `token_ids`           | int64   | (L,)  |
| `segment_ids`           | `segment_ids`         | int64   | (L,)  |
| `input_mask`            | `padding_mask`        | int64   | (L,)  |
| `masked_lm_positions`   | `mask_positions`      | int64   | (P,)  |
| `masked_lm_ids`         | `mask_ids`            | int64   | (P,)  |
| `masked_lm_weights`     | `mask_weights`        | float   | (P,)  |
| `next_sentence_labels`  | `next_sentence_label` | int64   | (1,)  |
"""

import glob
import os

import tensorflow as tf
from tqdm.auto import tqdm

FEATURE_NAMES = {
    "token_ids": "input_ids",
    "segment_ids": "segment_ids",
    "padding_mask": "input_mask",
    "mask_positions": "masked_lm_positions",
    "mask_ids": "masked_lm_ids",
    "mask_weights": "masked_lm_weights",
    "next_sentence_label": "next_sentence_labels",
}
LABEL_NAMES = ("mask_ids", "mask_weights", "next_sentence_label")


def _encoded(messages, field, values):
    """`(batch,)` serialized `messages`, each with `values[i]` (a `(batch, k)`
    tensor, or `(batch,)` strings) in its repeated `field`."""
    values = values[:, None] if values.shape.rank == 1 else values
    sizes = tf.fill([tf.shape(values)[0], 1], tf.shape(values)[1])
    return tf.io.encode_proto(sizes, [values], [field], messages)


def serialize_examples(tensors):
    """A batch of pre-training examples as serialized `tf.train.Example`s in
    google-research/bert's feature names (the table above), in TensorFlow ops
    (`tf.io.encode_proto`) without Python per example: 28k examples/s of
    length 128 on one shared core, 5x building each proto in Python.

    Args:
        tensors: dict of str to tensor. kzoo's names (`token_ids`,
            `mask_positions`, ...) to `(batch, k)` or `(batch,)` values.

    Returns:
        A `(batch,)` `tf.string` tensor.

    Example:

    >>> import numpy as np, tensorflow as tf
    >>> records = serialize_examples({"token_ids": np.array([[2, 7, 3]]), "mask_weights": np.array([[1.0]])})
    >>> example = tf.train.Example.FromString(records[0].numpy()).features.feature
    >>> list(example["input_ids"].int64_list.value), list(example["masked_lm_weights"].float_list.value)
    ([2, 7, 3], [1.0])
    """
    entries = []
    for name, values in tensors.items():
        if name == "mask_weights":
            value = _encoded("tensorflow.FloatList", "value", tf.cast(values, tf.float32))
            feature = _encoded("tensorflow.Feature", "float_list", value)
        else:
            value = _encoded("tensorflow.Int64List", "value", tf.cast(values, tf.int64))
            feature = _encoded("tensorflow.Feature", "int64_list", value)
        batch = tf.shape(feature)[0]
        entries.append(
            tf.io.encode_proto(
                tf.ones([batch, 2], tf.int32),
                [tf.fill([batch, 1], FEATURE_NAMES[name]), feature[:, None]],
                ["key", "value"],
                "tensorflow.Features.FeatureEntry",
            )
        )
    features = _encoded("tensorflow.Features", "feature", tf.stack(entries, axis=1))
    return _encoded("tensorflow.Example", "features", features)


def serialized_batches(dataset):
    """Yields `dataset`'s `(features, labels)` batches (or single examples)
    as NumPy arrays of serialized `tf.train.Example`s (see `serialize_examples`)."""
    if dataset.element_spec[0]["token_ids"].shape.rank == 1:
        dataset = dataset.batch(256)
    for features, labels in dataset:
        yield _serialize_function({**features, **labels}).numpy()


# Traced once per feature layout (any batch size), then called on each batch: a `Dataset.map`
# would trace it again and optimise a new pipeline for every dataset
# (`write_pretraining_shards` makes one per window), ~0.3 s each.
_serialize_function = tf.function(serialize_examples, autograph=False, reduce_retracing=True)


def write_pretraining_tfrecords(dataset, output_prefix, num_shards=1, progress=True):
    """Writes the examples of a pre-training dataset, masks fixed, as TFRecord
    shards (BERT sec. 3.1, A.2; google-research/bert's static masking).

    Args:
        dataset: `tf.data.Dataset`. `(features, labels)` batches or examples,
            as made by `kzoo.data.pretraining_dataset`; one pass over it is written.
        output_prefix: str. The path prefix; shards are named
            `{output_prefix}-{i:05d}-of-{num_shards:05d}.tfrecord`.
        num_shards: int. Examples are dealt round-robin over this many files.
            Defaults to `1`.
        progress: bool. Whether to show a tqdm progress bar. Defaults to `True`.

    Returns:
        The list of files written.

    Example:

    >>> import os, tempfile
    >>> import numpy as np, tensorflow as tf
    >>> features = {"token_ids": np.array([[2, 5, 4, 3, 6, 3]]), "segment_ids": np.array([[0, 0, 0, 0, 1, 1]]),
    ...             "padding_mask": np.ones((1, 6), "int32"), "mask_positions": np.array([[2]])}
    >>> labels = {"mask_ids": np.array([[7]]), "mask_weights": np.array([[1.0]], "float32"),
    ...           "next_sentence_label": np.array([0])}
    >>> dataset = tf.data.Dataset.from_tensors((features, labels))
    >>> prefix = os.path.join(tempfile.mkdtemp(), "train")
    >>> files = write_pretraining_tfrecords(dataset, prefix, num_shards=2, progress=False)
    >>> [os.path.basename(f) for f in files]
    ['train-00000-of-00002.tfrecord', 'train-00001-of-00002.tfrecord']
    """
    if int(num_shards) < 1:
        raise ValueError(f"num_shards must be >= 1; got {num_shards}.")
    directory = os.path.dirname(os.fspath(output_prefix))
    if directory:
        os.makedirs(directory, exist_ok=True)
    paths = [f"{os.fspath(output_prefix)}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    writers = [tf.io.TFRecordWriter(path) for path in paths]
    count = 0
    try:
        with tqdm(desc="writing", unit="example", disable=not progress) as bar:
            for records in serialized_batches(dataset):
                for record in records:
                    writers[count % num_shards].write(record)
                    count += 1
                bar.update(len(records))
    finally:
        for writer in writers:
            writer.close()
    return paths


def _feature_spec(files):
    """Parsing spec (by stored feature name) inferred from the first record of `files`."""
    first = next(iter(tf.data.TFRecordDataset(files).take(1)), None)
    if first is None:
        raise ValueError(f"{files[0] if len(files) == 1 else files} hold(s) no examples.")
    example = tf.train.Example.FromString(first.numpy()).features.feature
    spec = {}
    for name, stored in FEATURE_NAMES.items():
        if stored not in example:
            if name == "next_sentence_label":
                continue  # MLM-only data
            raise ValueError(
                f"{files[0]} is not a BERT pre-training TFRecord: feature {stored!r} is missing "
                f"(found {sorted(example)})."
            )
        feature = example[stored]
        dtype = tf.float32 if feature.HasField("float_list") else tf.int64
        length = len(feature.float_list.value if dtype == tf.float32 else feature.int64_list.value)
        spec[stored] = tf.io.FixedLenFeature([length], dtype)
    return spec


def _host_files(files, num_hosts, host_index, input_context):
    """This host's share of `files`: every `num_hosts`-th from `host_index`."""
    if input_context is not None:
        if num_hosts is not None or host_index is not None:
            raise ValueError("Give either input_context or num_hosts and host_index, not both.")
        num_hosts, host_index = input_context.num_input_pipelines, input_context.input_pipeline_id
    if num_hosts is None and host_index is None:
        return files
    if num_hosts is None or host_index is None or not 0 <= host_index < num_hosts:
        raise ValueError(
            f"num_hosts={num_hosts}, host_index={host_index}: give both, host_index in "
            "[0, num_hosts) (e.g. distributed.num_processes and distributed.process_id)."
        )
    if len(files) < num_hosts:
        raise ValueError(
            f"{len(files)} file(s) cannot be split over {num_hosts} hosts: each host reads whole "
            "files. Write at least one shard per host (write_pretraining_shards writes one per "
            "input text file)."
        )
    return files[host_index::num_hosts]


def read_pretraining_tfrecords(
    file_patterns,
    batch_size=32,
    shuffle=True,
    seed=None,
    drop_remainder=False,
    *,
    num_hosts=None,
    host_index=None,
    input_context=None,
):
    """Reads pre-masked examples from TFRecord shards as `(features, labels)`
    batches for `kzoo.BertPretrainer.fit` (BERT sec. 3.1, A.2).

    Files written by `write_pretraining_tfrecords`, `write_pretraining_shards`
    or google-research/bert's `create_pretraining_data.py` all work; sequence
    length and prediction count are read from the first record. Up to 8 files
    are read at once, their records interleaved.

    On several hosts, each host reads its own files (`num_hosts` and
    `host_index`, or a `tf.distribute.InputContext`): every `num_hosts`-th
    file of the sorted list, so the hosts' examples are disjoint and together
    all of them. Such a dataset is this host's part, batched with this host's
    batch size, and `tf.data`'s auto-sharding is turned off for it. With
    TensorFlow's `MultiWorkerMirroredStrategy`, pass
    `strategy.distribute_datasets_from_function(lambda context:
    read_pretraining_tfrecords(files, context.get_per_replica_batch_size(256),
    input_context=context))` to `fit`; with JAX,
    `num_hosts=distributed.num_processes, host_index=distributed.process_id`,
    a batch of `256 // num_hosts`, and `keras.distribution.DataParallel(...,
    auto_shard_dataset=False)`. Hosts may hold different numbers of
    examples: train on `.repeat()` with `steps_per_epoch`.

    Args:
        file_patterns: str or list of str. Paths or glob patterns.
        batch_size: int. Examples per batch (on several hosts: this host's
            share of the global batch). Defaults to `32`.
        shuffle: bool. Whether to shuffle files and examples (every epoch).
            Defaults to `True`.
        seed: int. A seed for a reproducible order. Defaults to `None`.
        drop_remainder: bool. Whether to drop a last, smaller batch. Defaults
            to `False`.
        num_hosts: int or None. The number of hosts (input pipelines)
            splitting the files. Defaults to `None`: one reads them all.
        host_index: int or None. This host's index in `[0, num_hosts)`.
            Defaults to `None`.
        input_context: `tf.distribute.InputContext` or None. Gives
            `num_hosts` (`num_input_pipelines`) and `host_index`
            (`input_pipeline_id`) instead. Defaults to `None`.

    Returns:
        A `tf.data.Dataset` with the same structure as `kzoo.data.pretraining_dataset`'s.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertTokenizer
    >>> from kzoo.data import pretraining_dataset
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcd"))
    >>> dataset = pretraining_dataset([["a b c", "d c b"], ["b a d", "c"]], tokenizer,
    ...     sequence_length=12, max_predictions_per_seq=3, seed=1, progress=False)
    >>> prefix = os.path.join(tempfile.mkdtemp(), "train")
    >>> _ = write_pretraining_tfrecords(dataset, prefix, num_shards=2, progress=False)
    >>> features, labels = next(iter(read_pretraining_tfrecords(prefix + "-*", batch_size=2)))
    >>> tuple(features["token_ids"].shape), tuple(labels["mask_ids"].shape)
    ((2, 12), (2, 3))
    >>> hosts = [read_pretraining_tfrecords(prefix + "-*", num_hosts=2, host_index=i) for i in (0, 1)]
    >>> [sum(len(labels["mask_ids"]) for _, labels in host) for host in hosts]  # 3 examples in 2 files
    [2, 1]
    """
    if isinstance(file_patterns, (str, os.PathLike)):
        file_patterns = [file_patterns]
    files = sorted({f for pattern in file_patterns for f in glob.glob(os.fspath(pattern))})
    if not files:
        raise ValueError(f"No TFRecord file matches {[os.fspath(p) for p in file_patterns]}.")
    files = _host_files(files, num_hosts, host_index, input_context)
    spec = _feature_spec(files)

    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(files), 8),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    if shuffle:
        dataset = dataset.shuffle(10_000, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)

    def parse(records):
        parsed = tf.io.parse_example(records, spec)
        tensors = {
            name: parsed[stored] if name == "mask_weights" else tf.cast(parsed[stored], tf.int32)
            for name, stored in FEATURE_NAMES.items()
            if stored in parsed
        }
        if "next_sentence_label" in tensors:
            tensors["next_sentence_label"] = tensors["next_sentence_label"][:, 0]
        features = {k: v for k, v in tensors.items() if k not in LABEL_NAMES}
        labels = {k: v for k, v in tensors.items() if k in LABEL_NAMES}
        return features, labels

    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    if input_context is not None or num_hosts is not None:  # this host's part: a strategy must not shard it again
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        dataset = dataset.with_options(options)
    return dataset
