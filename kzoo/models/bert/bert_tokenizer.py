"""BERT's WordPiece tokenizer (Devlin et al., 2019, sec. 3: a ~30k WordPiece
vocabulary with `##` continuation pieces), on tensorflow-text's compiled ops.

The text is normalized exactly as Hugging Face's `BertTokenizerFast` (the
`tokenizers` `BertNormalizer` + `BertPreTokenizer`) and the original
google-research `tokenization.py` do:

1. clean text: drop NUL, U+FFFD and every character of Unicode category C
   (Cc, Cf, Co, Cs: control and format characters, zero-width spaces, BOM)
   except tab, newline and carriage return; every Unicode white-space
   character (`White_Space`, e.g. NBSP, U+2009, U+3000) becomes a space;
2. CJK ideographs are surrounded by spaces (one token per character);
3. uncased (`lowercase=True`): NFD, drop non-spacing marks (category Mn:
   accents), then Unicode lower-casing ("Café" -> "cafe");
4. split on white space and punctuation (ASCII punctuation and category P*),
   each punctuation character its own word;
5. greedy longest-match-first WordPiece per word; a word with no segmentation
   or longer than `max_input_chars_per_word` (100) characters is `[UNK]`.

Steps 1-3 run per character (vectorized), so each token's byte offsets point
back into the original string. Step 5 is tensorflow-text's
`FastWordpieceTokenizer` (the core of `FastBertTokenizer`, linear time).

Why not `tf_text.BertTokenizer` or `tf_text.FastBertTokenizer` as they are:
both normalize uncased text with NFKC case folding ("…" -> "...",
"①" -> "1", "ﬁ" -> "fi") and split cased text only on ASCII white space
(RE2 `\\s`), so on a varied corpus they disagree with Hugging Face on about a
fifth (uncased) and most (cased) sentences; `FastBertTokenizer` also counts
the 100-character word limit in bytes. The normalizer here removes those
differences.
"""

import os

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from kzoo import presets

SPECIAL_TOKENS = {
    "pad_token_id": "[PAD]",
    "cls_token_id": "[CLS]",
    "sep_token_id": "[SEP]",
    "mask_token_id": "[MASK]",
}

# Unicode category C (control, format, private use, surrogate) except \t \n \r,
# plus U+FFFD: removed (Hugging Face `BertNormalizer` clean_text).
_CONTROL = r"[^\P{C}\t\n\r]|\x{fffd}"
# Rust `char::is_whitespace` (the `White_Space` property), as Hugging Face.
_WHITESPACE = (
    r"[\t\n\r\x{0b}\x{0c} \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"
)
# CJK Unified Ideographs and extensions, as google-research `_is_chinese_char`.
_CJK = (
    r"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
    r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}])"
)
# ASCII punctuation (symbols such as $ + < = > ^ ` | ~ included) and category P.
_PUNCTUATION = r"[!-/:-@\[-`{-~]|\p{P}"
MAX_INPUT_CHARS_PER_WORD = 100


def read_vocabulary(vocabulary):
    """A vocabulary as a list of tokens (BERT sec. 3): a list, or a file of
    one token per line (only "\\n" and "\\r\\n" end a line, as in Hugging Face;
    Unicode line separators stay inside tokens).

    >>> read_vocabulary(["[PAD]", "a"])
    ['[PAD]', 'a']
    """
    if isinstance(vocabulary, (str, os.PathLike)):
        path = os.fspath(vocabulary)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Vocabulary file not found: {path!r}")
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]
    if isinstance(vocabulary, (list, tuple, np.ndarray)):
        tokens = [t.decode("utf-8") if isinstance(t, bytes) else t for t in list(vocabulary)]
        if not all(isinstance(t, str) for t in tokens):
            raise ValueError("`vocabulary` must be a file path or a list of strings.")
        return tokens
    raise ValueError(
        f"`vocabulary` must be a file path or a list of strings, got {type(vocabulary).__name__}."
    )


