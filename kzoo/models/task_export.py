"""`Task.export`: a task written for serving (`kzoo.export` holds the formats;
it imports the models, so the method reaches it at call time)."""


def export(self, path, format="tf_saved_model", **options):
    """Writes the task for serving (`kzoo.export`): `"tf_saved_model"` is a
    TensorFlow SavedModel whose `serving_default` takes batches of strings
    and returns predictions (e.g. `class_names`), the tokenizer inside; it
    serves with TensorFlow and tensorflow-text alone (`import
    tensorflow_text` before `tf.saved_model.load`), from a task trained on
    any backend (`kzoo.export.saved_model`). `"onnx"`: the network as ONNX with the
    tokenizer's vocabulary and settings beside it (`kzoo.export.onnx`).

    Args:
        path: str or os.PathLike. A new or empty directory, or an earlier SavedModel.
        format: str. A name in `kzoo.export.FORMATS`. Defaults to `"tf_saved_model"`.
        **options: the task's serving options (`kzoo.export.serving`), e.g.
            `text_pairs=True` for a classifier of sentence pairs.

    Example:

    >>> import os, tempfile
    >>> import tensorflow as tf
    >>> from kzoo import BertBackbone, BertClassifier, BertTokenizer
    >>> backbone = BertBackbone(vocabulary_size=7, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> model = BertClassifier(backbone, class_names=["negative", "positive"],
    ...     preprocessor=BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]))
    >>> path = os.path.join(tempfile.mkdtemp(), "classifier")
    >>> model.export(path)
    >>> serve = tf.saved_model.load(path).signatures["serving_default"]
    >>> serve(text=tf.constant(["good", "bad"]))["class_names"].numpy().tolist() == [
    ...     name.encode() for name in model.predict_labels(["good", "bad"], verbose=0)]
    True
    """
    from kzoo import export  # noqa: PLC0415 (kzoo.export serves the models: it comes after them)

    return export.export(self, path, format=format, **options)
