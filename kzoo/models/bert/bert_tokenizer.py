"""BERT's WordPiece tokenizer (Devlin et al., 2019, sec. 3: a ~30k WordPiece
vocabulary with `##` continuation pieces and the special tokens `[CLS]`,
`[SEP]`, `[MASK]`), on tensorflow-text's compiled ops.

The tokenization itself (normalization as Hugging Face's `BertTokenizerFast`
and google-research's `tokenization.py`, then WordPiece) is
`kzoo.tokenizers.WordPieceTokenizer`; this class adds BERT's special tokens.
"""

import keras

from kzoo.tokenizers.wordpiece_tokenizer import WordPieceTokenizer


@keras.saving.register_keras_serializable(package="kzoo")
class BertTokenizer(WordPieceTokenizer):
    """BERT's basic + WordPiece tokenizer (BERT sec. 3), graph-mode TensorFlow.

    Matches Hugging Face `BertTokenizerFast(vocab=path, do_lower_case=...)`
    token for token (see `kzoo.tokenizers.word_splitting` for the
    normalization), and runs only compiled tensorflow-text / TensorFlow ops,
    so it works inside `tf.data.Dataset.map` whatever `KERAS_BACKEND` is.
    Its special token ids are the attributes `pad_token_id`, `cls_token_id`,
    `sep_token_id`, `mask_token_id` and `unknown_token_id`.

    Args:
        vocabulary: str or list of str. A vocabulary file (one token per
            line) or the tokens, in id order. Must contain `[PAD]`, `[UNK]`,
            `[CLS]`, `[SEP]` and `[MASK]` (the unknown token as configured).
        lowercase: bool. `True` for uncased models (lower-case and strip
            accents, as the uncased BERT checkpoints); `False` for cased ones
            (text kept as it is). Defaults to `True`.
        strip_accents: bool or `None`. Forces accent stripping on or off;
            `None` follows `lowercase`. Defaults to `None`.
        unknown_token: str. The token of a word with no WordPiece
            segmentation. Defaults to `"[UNK]"`.
        suffix_indicator: str. The prefix of continuation pieces. Defaults
            to `"##"`.
        max_input_chars_per_word: int. Longer words become the unknown
            token. Defaults to `100`.
        special_tokens_in_strings: bool. Read `[CLS]`, `[SEP]`, `[MASK]`,
            `[PAD]` and `[UNK]` written in the text as those tokens (KerasHub's
            argument), matching Hugging Face's default tokenization exactly:
            what `BertMaskedLM.fill_mask` uses. Defaults to `False`: text is
            data, and a literal `[MASK]` becomes `[`, `mask`, `]`.

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
    >>> BertTokenizer(vocab, special_tokens_in_strings=True)("the [MASK] is open").numpy().tolist()
    [5, 4, 7, 8]
    """

    special_tokens = {
        "pad_token_id": "[PAD]",
        "cls_token_id": "[CLS]",
        "sep_token_id": "[SEP]",
        "mask_token_id": "[MASK]",
    }