def to_string_tensor(inputs, caller="BertTokenizer"):
    """Converts str / list / numpy / tf.string input to a tf.string tensor,
    raising a clear ValueError for anything that is not text (BERT sec. 3).

    >>> to_string_tensor(["a b"]).dtype.name
    'string'
    """
    if isinstance(inputs, (tf.Tensor, tf.RaggedTensor)):
        if inputs.dtype != tf.string:
            raise ValueError(
                f"{caller} expected strings (tf.string), got a {inputs.dtype.name} tensor."
            )
        return inputs
    if isinstance(inputs, (str, bytes)):
        return tf.constant(inputs)
    array = np.asarray(inputs, dtype=object) if not isinstance(inputs, np.ndarray) else inputs
    if array.dtype.kind in ("U", "S") or (
        array.dtype == object and all(isinstance(x, (str, bytes)) for x in array.reshape(-1))
    ):
        return tf.constant(array.astype(object) if array.dtype.kind == "U" else array, dtype=tf.string)
    raise ValueError(f"{caller} expected strings, got {array.dtype} input: {inputs!r:.80}")


def _normalize(chars, lowercase, strip_accents):
    """BERT's normalization (sec. 3), character by character: of a flat tensor
    of single characters (to keep offsets) or of whole strings (the same text:
    every rule below acts on one character at a time)."""
    chars = tf.strings.regex_replace(chars, _CONTROL, "")
    chars = tf.strings.regex_replace(chars, _WHITESPACE, " ")
    chars = tf.strings.regex_replace(chars, _CJK, r" \1 ")
    if lowercase if strip_accents is None else strip_accents:
        chars = tf_text.normalize_utf8(chars, "NFD")
        chars = tf.strings.regex_replace(chars, r"\p{Mn}", "")
    if lowercase:
        # Σ first: ICU lower-cases a word-final Σ to ς in whole strings (the
        # one context-dependent mapping), never a single character.
        chars = tf.strings.lower(tf.strings.regex_replace(chars, "Σ", "σ"), encoding="utf-8")
    return chars


def split_words(strings, lowercase=True, strip_accents=None):
    """BERT's basic tokenization (sec. 3): normalize, then split on white
    space and punctuation. `strings` is 1-D; returns ragged words.

    >>> split_words(tf.constant(["Café, 字字"])).to_list()
    [[b'cafe', b',', b'\xe5\xad\x97', b'\xe5\xad\x97']]
    """
    text = _normalize(strings, lowercase, strip_accents)
    return tf_text.regex_split(text, r"\s+|" + _PUNCTUATION, _PUNCTUATION)


