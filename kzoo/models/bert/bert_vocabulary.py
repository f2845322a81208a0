"""Learning a BERT WordPiece vocabulary from a corpus (BERT sec. 3: a ~30k
WordPiece vocabulary, `##` continuation pieces).

Words are counted after kzoo's own BERT basic tokenization
(`bert_tokenizer.split_words`, identical to Hugging Face's), not after
tensorflow-text's `BasicTokenizer`, which keeps non-ASCII white space inside
cased words and NFKC-folds uncased text: a vocabulary learned that way
contains tokens such as "##ed\\u3000" that no BERT tokenizer can produce. The
WordPiece learner itself is tensorflow-text's
(`wordpiece_tokenizer_learner_lib`), driven by a binary search over the
frequency threshold with a progress bar.
"""

import os

import numpy as np
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from kzoo.models.bert.bert_tokenizer import split_words

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
        texts_or_dataset: a list of strings or a `tf.data.Dataset` of strings
            (scalar or batched).
        vocabulary_size: the target size (an upper bound; the learner stops
            within 5% of it or at the smallest frequency threshold).
        lowercase: learn an uncased vocabulary (lower-case and strip accents),
            to use with `BertTokenizer(lowercase=True)`.
        output_path: if given, the vocabulary is written there, one token per line.
        reserved_tokens: tokens placed first, in order (`[PAD]` = id 0).
        strip_accents: None follows `lowercase`.
        max_token_length, max_unique_chars, num_iterations: passed to
            tensorflow-text's learner.
        progress: show a tqdm bar over the threshold search.

    Returns:
        The vocabulary as a list of strings.

    >>> texts = ["the cat sat on the mat", "the dog sat on the log"] * 50
    >>> vocab = learn_wordpiece_vocabulary(texts, 60, progress=False)
    >>> vocab[:5], "the" in vocab, len(vocab) <= 60
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True, True)
    """
    vocabulary_size = int(vocabulary_size)
    reserved_tokens = list(reserved_tokens)
    dataset = _dataset(texts_or_dataset).map(
        lambda x: split_words(tf.reshape(x, [-1]), lowercase, strip_accents).flat_values
    )
    counts = learner.count_words(dataset)
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

    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(desc="WordPiece thresholds", unit="step")
        except ImportError:
            pass
    best = None
    while True:
        thresh = (upper + lower) // 2
        vocab = learner.learn_with_thresh(words, thresh, params)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(threshold=thresh, size=len(vocab))
        if len(vocab) <= vocabulary_size and (best is None or len(vocab) > len(best)):
            best = vocab
        within = len(vocab) <= vocabulary_size and vocabulary_size - len(vocab) <= 0.05 * vocabulary_size
        if within or lower >= upper or thresh <= 1:
            break
        if len(vocab) > vocabulary_size:
            lower = thresh + 1
        else:
            upper = thresh - 1
    if bar is not None:
        bar.close()
    vocab = best if best is not None else vocab[:vocabulary_size]
    if output_path is not None:
        with open(os.fspath(output_path), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(token + "\n" for token in vocab))
    return vocab
