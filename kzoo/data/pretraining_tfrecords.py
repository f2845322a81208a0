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


def _feature(name, values):
    values = values.reshape(-1).tolist()
    if name == "mask_weights":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


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
            for features, labels in dataset.as_numpy_iterator():
                tensors = {**features, **labels}
                batched = tensors["token_ids"].ndim == 2
                for i in range(len(tensors["token_ids"]) if batched else 1):
                    example = {k: (v[i] if batched else v) for k, v in tensors.items()}
                    record = tf.train.Example(
                        features=tf.train.Features(
                            feature={FEATURE_NAMES[k]: _feature(k, v) for k, v in example.items()}
                        )
                    )
                    writers[count % num_shards].write(record.SerializeToString())
                    count += 1
                    bar.update()
    finally:
        for writer in writers:
            writer.close()
    return paths


def _feature_spec(path):
    """Parsing spec (by stored feature name) inferred from the first record of `path`."""
    first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    if first is None:
        raise ValueError(f"{path} holds no examples.")
    example = tf.train.Example.FromString(first.numpy()).features.feature
    spec = {}
    for name, stored in FEATURE_NAMES.items():
        if stored not in example:
            if name == "next_sentence_label":
                continue  # MLM-only data
            raise ValueError(
                f"{path} is not a BERT pre-training TFRecord: feature {stored!r} is missing "
                f"(found {sorted(example)})."
            )
        feature = example[stored]
        dtype = tf.float32 if feature.HasField("float_list") else tf.int64
        length = len(feature.float_list.value if dtype == tf.float32 else feature.int64_list.value)
        spec[stored] = tf.io.FixedLenFeature([length], dtype)
    return spec


def read_pretraining_tfrecords(
    file_patterns, batch_size=32, shuffle=True, seed=None, drop_remainder=False
):
    """Reads pre-masked examples from TFRecord shards as `(features, labels)`
    batches for `kzoo.BertPretrainer.fit` (BERT sec. 3.1, A.2).

    Files written by `write_pretraining_tfrecords` or by google-research/bert's
    `create_pretraining_data.py` both work; sequence length and prediction
    count are read from the first record.

    Args:
        file_patterns: str or list of str. Paths or glob patterns.
        batch_size: int. Examples per batch. Defaults to `32`.
        shuffle: bool. Whether to shuffle files and examples (every epoch).
            Defaults to `True`.
        seed: int. A seed for a reproducible order. Defaults to `None`.
        drop_remainder: bool. Whether to drop a last, smaller batch. Defaults
            to `False`.

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
    """
    if isinstance(file_patterns, (str, os.PathLike)):
        file_patterns = [file_patterns]
    files = sorted({f for pattern in file_patterns for f in glob.glob(os.fspath(pattern))})
    if not files:
        raise ValueError(f"No TFRecord file matches {[os.fspath(p) for p in file_patterns]}.")
    spec = _feature_spec(files[0])

    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 8))
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

    return dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