class WordPieceTokenizer:
    """BERT's normalization and WordPiece (BERT sec. 3) over any vocabulary:
    the core of `BertTokenizer` and of the Transformer's `TransformerTokenizer`.

    A subclass lists its special tokens in `special_tokens` (`{attribute:
    token}`: each token must be in the vocabulary and its id becomes that
    attribute) and pads with `padding_token`. The arguments and the call are
    those of `BertTokenizer`, whose docstring has the examples.
    """

    special_tokens = {}
    padding_token = "[PAD]"
    hidden_pieces = ()  # pieces after the vocabulary, for a subclass's `_word_pieces`

    def __init__(
        self,
        vocabulary,
        lowercase=True,
        strip_accents=None,
        unknown_token="[UNK]",
        suffix_indicator="##",
        max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
        **kwargs,
    ):
        kwargs.pop("name", None)
        kwargs.pop("dtype", None)
        kwargs.pop("trainable", None)
        if kwargs:
            raise ValueError(f"Unknown {type(self).__name__} arguments: {sorted(kwargs)}")
        self.vocabulary = read_vocabulary(vocabulary)
        self.lowercase = bool(lowercase)
        self.strip_accents = strip_accents
        self.unknown_token = unknown_token
        self.suffix_indicator = suffix_indicator
        self.max_input_chars_per_word = int(max_input_chars_per_word)

        index = {}
        for i, token in enumerate(self.vocabulary):
            index.setdefault(token, i)
        required = {**self.special_tokens, "unknown_token_id": unknown_token}
        missing = [token for token in required.values() if token not in index]
        if missing:
            raise ValueError(
                f"The vocabulary lacks the special token(s) {missing}; a {type(self).__name__} "
                f"vocabulary needs {', '.join(dict.fromkeys(required.values()))}."
            )
        for attribute, token in required.items():
            setattr(self, attribute, index[token])
        self._index = index
        self._padding_id = index[self.padding_token]

        # Duplicate tokens (allowed in a vocabulary file, where the first wins)
        # are made unique for the compiled model; they can never be produced.
        unique = [
            token if index[token] == i else f"\x00kzoo-duplicate-{i}"
            for i, token in enumerate(self.vocabulary)
        ]
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=unique + list(self.hidden_pieces),
            suffix_indicator=suffix_indicator,
            max_bytes_per_word=4 * self.max_input_chars_per_word + 16,
            token_out_type=tf.int32,
            unknown_token=unknown_token,
            no_pretokenization=True,
            support_detokenization=True,
        )
        self._vocabulary_tensor = tf.constant(self.vocabulary, dtype=tf.string)

    # === Tokenization ===

    def _tokenize(self, strings):
        """strings: 1-D tf.string. Returns ragged (ids, starts, ends), int32/int64."""
        chars, char_starts = tf.strings.unicode_split_with_offsets(strings, "UTF-8")
        # Original byte offsets of each character (flat) and its normalized text.
        original_starts = char_starts.flat_values
        original_ends = original_starts + tf.cast(tf.strings.length(chars.flat_values), tf.int64)
        normalized = _normalize(chars.flat_values, self.lowercase, self.strip_accents)
        normalized_lengths = tf.strings.length(normalized)
        text = tf.strings.reduce_join(chars.with_flat_values(normalized), axis=-1)
        words, word_starts, word_ends, too_long, (ids, piece_starts, piece_ends) = self._pieces_of(text)
        flat_word_starts = tf.cast(word_starts.flat_values, tf.int64)
        piece_starts = tf.cast(piece_starts, tf.int64) + tf.expand_dims(flat_word_starts, 1)
        piece_ends = tf.cast(piece_ends, tf.int64) + tf.expand_dims(flat_word_starts, 1)
        # A too-long word is one [UNK] spanning the whole word.
        word_lengths = tf.cast(word_ends.flat_values, tf.int64) - flat_word_starts
        piece_ends = tf.where(
            tf.expand_dims(too_long, 1), piece_starts + tf.expand_dims(word_lengths, 1), piece_ends
        )
        ids = words.with_flat_values(ids).merge_dims(-2, -1)
        piece_starts = words.with_flat_values(piece_starts).merge_dims(-2, -1)
        piece_ends = words.with_flat_values(piece_ends).merge_dims(-2, -1)

        # Map normalized byte offsets back to the original string: global
        # positions over the whole batch, then the character they fall in.
        normalized_row_lengths = tf.math.segment_sum(
            tf.cast(normalized_lengths, tf.int64), chars.value_rowids()
        )
        num_rows = tf.shape(strings, out_type=tf.int64)[0]
        normalized_row_lengths = tf.concat(
            [
                normalized_row_lengths,
                tf.zeros([num_rows - tf.shape(normalized_row_lengths, out_type=tf.int64)[0]], tf.int64),
            ],
            0,
        )
        row_base = tf.cumsum(normalized_row_lengths, exclusive=True)
        char_positions = tf.cumsum(tf.cast(normalized_lengths, tf.int64), exclusive=True)
        # Character index owning a normalized byte; skip empty (removed) characters.
        token_row_base = tf.gather(row_base, ids.value_rowids())
        global_starts = piece_starts.flat_values + token_row_base
        global_last = piece_ends.flat_values - 1 + token_row_base
        start_char = tf.searchsorted(char_positions, global_starts, side="right") - 1
        last_char = tf.searchsorted(char_positions, global_last, side="right") - 1
        start_char = tf.maximum(start_char, 0)
        last_char = tf.maximum(last_char, 0)
        starts = ids.with_flat_values(tf.gather(original_starts, start_char))
        ends = ids.with_flat_values(tf.gather(original_ends, last_char))
        return ids, starts, ends

    def _pieces_of(self, text):
        """Words of normalized `text` (1-D), a too-long word as `[UNK]`, and
        their pieces: `(words, word_starts, word_ends, too_long, (ids,
        piece_starts, piece_ends))`, pieces ragged `(all words, pieces)`."""
        words, word_starts, word_ends = tf_text.regex_split_with_offsets(
            text, r"\s+|" + _PUNCTUATION, _PUNCTUATION
        )
        too_long = (
            tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self.max_input_chars_per_word
        )
        words = words.with_flat_values(
            tf.where(too_long, tf.constant(self.unknown_token), words.flat_values)
        )
        return words, word_starts, word_ends, too_long, self._word_pieces(words, word_starts, word_ends)

    def _token_ids(self, strings):
        """strings: 1-D tf.string. Returns ragged int32 ids: `_tokenize`
        without offsets, normalizing whole strings (7.5x faster)."""
        text = _normalize(strings, self.lowercase, self.strip_accents)
        words, _, _, _, (ids, _, _) = self._pieces_of(text)
        return words.with_flat_values(ids).merge_dims(-2, -1)

    def _word_pieces(self, words, word_starts, word_ends):
        """WordPiece of each word (ragged `(batch, words)` strings with their
        byte spans in the normalized text): ids and piece offsets relative to
        the word, ragged `(all words, pieces)`."""
        return self._wordpiece.tokenize_with_offsets(words.flat_values)

    def _prepare(self, inputs):
        strings = to_string_tensor(inputs, type(self).__name__)
        if isinstance(strings, tf.RaggedTensor):
            raise ValueError(f"{type(self).__name__} expects a scalar or 1-D batch of strings.")
        rank = strings.shape.rank
        if rank is None or rank > 1:
            raise ValueError(
                f"{type(self).__name__} expects a scalar string or a 1-D batch of strings, "
                f"got shape {strings.shape}."
            )
        return strings, rank == 0

    def tokenize(self, inputs, sequence_length=None):
        """Token ids (BERT sec. 3): ragged int32 `(batch, None)`, a 1-D tensor
        for a scalar string, or dense `(batch, sequence_length)` padded with
        `[PAD]` and truncated when `sequence_length` is given.

        >>> tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
        >>> tok.tokenize(["hi hi", "hi"]).to_list()
        [[5, 5], [5]]
        """
        strings, scalar = self._prepare(inputs)
        ids = self._token_ids(tf.reshape(strings, [-1]))
        ids = ids[0] if scalar else ids
        if sequence_length is not None:
            if isinstance(ids, tf.RaggedTensor):
                return ids.to_tensor(
                    default_value=self._padding_id, shape=[None, sequence_length]
                )
            ids = ids[:sequence_length]
            return tf.pad(ids, [[0, sequence_length - tf.shape(ids)[0]]], constant_values=self._padding_id)
        return ids

    def __call__(self, inputs, sequence_length=None):
        return self.tokenize(inputs, sequence_length=sequence_length)

    def tokenize_with_offsets(self, inputs):
        """(ids, start_offsets, end_offsets): each token's byte span in the
        original string, e.g. for SQuAD answer spans (BERT sec. 4.2).

        >>> tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "!"])
        >>> ids, starts, ends = tok.tokenize_with_offsets(["Café!"])
        >>> ids.to_list(), starts.to_list(), ends.to_list()
        ([[5, 6]], [[0, 5]], [[5, 6]])
        """
        strings, scalar = self._prepare(inputs)
        batch = tf.reshape(strings, [-1])
        ids, starts, ends = self._tokenize(batch)
        if scalar:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

    def detokenize(self, ids):
        """Joins word pieces back into text (`##` pieces glued to the previous
        piece, words separated by spaces; BERT sec. 3); the padding token is dropped.

        >>> tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "play", "##ing"])
        >>> tok.detokenize([5, 6, 0]).numpy()
        b'playing'
        """
        if not isinstance(ids, (tf.Tensor, tf.RaggedTensor)):
            ids = np.asarray(ids)
            if ids.dtype == object:
                ids = tf.ragged.constant(ids.tolist(), dtype=tf.int32)
        if isinstance(ids, tf.RaggedTensor):
            ids = tf.cast(ids, tf.int32)
            mask = tf.not_equal(ids, self._padding_id)
            ids = tf.ragged.boolean_mask(ids, mask)
        else:
            ids = tf.cast(ids, tf.int32)
            if ids.shape.rank == 0:
                ids = tf.reshape(ids, [1])
            ids = tf.ragged.boolean_mask(ids, tf.not_equal(ids, self._padding_id))
        return self._wordpiece.detokenize(ids)

    # === Vocabulary ===

    def vocabulary_size(self):
        """Number of tokens (~30k for BERT, sec. 3).

        >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]).vocabulary_size()
        5
        """
        return len(self.vocabulary)

    def get_vocabulary(self):
        """The vocabulary as a list (id order), see BERT sec. 3.

        >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]).get_vocabulary()[:2]
        ['[PAD]', '[UNK]']
        """
        return list(self.vocabulary)

    def id_to_token(self, id):
        """The token string of an id (BERT sec. 3).

        >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]).id_to_token(2)
        '[CLS]'
        """
        id = int(id)
        if not 0 <= id < len(self.vocabulary):
            raise ValueError(f"Token id {id} is outside the vocabulary of size {len(self.vocabulary)}.")
        return self.vocabulary[id]

    def token_to_id(self, token):
        """The id of a token (BERT sec. 3); unknown tokens raise a ValueError.

        >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]).token_to_id("[SEP]")
        3
        """
        if token not in self._index:
            raise ValueError(f"Token {token!r} is not in the vocabulary.")
        return self._index[token]

    # === Serialization ===

    def get_config(self):
        """Config with the vocabulary list inlined (BERT sec. 3).

        >>> tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], lowercase=False)
        >>> BertTokenizer.from_config(tok.get_config()).lowercase
        False
        """
        return {
            "vocabulary": list(self.vocabulary),
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "unknown_token": self.unknown_token,
            "suffix_indicator": self.suffix_indicator,
            "max_input_chars_per_word": self.max_input_chars_per_word,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    # === Presets ===

    @classmethod
    def from_preset(cls, preset, /, **overrides):
        """The tokenizer saved in a preset directory (its vocabulary from
        `assets/tokenizer/vocabulary.txt`); keyword arguments override its
        config. Built-in names carry no vocabulary yet (BERT sec. 3).

        Example:

        >>> import tempfile
        >>> path = tempfile.mkdtemp()
        >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]).save_to_preset(path)
        >>> BertTokenizer.from_preset(path).tokenize(["hi HI"]).to_list()
        [[5, 5]]
        """
        return presets.from_preset_for(cls, preset, **overrides)

    def save_to_preset(self, preset_dir):
        """Saves `tokenizer.json` and `assets/tokenizer/vocabulary.txt` into
        `preset_dir` (KerasHub's layout; BERT sec. 3's WordPiece vocabulary).

        Example:

        >>> import os, tempfile
        >>> path = tempfile.mkdtemp()
        >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]).save_to_preset(path)
        >>> open(os.path.join(path, "assets", "tokenizer", "vocabulary.txt")).read().split()
        ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
        """
        presets.save_tokenizer(self, preset_dir)


@keras.saving.register_keras_serializable(package="kzoo")
class BertTokenizer(WordPieceTokenizer):
    """BERT's basic + WordPiece tokenizer (BERT sec. 3), graph-mode TensorFlow.

    Matches Hugging Face `BertTokenizerFast(vocab=path, do_lower_case=...)`
    token for token (see the module docstring for the normalization), and runs
    only compiled tensorflow-text / TensorFlow ops, so it works inside
    `tf.data.Dataset.map` whatever `KERAS_BACKEND` is.

    Args:
        vocabulary: a vocabulary file (one token per line) or a list of
            tokens. Must contain `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]` and
            `[MASK]` (the unknown token as configured).
        lowercase: True for uncased models (lower-case AND strip accents, as
            the uncased BERT checkpoints); False for cased (text kept as is).
        strip_accents: None follows `lowercase` (as Hugging Face); True or
            False forces accent stripping on or off.
        unknown_token: the token for words with no WordPiece segmentation.
        suffix_indicator: prefix of continuation pieces, `##`.
        max_input_chars_per_word: longer words become the unknown token (100).

    Call `tokenizer(inputs)` (or `tokenize`) on a str, list of str, numpy
    array or tf.string tensor: int32 ids, a `tf.RaggedTensor` `(batch, None)`
    for a batch, a 1-D tensor for a scalar string. With `sequence_length=N`,
    a dense `(batch, N)` tensor, truncated and padded with `[PAD]`.

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...          "the", "cafe", "is", "open", "un", "##believ", "##able", "!", "字"]
    >>> tokenizer = BertTokenizer(vocab)
    >>> tokenizer(["The Café is unbelievable!", "字字 zzz"]).to_list()
    [[5, 6, 7, 9, 10, 11, 12], [13, 13, 1]]
    >>> tokenizer("the cafe", sequence_length=4).numpy().tolist()
    [5, 6, 0, 0]
    >>> tokenizer.detokenize([[9, 10, 11, 12]]).numpy().tolist()
    [b'unbelievable !']
    >>> tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    (2, 3, 4)
    """

    special_tokens = SPECIAL_TOKENS
