"""The Transformer's shared source-target subword tokenizer ("Attention Is All
You Need", sec. 5.1: "a shared source-target vocabulary of about 37000 tokens").

The paper used byte-pair encoding for English-German and word-pieces for
English-French; kzoo uses WordPiece on tensorflow-text for both, with BERT's
text normalization (`kzoo.tokenizers.WordPieceTokenizer`, also the core of
`kzoo.BertTokenizer`), cased by default: a translation keeps the case of its
source.

One difference from BERT makes `detokenize` the exact inverse of `tokenize`
(up to white space, which becomes single spaces): a word written against the
previous one, with no space between ("file," "(Datei" "»%s«" "E-Mail"), is
segmented into continuation pieces (`##,` `##Dat` `##ei`), so that joining
the pieces gives back the text. BERT's tokenizer would give `file` `,` and
detokenize it as "file ,", which costs about 30 BLEU points on software
messages against the untokenized references sacreBLEU expects (sec. 6.1).
"""

import keras
import tensorflow as tf

from kzoo.tokenizers.wordpiece_tokenizer import WordPieceTokenizer
from kzoo.tokenizers.wordpiece_vocabulary import learn_wordpiece_vocabulary

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")
# Hidden first piece of a word written against the previous one: it matches
# no vocabulary token's start (the normalizer removes control characters from
# the text), so the word's own pieces are all continuation (`##`) pieces.
GLUE = "\x01"


