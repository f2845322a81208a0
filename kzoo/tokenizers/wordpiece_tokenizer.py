"""WordPiece tokenization (BERT sec. 3: a ~30k WordPiece vocabulary with `##`
continuation pieces) on tensorflow-text's compiled ops, over any vocabulary:
the core of `kzoo.BertTokenizer` and `kzoo.TransformerTokenizer`.

BERT's basic tokenization (`kzoo.tokenizers.word_splitting`), then greedy
longest-match-first WordPiece per word (tensorflow-text's linear-time
`FastWordpieceTokenizer`). A word with no segmentation, or longer than
`max_input_chars_per_word` (100) characters, counted as Hugging Face counts
them, is the unknown token. `tokenize_with_offsets` normalizes character by
character so offsets point into the original string; `tokenize` normalizes
whole strings (the same text, at a fraction of the cost).
"""

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from kzoo import presets
from kzoo.tokenizers.inputs import read_vocabulary, to_string_tensor
from kzoo.tokenizers.special_tokens import tokenize_with_special_tokens
from kzoo.tokenizers.word_splitting import normalize, split_normalized_with_offsets

MAX_INPUT_CHARS_PER_WORD = 100


class WordPieceTokenizer:
    """BERT's normalization and WordPiece (BERT sec. 3) over any vocabulary.

    Runs only compiled tensorflow-text / TensorFlow ops, so it works inside
    `tf.data.Dataset.map` whatever `KERAS_BACKEND` is. A subclass names its
    special tokens in `special_tokens` (`{attribute: token}`: each token must
    be in the vocabulary and its id becomes that attribute), pads with
    `padding_token`, and may give `hidden_pieces`, pieces after the vocabulary
    for its own `_word_pieces` (see `kzoo.TransformerTokenizer`).

    Args:
        vocabulary: str or list of str. A vocabulary file (one token per
            line) or the tokens, in id order, with the padding, unknown and
            special tokens. A token listed twice keeps its last id, as in
            Hugging Face and google-research/bert (`detokenize` reads its
            earlier ids as the token too).
        lowercase: bool. `True` for uncased models: lower-case and strip
            accents, as the uncased BERT checkpoints; `False` keeps the text
            as it is. Defaults to `True`.
        strip_accents: bool or `None`. Forces accent stripping on or off;
            `None` follows `lowercase`, as Hugging Face. Defaults to `None`.
        unknown_token: str. The token of a word with no WordPiece
            segmentation. Defaults to `"[UNK]"`.
        suffix_indicator: str. The prefix of continuation pieces. Defaults
            to `"##"`.
        max_input_chars_per_word: int. Longer words become the unknown
            token. Defaults to `100`.
        special_tokens_in_strings: bool. Read special tokens written in the
            text (the unknown, padding and subclass tokens, e.g. `[MASK]`)
            as those tokens, as Hugging Face's tokenizers do by default
            (`kzoo.tokenizers.special_tokens`). Defaults to `False`: text is
            data, and `[MASK]` in it is the pieces `[`, `mask`, `]`.

    Call the tokenizer as `tokenize` (below) on a str or a batch of them.

    Example:

    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "play", "##ing", "!"])
    >>> tokenizer(["Playing!", "play zzz"]).to_list()
    [[2, 3, 4], [2, 1]]
    >>> tokenizer("play", sequence_length=3).numpy().tolist()
    [2, 0, 0]
    >>> tokenizer.detokenize([2, 3, 4]).numpy()
    b'playing !'
    """

    special_tokens = {}
    padding_token = "[PAD]"
    hidden_pieces = ()

    def __init__(
        self,
        vocabulary,
        lowercase=True,
        strip_accents=None,
        unknown_token="[UNK]",
        suffix_indicator="##",
        max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
        special_tokens_in_strings=False,
        **kwargs,
    ):
        kwargs.pop("name", None)
        kwargs.pop("dtype", None)
        kwargs.pop("trainable", None)
        if kwargs:
            raise ValueError(f"Unknown {type(self).__name__} arguments: {sorted(kwargs)}")
        self.vocabulary = read_vocabulary(vocabulary)
        owner = type(self).__name__
        for name, value in (("lowercase", lowercase), ("strip_accents", strip_accents)):
            if not isinstance(value, bool) and not (name == "strip_accents" and value is None):
                raise ValueError(f"{owner}: {name} must be True or False; got {value!r} ({type(value).__name__}).")
        limit = max_input_chars_per_word
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
            raise ValueError(f"{owner}: max_input_chars_per_word must be an int >= 1; got {limit!r}.")
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.unknown_token = unknown_token
        self.suffix_indicator = suffix_indicator
        self.max_input_chars_per_word = int(limit)
        self.special_tokens_in_strings = bool(special_tokens_in_strings)

        # A token listed twice has its last id, as in Hugging Face's and
        # google-research's `load_vocab` (`vocab[token] = index`).
        index = {token: i for i, token in enumerate(self.vocabulary)}
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
        self._special_ids = {t: index[t] for t in (*self.special_tokens.values(), unknown_token, self.padding_token)}

        # tensorflow-text refuses duplicates and empty tokens (a blank line,
        # which Hugging Face keeps as a row): an earlier copy of a token, or an
        # empty one, gets a stand-in that no text can produce (it holds a
        # space, which splits words); `detokenize` reads a copy's id as the token.
        unique = [
            token if index[token] == i and token else f"\x02 unreachable {i}"
            for i, token in enumerate(self.vocabulary)
        ]
        self._duplicates = len(index) < len(self.vocabulary)
        self._canonical_ids = [index[token] for token in self.vocabulary] + [
            len(self.vocabulary) + i for i in range(len(self.hidden_pieces))
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

    # === Tokenization ===

    def _tokenize(self, strings):
        """strings: 1-D tf.string. Returns ragged (ids, starts, ends), int32/int64."""
        chars, char_starts = tf.strings.unicode_split_with_offsets(strings, "UTF-8")
        # Original byte offsets of each character (flat) and its normalized text.
        original_starts = char_starts.flat_values
        original_ends = original_starts + tf.cast(tf.strings.length(chars.flat_values), tf.int64)
        normalized = normalize(chars.flat_values, self.lowercase, self.strip_accents)
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
        # segment_sum stops at the last row with characters: pad for trailing empty strings.
        num_rows = tf.shape(strings, out_type=tf.int64)[0]
        missing_rows = num_rows - tf.shape(normalized_row_lengths, out_type=tf.int64)[0]
        normalized_row_lengths = tf.pad(normalized_row_lengths, [[0, missing_rows]])
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
        words, word_starts, word_ends = split_normalized_with_offsets(text)
        too_long = (
            tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self.max_input_chars_per_word
        )
        words = words.with_flat_values(
            tf.where(too_long, tf.constant(self.unknown_token), words.flat_values)
        )
        return words, word_starts, word_ends, too_long, self._word_pieces(words, word_starts, word_ends)

    def _token_ids(self, strings):
        """strings: 1-D tf.string. Returns ragged int32 ids: `_tokenize`
        without offsets, so whole strings are normalized at once (the
        per-character path of `_tokenize` exists only to keep offsets)."""
        text = normalize(strings, self.lowercase, self.strip_accents)
        words, _, _, _, (ids, _, _) = self._pieces_of(text)
        return words.with_flat_values(ids).merge_dims(-2, -1)

    def _word_pieces(self, words, word_starts, word_ends):
        """WordPiece of each word (ragged `(batch, words)` strings with their
        byte spans in the normalized text): ids and piece offsets relative to
        the word, ragged `(all words, pieces)`."""
        return self._wordpiece.tokenize_with_offsets(words.flat_values)

    def _prepare(self, inputs):
        string_tensor = isinstance(inputs, tf.Tensor) and inputs.dtype == tf.string  # a task's texts
        strings = inputs if string_tensor else to_string_tensor(inputs, type(self).__name__)
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
        """Token ids (BERT sec. 3).

        Args:
            inputs: str, list of str, numpy array or `tf.string` tensor. A
                scalar string or a 1-D batch.
            sequence_length: int or `None`. If given, the ids are truncated
                and padded with the padding token to this length. Defaults
                to `None`.

        Returns:
            int32 ids: ragged `(batch, None)` for a batch, 1-D for a scalar
            string; dense `(batch, sequence_length)` or `(sequence_length,)`
            with `sequence_length`.

        Example:

        >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "hi"])
        >>> tokenizer.tokenize(["hi hi", "hi"]).to_list()
        [[2, 2], [2]]
        >>> tokenizer.tokenize(["hi hi", "hi"], sequence_length=3).numpy().tolist()
        [[2, 2, 0], [2, 0, 0]]
        """
        strings, scalar = self._prepare(inputs)
        batch = tf.reshape(strings, [-1])
        if self.special_tokens_in_strings:
            ids = tokenize_with_special_tokens(batch, self._special_ids, self._token_ids)
        else:
            ids = self._token_ids(batch)
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
        """Token ids and each token's byte span in the original string, e.g.
        for SQuAD answer spans (BERT sec. 4.2).

        Args:
            inputs: str, list of str, numpy array or `tf.string` tensor. A
                scalar string or a 1-D batch.

        Returns:
            `(ids, start_offsets, end_offsets)`: ragged `(batch, None)`
            (1-D for a scalar string), int32 ids and int64 byte offsets.

        Example:

        >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "cafe", "!"])
        >>> ids, starts, ends = tokenizer.tokenize_with_offsets(["Café!"])
        >>> ids.to_list(), starts.to_list(), ends.to_list()
        ([[2, 3]], [[0, 5]], [[5, 6]])
        """
        strings, scalar = self._prepare(inputs)
        batch = tf.reshape(strings, [-1])
        if self.special_tokens_in_strings:
            ids, starts, ends = tokenize_with_special_tokens(batch, self._special_ids, self._tokenize, True)
        else:
            ids, starts, ends = self._tokenize(batch)
        if scalar:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

    def detokenize(self, ids):
        """Text from token ids (BERT sec. 3's pieces joined back): `##`
        pieces glued to the previous piece, words separated by spaces, the
        padding token dropped.

        Args:
            ids: list, numpy array, tensor or ragged tensor. Int ids,
                `(length,)` or `(batch, length)`.

        Returns:
            A `tf.string` tensor: 1-D `(batch,)`; one element for a 1-D input.

        Example:

        >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "play", "##ing"])
        >>> tokenizer.detokenize([2, 3, 0]).numpy()
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
        return self._pieces_to_text(ids)

    def _pieces_to_text(self, ids):
        """WordPiece's detokenization of ragged int32 ids, an earlier copy
        of a duplicated token read as the token (see `__init__`)."""
        if self._duplicates:
            ids = tf.ragged.map_flat_values(lambda flat: tf.gather(self._canonical_ids, flat), ids)
        return self._wordpiece.detokenize(ids)

    # === Vocabulary ===

    def vocabulary_size(self):
        """The number of tokens (~30k for BERT, sec. 3).

        >>> WordPieceTokenizer(["[PAD]", "[UNK]", "a"]).vocabulary_size()
        3
        """
        return len(self.vocabulary)

    def get_vocabulary(self):
        """The vocabulary as a list, in id order (BERT sec. 3).

        >>> WordPieceTokenizer(["[PAD]", "[UNK]", "a"]).get_vocabulary()
        ['[PAD]', '[UNK]', 'a']
        """
        return list(self.vocabulary)

    def id_to_token(self, id):
        """The token string of an id (BERT sec. 3); an id outside the
        vocabulary raises a `ValueError`.

        >>> WordPieceTokenizer(["[PAD]", "[UNK]", "a"]).id_to_token(2)
        'a'
        """
        id = int(id)
        if not 0 <= id < len(self.vocabulary):
            raise ValueError(f"Token id {id} is outside the vocabulary of size {len(self.vocabulary)}.")
        return self.vocabulary[id]

    def token_to_id(self, token):
        """The id of a token (BERT sec. 3); a token outside the vocabulary
        raises a `ValueError`.

        >>> WordPieceTokenizer(["[PAD]", "[UNK]", "a"]).token_to_id("[UNK]")
        1
        """
        if token not in self._index:
            raise ValueError(f"Token {token!r} is not in the vocabulary.")
        return self._index[token]

    # === Serialization ===

    def get_config(self):
        """The constructor arguments, with the vocabulary list inlined (BERT sec. 3).

        >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "a"], lowercase=False)
        >>> WordPieceTokenizer.from_config(tokenizer.get_config()).lowercase
        False
        """
        return {
            "vocabulary": list(self.vocabulary),
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "unknown_token": self.unknown_token,
            "suffix_indicator": self.suffix_indicator,
            "max_input_chars_per_word": self.max_input_chars_per_word,
            "special_tokens_in_strings": self.special_tokens_in_strings,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    # === Presets ===

    @classmethod
    def from_preset(cls, preset, /, load_weights=True, **overrides):
        """The tokenizer saved in a preset directory, its vocabulary read
        from `assets/tokenizer/vocabulary.txt` (BERT sec. 3), or the
        released vocabulary and casing of a built-in name (see
        `kzoo.list_presets()`; architecture-only names have none).

        Args:
            preset: str or `os.PathLike`. A preset directory written by
                `save_to_preset`, a checkpoint directory, or a built-in name.
            load_weights: bool. For a name: `False` reads the released
                vocabulary only from files already on this machine (the cache,
                an installed package), never the network. Defaults to `True`.
            **overrides: constructor arguments that replace the saved ones.

        Example:

        >>> import tempfile
        >>> from kzoo import BertTokenizer
        >>> path = tempfile.mkdtemp()
        >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]).save_to_preset(path)
        >>> BertTokenizer.from_preset(path).tokenize(["hi HI"]).to_list()
        [[5, 5]]
        """
        return presets.load(cls, preset, load_weights, **overrides)

    def save_to_preset(self, preset_dir):
        """Saves `tokenizer.json` and `assets/tokenizer/vocabulary.txt` into
        `preset_dir`, KerasHub's layout (BERT sec. 3's WordPiece vocabulary).

        Args:
            preset_dir: str or `os.PathLike`. The directory to write.

        Example:

        >>> import os, tempfile
        >>> from kzoo import BertTokenizer
        >>> path = tempfile.mkdtemp()
        >>> BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]).save_to_preset(path)
        >>> open(os.path.join(path, "assets", "tokenizer", "vocabulary.txt")).read().split()
        ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
        """
        presets.save_tokenizer(self, preset_dir)
