"""Learning a WordPiece vocabulary from a corpus (BERT sec. 3: a ~30k
WordPiece vocabulary, `##` continuation pieces).

Words are counted after kzoo's own BERT basic tokenization
(`kzoo.tokenizers.word_splitting.split_words`, identical to Hugging Face's),
not after tensorflow-text's `BasicTokenizer`, which keeps non-ASCII white space
inside cased words and NFKC-folds uncased text: a vocabulary learned that way
contains tokens such as "##ed\\u3000" that no BERT tokenizer can produce. The
WordPiece learner is tensorflow-text's (`wordpiece_tokenizer_learner_lib`:
its input filtering, parameters and final vocabulary ordering), driven by a
binary search over the frequency threshold with a progress bar.

Its `learn_with_thresh` is re-implemented here, with the same output token
for token, because the search re-runs it for every threshold and each of the
library's iterations counts every substring from every split point to the end
of every word, then subtracts each token's count from all of its prefixes.
After that subtraction a token's count is exactly the number of times it
occurs as a whole *suffix* `word[start:]` (`##`-prefixed when `start > 0`)
from one of the word's split points: the count of a prefix `p` minus the
counts of its one-character extensions leaves only the occurrences of `p`
that end the word. So each iteration here counts only the suffixes at the
split points (linear in the text instead of cubic in the word length), and
the first iteration, whose split points are every character whatever the
threshold, is computed once for the whole search.
"""

import collections
import math
import os

import numpy as np
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner
from tqdm.auto import tqdm

from kzoo.tokenizers.word_splitting import split_words

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _dataset(texts_or_dataset, batch_size=1024):
    if isinstance(texts_or_dataset, tf.data.Dataset):
        dataset = texts_or_dataset
        if dataset.element_spec.dtype != tf.string:
            raise ValueError("learn_wordpiece_vocabulary expected a dataset of strings.")
        if dataset.element_spec.shape.rank == 0:
            dataset = dataset.batch(batch_size)
        return dataset
    if isinstance(texts_or_dataset, (str, bytes)):
        texts_or_dataset = [texts_or_dataset]
    texts = list(texts_or_dataset)
    if not all(isinstance(t, (str, bytes, np.str_, np.bytes_)) for t in texts):
        raise ValueError("learn_wordpiece_vocabulary expected strings (a list of texts or a tf.data.Dataset).")
    return tf.data.Dataset.from_tensor_slices(tf.constant(texts, dtype=tf.string)).batch(batch_size)


def _count_words(dataset):
    """Word -> count, from a dataset of 1-D string tensors (words, as bytes)."""
    counts = collections.Counter()
    for unique, count in dataset.as_numpy_iterator():
        counts.update(dict(zip(unique.tolist(), count.tolist())))
    return {word.decode("utf-8"): count for word, count in counts.items()}


def _suffix_counts(words, joiner):
    """The learner's first iteration (split points at every character): the
    count of each whole word and of each `joiner + word[start:]`."""
    counts = collections.defaultdict(int)
    for word, count in words:
        counts[word] += count
        for start in range(1, len(word)):
            counts[joiner + word[start:]] += count
    return counts


def _learn_with_thresh(words, thresh, params, char_tokens, first_counts):
    """`wordpiece_tokenizer_learner_lib.learn_with_thresh(words, thresh,
    params)`, same result (see the module docstring), with `char_tokens` and
    `first_counts` (`_suffix_counts`) computed once for all thresholds."""
    joiner = params.joiner
    tokens = {t: c for t, c in first_counts.items() if c >= thresh}
    tokens = learner.ensure_all_tokens_exist(char_tokens, tokens, True, joiner)
    for _ in range(1, params.num_iterations):
        # Greedy longest-match split of each word with the current tokens, as
        # the library's `get_split_indices` (which tries every end from the
        # word's end down): scanning forward while the piece is a prefix of
        # some token finds the same longest match. Every character is a token
        # (with and without the joiner), so no word is unsplittable, and a
        # split's remainder depends only on the suffix: suffixes shared by
        # many words are split once, longest first, with their summed counts.
        prefixes = set()
        for token in tokens:
            prefixes.update(token[:i] for i in range(1, len(token) + 1))

        def longest_match(stem, text):
            best = 0
            for end in range(1, len(text) + 1):
                piece = stem + text[:end]
                if piece not in prefixes:
                    break
                if piece in tokens:
                    best = end
            return best

        counts = collections.defaultdict(int)
        suffixes = [collections.defaultdict(int) for _ in range(params.max_token_length + 1)]
        for word, count in words:
            counts[word] += count
            end = longest_match("", word)
            if end < len(word):
                suffixes[len(word) - end][word[end:]] += count
        for length in range(len(suffixes) - 1, 0, -1):
            for suffix, count in suffixes[length].items():
                counts[joiner + suffix] += count
                end = longest_match(joiner, suffix)
                if end < length:
                    suffixes[length - end][suffix[end:]] += count
        tokens = {t: c for t, c in counts.items() if c >= thresh}
        tokens = learner.ensure_all_tokens_exist(char_tokens, tokens, True, joiner)
    return learner.generate_final_vocabulary(params.reserved_tokens, char_tokens, tokens)