@keras.saving.register_keras_serializable(package="kzoo")
class TransformerTokenizer(WordPieceTokenizer):
    """The shared source-target WordPiece tokenizer of the Transformer
    ("Attention Is All You Need", sec. 5.1), graph-mode TensorFlow.

    Special tokens: `[PAD]` (`padding_id`), `[UNK]`, `[BOS]` (`start_id`,
    begins every decoder input) and `[EOS]` (`end_id`, ends every sequence);
    `TransformerTokenizer.train` puts them first, as ids 0, 1, 2 and 3, which
    `kzoo.Transformer` assumes by default.

    Args:
        vocabulary: str or list of str. A vocabulary file (one token per
            line) or the tokens, in id order, with `[PAD]`, `[UNK]`, `[BOS]`
            and `[EOS]`.
        lowercase: bool. `True` lower-cases and strips accents; `False`
            keeps the case of the text. Defaults to `False`.
        **kwargs: `strip_accents`, `unknown_token`, `suffix_indicator` and
            `max_input_chars_per_word`, as for
            `kzoo.tokenizers.WordPieceTokenizer`.

    Call `tokenizer(inputs)` (or `tokenize`) on a str, a list of str, a numpy
    array or a tf.string tensor: int32 ids, ragged `(batch, None)` for a
    batch, 1-D for a scalar string (as inside `tf.data.Dataset.map`);
    `sequence_length=N` gives a dense `(batch, N)` tensor padded with `[PAD]`.

    Example:

    >>> vocabulary = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "Hallo", "Welt",
    ...               "hallo", "##,", "##!", "!", "E", "##-", "##M", "##ail"]
    >>> tokenizer = TransformerTokenizer(vocabulary)
    >>> tokenizer(["Hallo, Welt!", "hallo E-Mail !"]).to_list()
    [[4, 7, 5, 8], [6, 10, 11, 12, 13, 9]]
    >>> tokenizer.detokenize([[4, 7, 5, 8, 3, 0], [2, 6, 10, 11, 12, 13, 9]]).numpy().tolist()
    [b'Hallo, Welt!', b'hallo E-Mail !']
    >>> tokenizer.padding_id, tokenizer.start_id, tokenizer.end_id, tokenizer.vocabulary_size()
    (0, 2, 3, 14)
    """

    special_tokens = {"padding_id": "[PAD]", "start_id": "[BOS]", "end_id": "[EOS]"}
    hidden_pieces = (GLUE,)

    def __init__(self, vocabulary, lowercase=False, **kwargs):
        super().__init__(vocabulary, lowercase=lowercase, **kwargs)

    @classmethod
    def train(cls, texts, vocabulary_size, lowercase=False, progress=True, **kwargs):
        """A tokenizer with a WordPiece vocabulary of at most `vocabulary_size`
        tokens learned from `texts`, both languages' sentences together (the
        shared source-target vocabulary of sec. 5.1), `[PAD]`, `[UNK]`,
        `[BOS]`, `[EOS]` first. `kwargs` go to `kzoo.learn_wordpiece_vocabulary`.

        >>> texts = ["the house is small", "das Haus ist klein"] * 20
        >>> tokenizer = TransformerTokenizer.train(texts, 60, progress=False)
        >>> tokenizer.get_vocabulary()[:4], tokenizer.vocabulary_size() <= 60
        (['[PAD]', '[UNK]', '[BOS]', '[EOS]'], True)
        >>> tokenizer.detokenize(tokenizer("das Haus ist small")).numpy()
        b'das Haus ist small'
        """
        vocabulary = learn_wordpiece_vocabulary(
            texts, vocabulary_size, lowercase=lowercase, reserved_tokens=RESERVED_TOKENS,
            progress=progress, **kwargs,
        )
        return cls(vocabulary, lowercase=lowercase)

    def _word_pieces(self, words, word_starts, word_ends):
        # A word that starts where the previous word of its text ends is
        # tokenized behind the hidden GLUE piece, then GLUE is dropped.
        starts = word_starts.flat_values
        previous_ends = tf.concat([[-1], word_ends.flat_values[:-1]], axis=0)
        not_first = tf.ragged.range(word_starts.row_lengths()).flat_values > 0
        glued = tf.equal(starts, tf.cast(previous_ends, starts.dtype)) & not_first
        glued &= tf.not_equal(words.flat_values, self.unknown_token)  # a too-long word
        marked = tf.where(glued, GLUE + words.flat_values, words.flat_values)
        ids, starts, ends = self._wordpiece.tokenize_with_offsets(marked)
        shift = tf.expand_dims(tf.cast(glued, starts.dtype) * len(GLUE), 1)
        keep = tf.not_equal(ids, len(self.vocabulary))
        return (
            tf.ragged.boolean_mask(ids, keep),
            tf.ragged.boolean_mask(tf.maximum(starts - shift, 0), keep),
            tf.ragged.boolean_mask(tf.maximum(ends - shift, 0), keep),
        )

    def detokenize(self, ids):
        """Text from token ids (sec. 5.1's subwords joined back): each row
        stops at its first `[EOS]`; `[PAD]` and `[BOS]` are dropped;
        continuation pieces are joined to the previous piece, words separated
        by single spaces. A batch `(batch, length)` (dense, ragged or nested
        lists) gives a 1-D tf.string tensor, one sequence a scalar.

        >>> tokenizer = TransformerTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "go", "##ne", "##!"])
        >>> tokenizer.detokenize([2, 4, 5, 6, 3, 4, 0]).numpy()
        b'gone!'
        """
        ids = _as_dense_int32(ids, self.padding_id)
        scalar = ids.shape.rank == 1
        if scalar:
            ids = tf.expand_dims(ids, 0)
        # Positions before the first [EOS] of each row, on the dense ids: eagerly
        # (translate's every batch) 3 ms for 64 x 66 ids, 20 with ragged ops.
        before_end = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, self.end_id), tf.int32), axis=1), 0)
        keep = before_end & tf.not_equal(ids, self.padding_id) & tf.not_equal(ids, self.start_id)
        text = self._pieces_to_text(tf.ragged.boolean_mask(ids, keep))
        return text[0] if scalar else text


def _as_dense_int32(ids, padding_id):
    """int32 ids as a dense `(length,)` or `(batch, length)` tensor; ragged rows
    are padded with `padding_id`, which detokenizing drops."""
    if isinstance(ids, tf.RaggedTensor):
        return tf.cast(ids, tf.int32).to_tensor(padding_id)
    if not isinstance(ids, tf.Tensor):
        ids = keras.ops.convert_to_numpy(ids) if hasattr(ids, "shape") else ids
        try:
            ids = tf.constant(ids, tf.int32)
        except ValueError:  # rows of different lengths
            return tf.ragged.constant(ids, dtype=tf.int32).to_tensor(padding_id)
    ids = tf.cast(ids, tf.int32)
    if ids.shape.rank not in (1, 2):
        raise ValueError(
            f"TransformerTokenizer.detokenize expects token ids of shape (length,) or "
            f"(batch, length); got shape {tuple(ids.shape)}."
        )
    return ids
