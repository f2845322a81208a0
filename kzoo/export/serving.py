"""What a SavedModel of each kzoo model serves: batches of strings in, what
a caller wants out, the tokenizer and the packing inside the graph.

Each model kind has a builder `(model, preprocessor, **options) -> Serving`
(here, and `kzoo.export.answer_spans.serve_answers`): it checks its options
(a `ValueError` before any work), and its `function` maps the `inputs` (1-D
`tf.string` tensors) to a dict of tensors with TensorFlow ops only (the
preprocessors are tensorflow-text, the model runs on the TensorFlow
backend), so that tracing it gives a graph that serves without kzoo or
Keras. Nothing here imports the model classes (`kzoo.models.Task.export`
comes here): `kzoo.export.saved_model` picks a builder by class name.
"""

import collections

import tensorflow as tf

from kzoo.models.bert.bert_token_classifier_preprocessor import IGNORED_LABEL, OUTSIDE_TAG
from kzoo.models.input_checks import check_int

Serving = collections.namedtuple("Serving", ["inputs", "function"])
Serving.__doc__ = """`inputs`: a list of named `tf.TensorSpec`s; `function`: takes them, returns a dict of tensors."""


def strings(name):
    """A batch of strings, the input of every kzoo SavedModel: `tf.TensorSpec([None], tf.string, name=name)`.

    Example:

    >>> strings("text")
    TensorSpec(shape=(None,), dtype=tf.string, name='text')
    """
    return tf.TensorSpec([None], tf.string, name=name)


def _check_bool(value, name, owner):
    if not isinstance(value, bool):
        raise ValueError(f"{owner}.export: {name} must be True or False; got {value!r}.")


def _text_inputs(model, preprocessor, text_pairs, outputs):
    """The `Serving` of a model on one text (`text`) or a pair (`text_a`, `text_b`):
    `outputs(packed inputs)` on what the preprocessor packs (BERT sec. 3)."""
    _check_bool(text_pairs, "text_pairs", type(model).__name__)
    if text_pairs:
        return Serving([strings("text_a"), strings("text_b")],
                       lambda text_a, text_b: outputs(preprocessor((text_a, text_b))))
    return Serving([strings("text")], lambda text: outputs(preprocessor(text)))


def serve_classes(model, preprocessor, text_pairs=False):
    """A `kzoo.BertClassifier`'s serving (BERT sec. 4.1): `logits`,
    `probabilities` (the softmax), `class_ids` (int32 argmax) and, with class
    names, `class_names`; a regression (`num_classes=1`) serves `scores`.

    Args:
        model: `kzoo.BertClassifier`. The classifier.
        preprocessor: `kzoo.BertPreprocessor`. Its preprocessor.
        text_pairs: bool. Take sentence pairs (`text_a`, `text_b`) instead of
            single texts (`text`). Defaults to `False`.

    Example:

    >>> from kzoo import BertBackbone, BertClassifier, BertTokenizer
    >>> backbone = BertBackbone(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> model = BertClassifier(backbone, class_names=["no", "yes"],
    ...                        preprocessor=BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]))
    >>> serving = serve_classes(model, model.preprocessor, text_pairs=True)
    >>> [spec.name for spec in serving.inputs]
    ['text_a', 'text_b']
    >>> sorted(serving.function(tf.constant(["hi"]), tf.constant(["hi hi"])))
    ['class_ids', 'class_names', 'logits', 'probabilities']
    """

    def outputs(packed):
        logits = model(packed, training=False)
        if model.num_classes == 1:
            return {"scores": logits[:, 0]}
        class_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
        served = {"logits": logits, "probabilities": tf.nn.softmax(logits), "class_ids": class_ids}
        if model.class_names is not None:
            served["class_names"] = tf.gather(tf.constant(model.class_names), class_ids)
        return served

    return _text_inputs(model, preprocessor, text_pairs, outputs)


def serve_features(model, preprocessor, text_pairs=False):
    """A `kzoo.BertFeatureExtractor`'s serving (BERT sec. 5.3): `features`
    `(batch, sequence_length, features)` and the `padding_mask` that says
    which positions hold tokens.

    Args:
        model: `kzoo.BertFeatureExtractor`. The extractor.
        preprocessor: `kzoo.BertPreprocessor`. Its preprocessor.
        text_pairs: bool. Take sentence pairs (`text_a`, `text_b`). Defaults to `False`.

    Example:

    >>> from kzoo import BertBackbone, BertFeatureExtractor, BertTokenizer
    >>> backbone = BertBackbone(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> model = BertFeatureExtractor(backbone, strategy="last_hidden",
    ...     preprocessor=BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]))
    >>> served = serve_features(model, model.preprocessor).function(tf.constant(["hi"]))
    >>> tuple(served["features"].shape), served["padding_mask"].numpy().tolist()
    ((1, 8, 8), [[1, 1, 1, 0, 0, 0, 0, 0]])
    """

    def outputs(packed):
        # Packed to the request's ladder length; served at sequence_length, as `predict` gives them.
        features, mask = model(packed, training=False), packed["padding_mask"]
        missing = preprocessor.sequence_length - tf.shape(mask)[-1]
        sequence_axis = len(features.shape) - 2  # (batch, [L + 1,] sequence, features)
        widths = [[0, missing if axis == sequence_axis else 0] for axis in range(len(features.shape))]
        return {"features": tf.pad(features, widths), "padding_mask": tf.pad(mask, [[0, 0], [0, missing]])}

    return _text_inputs(model, preprocessor, text_pairs, outputs)


