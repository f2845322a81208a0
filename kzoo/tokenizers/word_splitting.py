"""BERT's basic tokenization (Devlin et al., 2019, sec. 3): text normalization
and the split into words that WordPiece then cuts into pieces.

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
   each punctuation character its own word.

Every rule of steps 1-3 acts on one character at a time, so `normalize` gives
the same text for a whole string or for its characters one by one (which
keeps each character's byte offsets in the original string).

Why not `tf_text.BertTokenizer` or `tf_text.FastBertTokenizer` as they are:
both normalize uncased text with NFKC case folding ("…" -> "...",
"①" -> "1", "ﬁ" -> "fi") and split cased text only on ASCII white space
(RE2 `\\s`), so on a varied corpus they disagree with Hugging Face on about a
fifth (uncased) and most (cased) sentences. The rules here remove those
differences.
"""

import tensorflow as tf
import tensorflow_text as tf_text

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
# Words end at white space (dropped) and around punctuation (kept, one word each).
_WORD_DELIMITER = r"\s+|" + _PUNCTUATION


def normalize(text, lowercase=True, strip_accents=None):
    """BERT's text normalization (sec. 3), steps 1-3 of the module docstring.

    Args:
        text: `tf.string` tensor of any shape. Whole strings, or single
            characters (the rules act per character, so both give the same text).
        lowercase: bool. Whether to lower-case (uncased models). Defaults to
            `True`.
        strip_accents: bool or `None`. Whether to remove accents; `None`
            follows `lowercase`, as Hugging Face. Defaults to `None`.

    Returns:
        A `tf.string` tensor of the shape of `text`.

    Example:

    >>> normalize(tf.constant(["Café\\u00a0Ωμέγα 字"])).numpy()[0].decode()
    'cafe ωμεγα  字 '
    >>> normalize(tf.constant(["Café"]), lowercase=False).numpy()[0].decode()
    'Café'
    """
    text = tf.strings.regex_replace(text, _CONTROL, "")
    text = tf.strings.regex_replace(text, _WHITESPACE, " ")
    text = tf.strings.regex_replace(text, _CJK, r" \1 ")
    if lowercase if strip_accents is None else strip_accents:
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, r"\p{Mn}", "")
    if lowercase:
        # Σ first: ICU lower-cases a word-final Σ to ς in whole strings (the
        # one context-dependent mapping), never a single character.
        text = tf.strings.lower(tf.strings.regex_replace(text, "Σ", "σ"), encoding="utf-8")
    return text


def split_normalized_with_offsets(text):
    """Words of normalized text (step 4 of BERT sec. 3's basic tokenization)
    with their byte offsets.

    Args:
        text: `tf.string` tensor of shape `(batch,)`. Already normalized
            (see `normalize`).

    Returns:
        `(words, starts, ends)`: ragged `(batch, words)` tensors of the words
        and of their `[start, end)` byte offsets in `text`.

    Example:

    >>> words, starts, ends = split_normalized_with_offsets(tf.constant(["hi,  you"]))
    >>> words.to_list(), starts.to_list(), ends.to_list()
    ([[b'hi', b',', b'you']], [[0, 2, 5]], [[2, 3, 8]])
    """
    return tf_text.regex_split_with_offsets(text, _WORD_DELIMITER, _PUNCTUATION)


def split_words(strings, lowercase=True, strip_accents=None):
    """BERT's basic tokenization (sec. 3): normalize, then split on white
    space and punctuation.

    Args:
        strings: `tf.string` tensor of shape `(batch,)`. The texts.
        lowercase: bool. Whether to lower-case (uncased models). Defaults to
            `True`.
        strip_accents: bool or `None`. Whether to remove accents; `None`
            follows `lowercase`. Defaults to `None`.

    Returns:
        A ragged `(batch, words)` `tf.string` tensor.

    Example:

    >>> split_words(tf.constant(["Café, 字字"])).to_list()
    [[b'cafe', b',', b'\\xe5\\xad\\x97', b'\\xe5\\xad\\x97']]
    """
    words, _, _ = split_normalized_with_offsets(normalize(strings, lowercase, strip_accents))
    return words