def learn_wordpiece_vocabulary(
    texts_or_dataset,
    vocabulary_size,
    lowercase=True,
    output_path=None,
    reserved_tokens=RESERVED_TOKENS,
    strip_accents=None,
    max_token_length=50,
    max_unique_chars=1000,
    num_iterations=4,
    progress=True,
):
    """Learns a WordPiece vocabulary of at most `vocabulary_size` tokens (BERT sec. 3).

    Args:
        texts_or_dataset: list of str or `tf.data.Dataset`. The corpus: texts,
            or a dataset of strings (scalar or batched).
        vocabulary_size: int. The target size, an upper bound: the learner
            stops within 5% of it or at the smallest frequency threshold.
        lowercase: bool. Whether to learn an uncased vocabulary (lower-cased,
            accents stripped), for a tokenizer with `lowercase=True`.
            Defaults to `True`.
        output_path: str, `os.PathLike` or `None`. If given, the vocabulary
            is written there, one token per line. Defaults to `None`.
        reserved_tokens: sequence of str. Tokens placed first, in order.
            Defaults to BERT's `("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")`
            (`[PAD]` = id 0).
        strip_accents: bool or `None`. Forces accent stripping on or off;
            `None` follows `lowercase`. Defaults to `None`.
        max_token_length: int. The longest token, in characters, passed to
            tensorflow-text's learner. Defaults to `50`.
        max_unique_chars: int. The most distinct characters kept, passed to
            tensorflow-text's learner. Defaults to `1000`.
        num_iterations: int. WordPiece learning iterations per threshold,
            passed to tensorflow-text's learner. Defaults to `4`.
        progress: bool. Whether to show a tqdm bar over the threshold search.
            Defaults to `True`.

    Returns:
        The vocabulary as a list of str.

    Example:

    >>> texts = ["the cat sat on the mat", "the dog sat on the log"] * 50
    >>> vocab = learn_wordpiece_vocabulary(texts, 60, progress=False)
    >>> vocab[:5], "the" in vocab, len(vocab) <= 60
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True, True)
    """
    vocabulary_size = int(vocabulary_size)
    reserved_tokens = list(reserved_tokens)

    def unique_words(texts):
        words = split_words(tf.reshape(texts, [-1]), lowercase, strip_accents).flat_values
        unique, index, count = tf.unique_with_counts(words)
        return unique, count

    dataset = _dataset(texts_or_dataset).map(unique_words, num_parallel_calls=tf.data.AUTOTUNE)
    counts = _count_words(dataset.prefetch(tf.data.AUTOTUNE))
    params = learner.Params(
        upper_thresh=int(1e7),
        lower_thresh=2,
        num_iterations=num_iterations,
        max_input_tokens=int(5e6),
        max_token_length=max_token_length,
        max_unique_chars=max_unique_chars,
        vocab_size=vocabulary_size,
        slack_ratio=0.05,
        include_joiner_token=True,
        joiner="##",
        reserved_tokens=reserved_tokens,
    )
    words = learner.get_input_words(list(counts.items()), reserved_tokens, max_token_length)
    allowed = learner.get_allowed_chars(words, max_unique_chars)
    words = learner.filter_input_words(words, allowed, params.max_input_tokens)
    if not words:
        raise ValueError("learn_wordpiece_vocabulary found no words in the corpus.")
    upper, lower = learner.get_search_threshs(words, params.upper_thresh, params.lower_thresh)
    char_tokens = learner.extract_char_tokens(words)
    first_counts = _suffix_counts(words, params.joiner)
    lower = min(lower, upper)  # every word seen once: threshold 1

    bar = tqdm(desc="WordPiece thresholds", unit="step", disable=not progress)
    # Bisection of the threshold range in log scale (vocabulary sizes fall
    # roughly as a power of the threshold; arithmetic bisection of [2, max
    # count] spends most of its steps on thresholds that leave only the
    # characters), until a vocabulary within 5% below the target.
    best = None
    while lower <= upper:
        thresh = min(upper, max(lower, int(round(math.sqrt(lower * upper)))))
        vocab = _learn_with_thresh(words, thresh, params, char_tokens, first_counts)
        bar.update(1)
        bar.set_postfix(threshold=thresh, size=len(vocab))
        if len(vocab) <= vocabulary_size and (best is None or len(vocab) > len(best)):
            best = vocab
        if len(vocab) <= vocabulary_size and vocabulary_size - len(vocab) <= 0.05 * vocabulary_size:
            break
        if len(vocab) > vocabulary_size:
            lower = thresh + 1
        else:
            upper = thresh - 1
    bar.close()
    vocab = best if best is not None else vocab[:vocabulary_size]
    if output_path is not None:
        with open(os.fspath(output_path), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(token + "\n" for token in vocab))
    return vocab
