"""Packing a context with each candidate continuation for multiple choice (BERT sec. 4.4)."""

import keras
import tensorflow as tf

from kzoo.models.bert.bert_preprocessor import pair_length, truncate_and_pack
from kzoo.models.bert.bert_tokenizer import BertTokenizer
from kzoo.models.preprocessor import Preprocessor
from kzoo.tokenizers.inputs import to_string_tensor


@keras.saving.register_keras_serializable(package="kzoo")
class BertMultipleChoicePreprocessor(Preprocessor):
    """Packs a context with each of its candidate continuations (BERT sec. 4.4).

    "We construct four input sequences, each containing the concatenation of
    the given sentence (sentence A) and a possible continuation (sentence B)."
    Each pair is packed as `kzoo.BertPreprocessor` packs pairs
    (`[CLS] A [SEP] B [SEP]`, longest-first truncation).

    Args:
        tokenizer: `kzoo.BertTokenizer`. The WordPiece tokenizer.
        sequence_length: int. The packed length of each pair. Defaults to `512`.
        padding: str. `"longest"`: each batch padded only to the ladder length
            (`kzoo.data.length_ladder`) at or above its longest text;
            `"max_length"`: to `sequence_length`. Defaults to `"longest"`.

    Call arguments:
        x: tuple. `(contexts, choices)`: `contexts` a batch of strings
            `(batch,)`, `choices` strings `(batch, num_choices)`.
        y: int tensor of shape `(batch,)` or None. The index of the right
            choice per example, passed through. Defaults to `None`.
        sample_weight: tensor or None. Weights, passed through. Defaults to `None`.

    Returns:
        A dict of int32 tensors `(batch, num_choices, sequence_length)`, or
        `(dict, y[, sample_weight])`.

    Example:

    >>> from kzoo import BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "he", "ran", "sat", "away"]
    >>> preprocessor = BertMultipleChoicePreprocessor(BertTokenizer(vocabulary), sequence_length=6)
    >>> out = preprocessor((["he"], [["ran away", "sat"]]))
    >>> out["token_ids"].numpy().tolist()
    [[[2, 5, 3, 6, 8, 3], [2, 5, 3, 7, 3, 0]]]
    """

    tokenizer_class = BertTokenizer

    def __init__(self, tokenizer, sequence_length=512, padding="longest"):
        super().__init__(tokenizer, padding)
        self.sequence_length = pair_length(sequence_length, "BertMultipleChoicePreprocessor", minimum=5)

    def call(self, x, y=None, sample_weight=None):
        if not isinstance(x, tuple) or len(x) != 2:
            raise ValueError(
                "BertMultipleChoicePreprocessor takes x = (contexts, choices): a batch of "
                "contexts (batch,) and their candidate continuations (batch, num_choices); "
                f"got {type(x).__name__}."
            )
        contexts, choices = to_string_tensor(x[0]), to_string_tensor(x[1])
        if contexts.shape.rank != 1 or choices.shape.rank != 2:
            raise ValueError(
                "Multiple choice takes contexts of shape (batch,) and choices of shape "
                f"(batch, num_choices); got {contexts.shape} and {choices.shape}."
            )
        num_choices = tf.shape(choices)[1]
        firsts = tf.repeat(contexts, num_choices)  # (batch * num_choices,)
        seconds = tf.reshape(choices, [-1])
        segments = [self.tokenizer.tokenize(firsts), self.tokenizer.tokenize(seconds)]
        packed = truncate_and_pack(segments, self.tokenizer, self.sequence_length)
        shape = [-1, num_choices, self.sequence_length]
        packed = {key: tf.reshape(value, shape) for key, value in packed.items()}
        return keras.utils.pack_x_y_sample_weight(packed, y, sample_weight)
