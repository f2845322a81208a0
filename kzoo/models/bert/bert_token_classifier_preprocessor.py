"""Word-level inputs and labels for token classification, e.g. named entity
recognition on CoNLL-2003 (BERT sec. 5.3).

BERT sec. 5.3: "we use the representation of the first sub-token as the input
to the token-level classifier over the NER label set". A sentence arrives as
words with one label each; every word is tokenized on its own, and its label
goes to its first token. All other positions get the label -1, which the
model's loss ignores (`ignore_class=-1`).

Runs in TensorFlow (tensorflow-text) for every Keras backend, eagerly or
inside `tf.data.Dataset.map`, like `kzoo.BertPreprocessor`.
"""

import keras
import numpy as np
import tensorflow as tf

from kzoo.data.packing import keep_first, pack_segments
from kzoo.models.bert.bert_tokenizer import BertTokenizer
from kzoo.models.input_checks import check_int
from kzoo.models.preprocessor import Preprocessor
from kzoo.tokenizers.inputs import to_string_tensor

IGNORED_LABEL = -1
OUTSIDE_TAG = "O"  # the tag of a word that gets no prediction (cut off by truncation)


def _words(x):
    """x as ragged words `(batch, None)` of tf.string."""
    expected = (
        "BertTokenClassifierPreprocessor expects a batch of sentences given as words: a "
        "tf.RaggedTensor of strings (batch, None), a list of lists of str, or a batch of "
        "whitespace-separated strings"
    )
    if isinstance(x, (str, bytes)):
        raise ValueError(f"{expected}; got a single string. Wrap one sentence in a list: [{x!r:.40}].")
    if isinstance(x, (list, tuple)) and x and all(isinstance(s, (list, tuple, np.ndarray)) for s in x):
        try:
            x = tf.ragged.constant([list(s) for s in x], dtype=tf.string)
        except (TypeError, ValueError):
            raise ValueError(f"{expected}; got lists of non-strings: {x!r:.80}.") from None
    elif not isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        try:
            x = to_string_tensor(x)
        except ValueError:
            raise ValueError(f"{expected}; got {x!r:.80}.") from None
    if x.dtype != tf.string:
        raise ValueError(f"{expected}; got a {x.dtype.name} tensor.")
    if isinstance(x, tf.RaggedTensor) and x.shape.rank == 2:
        return x
    if isinstance(x, tf.Tensor) and x.shape.rank == 2:
        return tf.RaggedTensor.from_tensor(x)  # e.g. `.batch` of equally long sentences
    if isinstance(x, tf.Tensor) and x.shape.rank == 1:
        return tf.strings.split(x)
    raise ValueError(f"{expected}; got a tensor of shape {x.shape}.")


def _word_labels(y):
    """y as ragged int32 labels `(batch, None words)`."""
    labels = y
    if isinstance(labels, np.ndarray):
        labels = tf.constant(labels)
    elif not isinstance(labels, (tf.Tensor, tf.RaggedTensor)):
        try:
            labels = tf.ragged.constant(labels)
        except (TypeError, ValueError):
            labels = None  # not label ids: reported just below
    if isinstance(labels, tf.Tensor) and labels.shape.rank == 2:
        labels = tf.RaggedTensor.from_tensor(labels)
    if not (isinstance(labels, tf.RaggedTensor) and labels.shape.rank == 2 and labels.dtype.is_integer):
        raise ValueError(
            "BertTokenClassifierPreprocessor labels must be integer label ids, one per word: "
            "a list of lists of int or a ragged/dense int tensor (batch, None words); map "
            f"tag strings to ids first. Got {y!r:.80}."
        )
    return tf.cast(labels, tf.int32)


def _require(condition, message, tensor):
    """`tensor` once `condition` holds: a ValueError eagerly; inside a graph
    (tf.data), an assertion that runs before anything computed from `tensor`."""
    if tf.executing_eagerly():
        if not bool(condition):
            raise ValueError(message)
        return tensor
    with tf.control_dependencies([tf.debugging.Assert(condition, [message])]):
        return tf.identity(tensor)