def serve_embeddings(model, preprocessor):
    """A `kzoo.BertTextEmbedder`'s serving (Sentence-BERT sec. 3): texts
    (`text`) in, `embeddings` `(batch, hidden_dim)` float32 out, pooled and
    (with `normalize`) of unit length, as `encode` gives them.

    Args:
        model: `kzoo.BertTextEmbedder`. The embedder.
        preprocessor: `kzoo.BertPreprocessor`. Its preprocessor.

    Example:

    >>> from kzoo import BertBackbone, BertTextEmbedder, BertTokenizer
    >>> backbone = BertBackbone(vocabulary_size=7, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> model = BertTextEmbedder(backbone,
    ...     preprocessor=BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat"]))
    >>> served = serve_embeddings(model, model.preprocessor).function(tf.constant(["a cat", "cat"]))
    >>> served["embeddings"].shape, served["embeddings"].dtype
    (TensorShape([2, 8]), tf.float32)
    """
    # Packed to the request's ladder length: pooling reads the real tokens only, so
    # the vectors are those of any longer padding.
    return Serving([strings("text")], lambda text: {"embeddings": model(preprocessor(text), training=False)})


def serve_tags(model, preprocessor):
    """A `kzoo.BertTokenClassifier`'s serving (BERT sec. 5.3): sentences
    (`text`, words separated by white space) in; per word, padded with ""
    / -1 to the longest sentence: `words`, `tag_ids` (the label at the
    word's first sub-token, -1 for a word cut off by truncation) and, with
    tags, `tags` ("O" for a cut-off word), as `predict_words`; and the
    token `logits`.

    Args:
        model: `kzoo.BertTokenClassifier`. The token classifier.
        preprocessor: `kzoo.BertTokenClassifierPreprocessor`. Its preprocessor.

    Example:

    >>> from kzoo import BertBackbone, BertTokenClassifier, BertTokenizer
    >>> backbone = BertBackbone(vocabulary_size=7, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> model = BertTokenClassifier(backbone, tags=["O", "B-LOC"],
    ...     preprocessor=BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "in", "rome"]))
    >>> served = serve_tags(model, model.preprocessor).function(tf.constant(["in rome", "rome"]))
    >>> served["words"].numpy().tolist(), served["tag_ids"].shape
    ([[b'in', b'rome'], [b'rome', b'']], TensorShape([2, 2]))
    """

    def function(text):
        words = tf.strings.split(text)  # (batch, None words), as predict_words reads strings
        logits = model(preprocessor(words), training=False)
        token_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)  # (batch, sequence_length)
        positions = preprocessor.word_positions(words).to_tensor(-1)  # (batch, words), -1: cut off or padding
        picked = tf.gather(token_ids, tf.maximum(positions, 0), batch_dims=1)
        tag_ids = tf.where(positions >= 0, picked, IGNORED_LABEL)
        served = {"words": words.to_tensor(""), "tag_ids": tag_ids, "logits": logits}
        if model.tags is not None:
            is_word = tf.sequence_mask(words.row_lengths(), tf.shape(positions)[1])
            tags = tf.where(tag_ids >= 0, tf.gather(tf.constant(model.tags), tf.maximum(tag_ids, 0)), OUTSIDE_TAG)
            served["tags"] = tf.where(is_word, tags, "")
        return served

    return Serving([strings("text")], function)


def serve_translations(model, preprocessor, beam_size=4, length_penalty=0.6, max_length=None):
    """A `kzoo.Transformer`'s serving ("Attention Is All You Need" sec. 6.1):
    source sentences (`text`) in, `translation` strings out, by beam search
    in the graph as `kzoo.translate`.

    Args:
        model: `kzoo.Transformer`. The trained model.
        preprocessor: `kzoo.TransformerPreprocessor`. The one it was trained
            with (its tokenizer and `source_length`).
        beam_size: int. Beams per sentence; 1 is greedy search. Defaults to `4`.
        length_penalty: float. GNMT's α. Defaults to `0.6`.
        max_length: int or None. The most tokens per translation. Defaults to
            `None`: source length + 50 (sec. 6.1).

    Example:

    >>> from kzoo import Transformer, TransformerPreprocessor, TransformerTokenizer
    >>> tokenizer = TransformerTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b"])
    >>> model = Transformer(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8,
    ...                     intermediate_dim=16, max_sequence_length=16)
    >>> serving = serve_translations(model, TransformerPreprocessor(tokenizer, 8, 8), beam_size=2, max_length=4)
    >>> serving.function(tf.constant(["a b"]))["translation"].shape
    TensorShape([1])
    """
    if preprocessor is None or not hasattr(preprocessor, "source_length"):
        raise ValueError(
            "Transformer.export needs the preprocessor the model was trained with: "
            "model.export(path, preprocessor=kzoo.TransformerPreprocessor(tokenizer, source_length, "
            f"target_length)); got {type(preprocessor).__name__}."
        )
    preprocessor.check_fits(model)
    search = {
        "beam_size": check_int(beam_size, "beam_size", "Transformer.export", hint="1 is greedy search."),
        "length_penalty": length_penalty,
        "max_length": None if max_length is None else check_int(max_length, "max_length", "Transformer.export"),
    }
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) or not length_penalty >= 0:
        raise ValueError(
            f"Transformer.export: length_penalty (GNMT's α) must be a number >= 0; got {length_penalty!r}."
        )
    tokenizer = preprocessor.tokenizer

    def function(text):
        source_ids = preprocessor(text)
        if isinstance(source_ids, tf.RaggedTensor):  # a preprocessor with pad=False
            source_ids = source_ids.to_tensor(tokenizer.padding_id, shape=[None, preprocessor.source_length])
        # Plain ops: XLA inside a SavedModel would compile again for every batch size.
        return {"translation": tokenizer.detokenize(model.generate(source_ids, **search, compiled=False))}

    return Serving([strings("text")], function)
