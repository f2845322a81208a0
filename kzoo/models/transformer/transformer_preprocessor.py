"""Source and target text to the Transformer's inputs and labels ("Attention Is
All You Need", sec. 3 and Figure 1: the decoder's input is the output
sequence "shifted right"; sec. 5.1: a shared source-target vocabulary).

TensorFlow (tensorflow-text) for every Keras backend: inside `tf.data` or
eagerly, its outputs feed `kzoo.Transformer` on TensorFlow, JAX or PyTorch.
"""

import keras
import tensorflow as tf

from kzoo.models.input_checks import check_ints
from kzoo.models.preprocessor import Preprocessor
from kzoo.models.transformer.transformer_tokenizer import TransformerTokenizer


@keras.saving.register_keras_serializable(package="kzoo")
class TransformerPreprocessor(Preprocessor):
    """Tokenizes translation pairs into the Transformer's inputs and labels (sec. 3, Figure 1).

    With `full = [BOS] + target ids + [EOS]`:

    - `encoder_token_ids` = source ids + `[EOS]`; a source longer than
      `source_length` keeps its first `source_length - 1` tokens and the
      `[EOS]` (the encoder always sees where its input ends);
    - `decoder_token_ids` = `full[:-1]` (the target shifted right behind
      `[BOS]`) and labels = `full[1:]` (the next token at every position),
      both cut to `target_length`: a truncated target is a window of the
      sequence, so its labels do not end with an `[EOS]` that the text lacks.

    Args:
        tokenizer: `kzoo.TransformerTokenizer`. The tokenizer, or any other
            with `padding_id`, `start_id` and `end_id`.
        source_length: int. The most encoder tokens, `[EOS]` included.
            Defaults to `256`.
        target_length: int. The most decoder tokens (and labels). Defaults to `256`.
        pad: bool. True pads every output with `padding_id` to
            `source_length` / `target_length` (fixed shapes); False keeps each
            example's own length (1-D per example, ragged for a batch), for
            `kzoo.data.batch_by_length` (sec. 5.1: batches by approximate
            length). Defaults to `True`.

    Call arguments:
        source: str or list of str. A batch of source strings (list, NumPy
            array or `tf.string` tensor) or a single string (as in
            `tf.data.Dataset.map`).
        target: str, list of str or None. The target strings, aligned with
            `source`. Defaults to `None`.

    Returns:
        With a target, `({"encoder_token_ids", "decoder_token_ids"}, labels)`;
        without, the `encoder_token_ids` alone (for `kzoo.Transformer.generate`).
        int32 `(batch, length)` tensors, or 1-D for a single string.

    Example:

    >>> from kzoo.models.transformer.transformer_tokenizer import TransformerTokenizer
    >>> tokenizer = TransformerTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b", "c"])
    >>> preprocessor = TransformerPreprocessor(tokenizer, source_length=4, target_length=4)
    >>> x, y = preprocessor(["a b", "a b c a b"], ["c c", "c"])
    >>> x["encoder_token_ids"].numpy().tolist()
    [[4, 5, 3, 0], [4, 5, 6, 3]]
    >>> x["decoder_token_ids"].numpy().tolist(), y.numpy().tolist()
    ([[2, 6, 6, 0], [2, 6, 0, 0]], [[6, 6, 3, 0], [6, 3, 0, 0]])
    >>> preprocessor("c").numpy().tolist()  # a source alone, for generate
    [6, 3, 0, 0]
    >>> unpadded = TransformerPreprocessor(tokenizer, source_length=4, target_length=4, pad=False)
    >>> x, y = unpadded("a b c a b", "c")  # one example, for kzoo.data.batch_by_length
    >>> x["encoder_token_ids"].numpy().tolist(), x["decoder_token_ids"].numpy().tolist(), y.numpy().tolist()
    ([4, 5, 6, 3], [2, 6], [6, 3])
    """

    tokenizer_class = TransformerTokenizer

    def __init__(self, tokenizer, source_length=256, target_length=256, pad=True):
        check_ints("TransformerPreprocessor", source_length=source_length, target_length=target_length)
        if not isinstance(pad, bool):
            raise ValueError(f"TransformerPreprocessor: pad must be True or False; got {pad!r}.")
        if source_length < 2 or target_length < 1:
            raise ValueError(
                f"source_length={source_length} and target_length={target_length} leave no room "
                "for text: the source needs a token and [EOS], the target a token; use 8 or more."
            )
        missing = [a for a in ("padding_id", "start_id", "end_id") if not hasattr(tokenizer, a)]
        if missing:
            raise ValueError(
                f"TransformerPreprocessor needs a tokenizer with padding_id, start_id and end_id "
                f"(a kzoo TransformerTokenizer); {type(tokenizer).__name__} lacks {missing}."
            )
        super().__init__(tokenizer)
        self.source_length = int(source_length)
        self.target_length = int(target_length)
        self.pad = bool(pad)

    def call(self, source, target=None):
        source_ids, scalar = self._tokenize(source)
        end = self._column(source_ids, self.tokenizer.end_id)
        encoder = tf.concat([source_ids[:, : self.source_length - 1], end], axis=1)
        encoder = self._finish(encoder, self.source_length, scalar)
        if target is None:
            return encoder
        target_ids, target_scalar = self._tokenize(target)
        if target_scalar != scalar:
            raise ValueError(
                "TransformerPreprocessor: give source and target both as single strings or both "
                "as batches of the same size."
            )
        rows = (source_ids.nrows(), target_ids.nrows())
        if tf.executing_eagerly() and int(rows[0]) != int(rows[1]):
            raise ValueError(
                f"TransformerPreprocessor: {int(rows[0])} sources but {int(rows[1])} targets; "
                "pass aligned batches."
            )
        start = self._column(target_ids, self.tokenizer.start_id)
        end = self._column(target_ids, self.tokenizer.end_id)
        full = tf.concat([start, target_ids, end], axis=1)
        decoder = self._finish(full[:, :-1][:, : self.target_length], self.target_length, scalar)
        labels = self._finish(full[:, 1:][:, : self.target_length], self.target_length, scalar)
        return {"encoder_token_ids": encoder, "decoder_token_ids": decoder}, labels

    def _tokenize(self, texts):
        """Ragged int32 `(batch, None)` ids, and whether `texts` was one string."""
        ids = self.tokenizer.tokenize(texts)
        if isinstance(ids, tf.RaggedTensor):
            return ids, False
        return tf.RaggedTensor.from_tensor(tf.expand_dims(ids, 0)), True

    @staticmethod
    def _column(ids, value):
        """A ragged `(batch, 1)` column of `value`, to concatenate with `ids`."""
        return tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], tf.constant(value, ids.dtype)))

    def _finish(self, ids, length, scalar):
        if self.pad:
            ids = ids.to_tensor(default_value=self.tokenizer.padding_id, shape=[None, length])
        return ids[0] if scalar else ids