@keras.saving.register_keras_serializable(package="kzoo")
class BertTokenClassifierPreprocessor(Preprocessor):
    """Packs sentences given as words, with one label per word, for token
    classification: the label goes to the word's first sub-token (BERT sec. 5.3).

    Each word is tokenized on its own by `tokenizer.tokenize` and all its
    tokens belong to it: "playing" may give `play ##ing`, "U.S." gives
    `u . s .` (punctuation splits). A word that gives no token at all (an
    empty string, or only control characters) becomes one `[UNK]`, so every
    word has a first sub-token and keeps its label. The tokens are packed as
    `[CLS] tokens [SEP]` and padded to `sequence_length`.

    Truncation keeps the first `sequence_length - 2` tokens, as Hugging Face's
    `truncation=True`: the words whose first sub-token fits are kept, with
    their label (a word cut mid-way keeps the sub-tokens that fit); words
    after that are dropped, and `word_positions` reports them as -1.

    Args:
        tokenizer: `kzoo.BertTokenizer`. The WordPiece tokenizer.
        sequence_length: int. The fixed output length (3 or more). Defaults to `128`.
        padding: str. `"longest"`: each batch padded only to the ladder length
            (`kzoo.data.length_ladder`) at or above its longest text;
            `"max_length"`: to `sequence_length`. Defaults to `"longest"`.

    Call arguments:
        x: list of lists of str or `tf.RaggedTensor`. A batch of sentences
            as words: a `tf.RaggedTensor` of strings `(batch, None)`, a list
            of lists of str, a dense `(batch, words)` string tensor, or a
            batch (list, numpy array, 1-D `tf.string` tensor) of sentences
            whose words are separated by white space. In `tf.data`, map after
            `ragged_batch`/`batch`: one unbatched sentence of words would be
            read as a batch of sentences.
        y: list of lists of int, tensor or None. Word labels, non-negative
            ints `(batch, None words)` matching x's words (a ragged or dense
            tensor). Defaults to `None`.
        sample_weight: tensor or None. Passed through (one weight per
            sentence). Defaults to `None`.

    Returns:
        The features `{"token_ids", "segment_ids", "padding_mask"}`, int32
        `(batch, sequence_length)`, or `(features, labels[, sample_weight])`
        with labels int32 `(batch, sequence_length)`: a word's label at its
        first sub-token, -1 elsewhere ([CLS], [SEP], later sub-tokens, padding).

    Example:

    >>> from kzoo import BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...               "john", "visit", "##s", "the", "u", ".", "s"]
    >>> preprocessor = BertTokenClassifierPreprocessor(BertTokenizer(vocabulary), sequence_length=12)
    >>> features, labels = preprocessor([["John", "visits", "the", "U.S."]], [[1, 0, 0, 2]])
    >>> features["token_ids"].numpy().tolist()
    [[2, 5, 6, 7, 8, 9, 10, 11, 10, 3, 0, 0]]
    >>> labels.numpy().tolist()
    [[-1, 1, 0, -1, 0, 2, -1, -1, -1, -1, -1, -1]]
    >>> preprocessor.word_positions(["John visits the U.S."]).to_list()
    [[1, 2, 4, 5]]
    """

    tokenizer_class = BertTokenizer
    labels_per_token = True  # cut with the tokens when padding is cut

    def __init__(self, tokenizer, sequence_length=128, padding="longest"):
        check_int(sequence_length, "sequence_length", "BertTokenClassifierPreprocessor")
        if sequence_length < 3:
            raise ValueError(
                f"sequence_length={sequence_length} leaves no room for words: [CLS] and "
                "[SEP] take two positions; use 3 or more (128 is typical for NER)."
            )
        super().__init__(tokenizer, padding)
        self.sequence_length = int(sequence_length)

    def call(self, x, y=None, sample_weight=None):
        pieces = self._word_pieces(x)
        tokens = self._truncate(pieces.merge_dims(1, 2))
        features = pack_segments([tokens], self.tokenizer, self.sequence_length)
        if y is not None:
            y = self._token_labels(pieces, _word_labels(y))
        return keras.utils.pack_x_y_sample_weight(features, y, sample_weight)

    def word_positions(self, x):
        """The index in the packed tokens of each word's first sub-token, -1
        for a word cut off by truncation: per-token predictions at these
        positions are the per-word predictions (BERT sec. 5.3).

        Args:
            x: list of lists of str or `tf.RaggedTensor`. Sentences as words,
                as for calling the preprocessor.

        Returns:
            Ragged int32 `(batch, None words)`, aligned with x's words
            (`.to_tensor(-1)` for a dense one). The words kept are those at
            positions >= 0; `tf.gather(token_predictions, positions.to_tensor(0),
            batch_dims=1)` picks their predictions from `(batch, sequence_length)`.

        Example:

        >>> from kzoo import BertTokenizer
        >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "play", "##ing", "go"])
        >>> preprocessor = BertTokenClassifierPreprocessor(tokenizer, sequence_length=5)
        >>> preprocessor.word_positions([["go", "playing", "go"], ["go"]]).to_list()
        [[1, 2, -1], [1]]
        """
        is_first = self._is_first_piece(self._word_pieces(x)).merge_dims(1, 2)  # (batch, tokens)
        token_index = tf.ragged.range(tf.cast(is_first.row_lengths(), tf.int32))
        starts = tf.ragged.boolean_mask(token_index, is_first)  # (batch, words), [CLS] not counted
        kept = starts.flat_values < self._budget()
        return starts.with_flat_values(tf.where(kept, starts.flat_values + 1, -1))  # +1: [CLS]

    def _budget(self):
        return self.sequence_length - 2  # [CLS] and [SEP]

    def _truncate(self, tokens):
        """The first `sequence_length - 2` items of each row of `(batch, None)`."""
        return keep_first(tokens, tf.fill([tokens.nrows()], self._budget()))

    def _word_pieces(self, x):
        """Token ids `(batch, words, pieces)`; a word with no token is one [UNK]."""
        words = _words(x)
        pieces = self.tokenizer.tokenize(words.flat_values)  # (words, pieces)
        unknown = tf.fill([pieces.nrows(), 1], tf.constant(self.tokenizer.unknown_token_id, pieces.dtype))
        pieces = keep_first(
            tf.concat([pieces, tf.RaggedTensor.from_tensor(unknown)], axis=1),
            tf.maximum(pieces.row_lengths(), 1),
        )
        return tf.RaggedTensor.from_row_splits(pieces, words.row_splits)

    @staticmethod
    def _is_first_piece(pieces):
        """True at each word's first sub-token, `(batch, words, pieces)`."""
        word_pieces = pieces.values  # (words, pieces)
        index = tf.ragged.range(word_pieces.row_lengths())
        return pieces.with_values(tf.equal(index, 0))

    def _token_labels(self, pieces, labels):
        """Word labels at each word's first sub-token, packed like the tokens."""
        counts = pieces.row_lengths()  # words per sentence
        same_counts = tf.cond(
            tf.equal(labels.nrows(), pieces.nrows()),
            lambda: tf.reduce_all(tf.equal(labels.row_lengths(), counts)),
            lambda: tf.constant(False),
        )
        flat = _require(
            same_counts,
            "BertTokenClassifierPreprocessor: the labels must give one label per word; "
            "their number of sentences or of words per sentence differs from the inputs'. "
            "Split the text into words the same way as the labels (or pass the words).",
            labels.flat_values,
        )
        flat = _require(
            tf.reduce_all(flat >= 0),
            "BertTokenClassifierPreprocessor: labels must be non-negative label ids "
            "(-1 is reserved for the positions the loss ignores).",
            flat,
        )
        is_first = self._is_first_piece(pieces)
        at_first = tf.where(
            is_first.flat_values, tf.repeat(flat, pieces.values.row_lengths()), IGNORED_LABEL
        )
        token_labels = self._truncate(is_first.with_flat_values(at_first).merge_dims(1, 2))
        ignored = tf.RaggedTensor.from_tensor(tf.fill([token_labels.nrows(), 1], IGNORED_LABEL))
        packed = tf.concat([ignored, token_labels, ignored], axis=1)  # [CLS] labels [SEP]
        return packed.to_tensor(IGNORED_LABEL, shape=[None, self.sequence_length])
