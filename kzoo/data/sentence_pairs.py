"""Next sentence prediction pairs (BERT sec. 3.1 "Task #2", A.2) from a tokenized
document-level corpus.

The procedure is google-research/bert's `create_instances_from_document`,
with three corrections that keep the statistics at what the paper states:
- the label is drawn first, 50/50: the original forces NotNext whenever the
  current chunk holds a single sentence, so on text with long sentences
  well over half the pairs are NotNext. Here a one-sentence chunk takes its
  continuation from the next sentence of the document, or, for the last
  sentence of a document, from a random split of that sentence;
- IsNext pairs are truncated from the front of A and the back of B only, so
  B still directly follows A after truncation (the original trims either
  end of either span at random, cutting the text between A and B);
- NotNext spans are trimmed at one end chosen at random.

Pair generation runs in NumPy over token ids (it needs random access to
every document); masking happens later, per batch, in `tf.data`.
"""

import collections
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

IS_NEXT, NOT_NEXT = 0, 1  # the labels of google-research/bert and Hugging Face

TokenizedCorpus = collections.namedtuple(
    "TokenizedCorpus", ["token_ids", "sentence_splits", "document_splits"]
)
TokenizedCorpus.__doc__ = """A document-level corpus as token ids (BERT sec. 3.1).

`token_ids[sentence_splits[s]:sentence_splits[s + 1]]` are sentence `s`;
document `d` holds sentences `document_splits[d]` to `document_splits[d + 1] - 1`.

>>> import numpy as np
>>> corpus = TokenizedCorpus(np.array([7, 8, 9]), np.array([0, 2, 3]), np.array([0, 1, 2]))
>>> corpus.token_ids[corpus.sentence_splits[1]:corpus.sentence_splits[2]].tolist()
[9]
"""

SentencePairs = collections.namedtuple(
    "SentencePairs", ["segment_a", "segment_b", "next_sentence_label", "document_index"]
)
SentencePairs.__doc__ = """Pre-training examples before packing (BERT sec. 3.1).

`segment_a`, `segment_b`: lists of int32 arrays (B is empty without NSP);
`next_sentence_label`: int32 array, 0 = IsNext, 1 = NotNext;
`document_index`: the document A was taken from.

>>> import numpy as np
>>> pairs = SentencePairs([np.array([5])], [np.array([6])], np.array([0]), np.array([3]))
>>> int(pairs.next_sentence_label[0])  # IsNext
0
"""

PairSpans = collections.namedtuple(
    "PairSpans", ["segment_a", "segment_b", "next_sentence_label", "document_index"]
)
PairSpans.__doc__ = """`SentencePairs` as token offsets into a `TokenizedCorpus` (BERT sec. 3.1).

`segment_a`, `segment_b`: `(examples, 2)` int64 `[start, end)` offsets into
`corpus.token_ids` (every span is consecutive text; B is empty without NSP);
`next_sentence_label`, `document_index`: as in `SentencePairs`.

>>> import numpy as np
>>> spans = PairSpans(np.array([[0, 2]]), np.array([[5, 6]]), np.array([1]), np.array([0]))
>>> int(spans.segment_a[0, 1] - spans.segment_a[0, 0])  # A holds two tokens
2
"""


def _equal_batch_size(count, batch_size, threads):
    """The size of equal batches, at most `batch_size`, that split `count`
    items into as few batches as possible, in a multiple of `threads`.

    >>> _equal_batch_size(76828, 16384, 2), _equal_batch_size(10, 16384, 2), _equal_batch_size(0, 8, 2)
    (12805, 5, 1)
    """
    batches = -(-count // batch_size)
    batches = max(1, -(-batches // threads) * threads)
    return max(1, -(-count // batches))


def tokenize_documents(documents, tokenizer, batch_size=16384, progress=True):
    """Tokenizes every sentence of a corpus, keeping sentence and document boundaries.

    Sentences that tokenize to nothing are dropped, and documents left empty with them.

    Args:
        documents: list of lists of str. The documents, each a list of
            sentence strings (see `kzoo.data.read_documents`).
        tokenizer: `kzoo.BertTokenizer`. The tokenizer (BERT sec. 3 WordPiece).
        batch_size: int. The most sentences per tokenizer call. Calls run on
            one thread per CPU core, in batches of equal size, as few as this
            allows, in a multiple of the thread count (each call pays a fixed
            set-up: the tokenizer compiles its regular expressions). Defaults
            to `16384`.
        progress: bool. Whether to show a tqdm progress bar. Defaults to `True`.

    Returns:
        A `TokenizedCorpus`.

    Example:

    >>> from kzoo import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
    >>> corpus = tokenize_documents([["a b", "b"], ["a"]], tokenizer, progress=False)
    >>> corpus.token_ids.tolist(), corpus.sentence_splits.tolist(), corpus.document_splits.tolist()
    ([5, 6, 6, 5], [0, 2, 3, 4], [0, 2, 3])
    """
    sentences = [s for document in documents for s in document]
    sentences_per_document = np.array([len(d) for d in documents], dtype=np.int64)

    threads = os.cpu_count() or 1
    size = _equal_batch_size(len(sentences), batch_size, threads)

    def tokenized(start):
        ragged = tokenizer.tokenize(tf.constant(sentences[start : start + size]))
        return ragged.flat_values.numpy(), ragged.row_lengths().numpy()

    # TensorFlow's eager kernels release the GIL: batches tokenized on one
    # thread per core, results taken in order.
    ids, lengths = [], []
    starts = range(0, len(sentences), size)
    with tqdm(total=len(sentences), desc="tokenizing", unit="sentence", disable=not progress) as bar:
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(starts)))) as pool:
            for batch_ids, batch_lengths in pool.map(tokenized, starts):
                ids.append(batch_ids)
                lengths.append(batch_lengths)
                bar.update(len(batch_lengths))
    token_ids = np.concatenate(ids).astype(np.int32) if ids else np.zeros([0], np.int32)
    lengths = np.concatenate(lengths) if lengths else np.zeros([0], np.int64)

    kept = lengths > 0
    document_of_sentence = np.repeat(np.arange(len(documents)), sentences_per_document)
    kept_per_document = np.bincount(document_of_sentence[kept], minlength=len(documents))
    kept_per_document = kept_per_document[kept_per_document > 0]
    return TokenizedCorpus(
        token_ids=token_ids,
        sentence_splits=np.concatenate([[0], np.cumsum(lengths[kept])]).astype(np.int64),
        document_splits=np.concatenate([[0], np.cumsum(kept_per_document)]).astype(np.int64),
    )


def longest_first_trim(length_a, length_b, max_tokens):
    """(tokens to drop from A, from B) so that A + B fits `max_tokens`, always
    trimming the longer span (ties trim B), as google-research/bert's
    `truncate_seq_pair` (BERT sec. 3.1, A.2).

    >>> longest_first_trim(10, 4, 8), longest_first_trim(5, 5, 7), longest_first_trim(2, 3, 9)
    ((6, 0), (1, 2), (0, 0))
    """
    excess = length_a + length_b - max_tokens
    if excess <= 0:
        return 0, 0
    gap = abs(length_a - length_b)
    first = min(excess, gap)  # from the longer span, down to the shorter's length
    rest = excess - first  # then alternately, B first
    trim_a, trim_b = rest // 2, rest - rest // 2
    if length_a > length_b:
        trim_a += first
    else:
        trim_b += first
    return trim_a, trim_b


class _PairGenerator:
    """google-research/bert's `create_instances_from_document`, with the
    corrections listed in the module docstring, on token offsets: a span of
    consecutive sentences is `(start, end)` into `corpus.token_ids`."""

    def __init__(self, corpus, sequence_length, short_sequence_probability, rng):
        self.splits = corpus.sentence_splits.tolist()  # Python ints: fast scalar access
        self.document_splits = corpus.document_splits.tolist()
        self.random = rng.random  # a float in [0, 1): one draw, cheaper than rng.integers
        self.short_sequence_probability = short_sequence_probability
        self.max_tokens = sequence_length - 3  # [CLS] A [SEP] B [SEP]
        self.num_documents = len(self.document_splits) - 1

    def integer(self, low, high):
        """A uniform integer in [low, high) from one float draw."""
        return low + int(self.random() * (high - low))

    def target_length(self):
        if self.random() < self.short_sequence_probability:
            return self.integer(2, self.max_tokens + 1)
        return self.max_tokens

    def random_segment(self, document, target_length):
        """Sentences of another document, from a random start, up to `target_length` tokens."""
        other = self.integer(0, self.num_documents - 1)
        other += other >= document  # uniform over the other documents
        first, end = self.document_splits[other : other + 2]
        s = self.integer(first, end)
        start = self.splits[s]
        while s + 1 < end and self.splits[s + 1] - start < target_length:
            s += 1
        return start, self.splits[s + 1]

    def trim(self, a, b, is_next):
        trim_a, trim_b = longest_first_trim(a[1] - a[0], b[1] - b[0], self.max_tokens)
        if is_next:  # keep the junction: A loses its start, B its end
            return (a[0] + trim_a, a[1]), (b[0], b[1] - trim_b)
        a = (a[0] + trim_a, a[1]) if self.random() < 0.5 else (a[0], a[1] - trim_a)
        b = (b[0] + trim_b, b[1]) if self.random() < 0.5 else (b[0], b[1] - trim_b)
        return a, b

    def document_pairs(self, document):
        """Yields (A, B, label) for one document, A and B as token spans."""
        splits = self.splits
        first, end = self.document_splits[document : document + 2]
        target, chunk_start, s = self.target_length(), first, first
        while s < end:
            if s == end - 1 or splits[s + 1] - splits[chunk_start] >= target:
                pair, s = self.pair_from_chunk(document, chunk_start, s, end, target)
                yield pair
                target, chunk_start = self.target_length(), s + 1
            s += 1

    def pair_from_chunk(self, document, first, last, end, target):
        """One pair from sentences `first` to `last`; returns (pair, last sentence used)."""
        splits = self.splits
        is_next = self.random() < 0.5
        if is_next and first == last:
            if last + 1 < end:  # continue into the next sentence
                last += 1
            elif splits[last + 1] - splits[last] < 2:
                is_next = False  # nothing can follow a one-token, last sentence
        if last > first:
            a_end = first + self.integer(1, last - first + 1)  # the first sentence after A
        else:
            a_end = last + 1
        a = (splits[first], splits[a_end])
        if is_next:
            if last > first:
                b = (splits[a_end], splits[last + 1])
            else:  # a single, last sentence: split it at a random token
                cut = a[0] + self.integer(1, a[1] - a[0])
                a, b = (a[0], cut), (cut, a[1])
        else:
            b = self.random_segment(document, max(1, target - (a[1] - a[0])))
            last = a_end - 1  # unused sentences go back to the document
        a, b = self.trim(a, b, is_next)
        return (a, b, IS_NEXT if is_next else NOT_NEXT), last

    def single_segments(self, document):
        """Yields (A, empty, IS_NEXT) for MLM-only training: whole sentences packed up to the length."""
        splits = self.splits
        first, end = self.document_splits[document : document + 2]
        max_tokens = self.max_tokens + 1  # [CLS] A [SEP]
        target, chunk_start = self.target_length() + 1, first
        for s in range(first, end):
            if s == end - 1 or splits[s + 1] - splits[chunk_start] >= target:
                a_start = splits[chunk_start]
                a_end = min(splits[s + 1], a_start + max_tokens)
                yield (a_start, a_end), (a_end, a_end), IS_NEXT
                target, chunk_start = self.target_length() + 1, s + 1


def check_sequence_length(sequence_length):
    """Refuses a packed length too short for `[CLS] A [SEP] B [SEP]`."""
    if sequence_length < 5:
        raise ValueError(
            f"sequence_length={sequence_length} is too short for pre-training examples "
            "([CLS] A [SEP] B [SEP] needs at least 5); use 32 or more."
        )


def _check_pairing(corpus, sequence_length, next_sentence_prediction):
    check_sequence_length(sequence_length)
    num_documents = len(corpus.document_splits) - 1
    if next_sentence_prediction and num_documents < 2:
        raise ValueError(
            f"Next sentence prediction needs at least two documents (NotNext spans come "
            f"from another document); the corpus has {num_documents}. Keep document "
            "boundaries (blank lines between documents in text files), or pass "
            "next_sentence_prediction=False."
        )


def sentence_pairs(
    corpus,
    sequence_length,
    next_sentence_prediction=True,
    short_sequence_probability=0.1,
    dupe_factor=1,
    seed=None,
    progress=True,
):
    """Pre-training examples from a tokenized corpus (BERT sec. 3.1 Task #2, A.2).

    With next sentence prediction, each example is two spans A and B of whole
    sentences (cut only by truncation): B is the actual continuation of A
    (IsNext, label 0) 50% of the time, and a span from a different, randomly
    chosen document otherwise (NotNext, label 1). `len(A) + len(B) <=
    sequence_length - 3` and neither span is empty. With probability
    `short_sequence_probability` an example aims at a shorter, random length
    (to reduce the mismatch with short fine-tuning inputs, A.2). Without next
    sentence prediction (the "No NSP" ablation of sec. 5.1), each example is
    consecutive sentences of one document up to `sequence_length - 2` tokens.

    Args:
        corpus: `kzoo.data.TokenizedCorpus`. See `tokenize_documents`.
        sequence_length: int. The packed length, special tokens included.
        next_sentence_prediction: bool. Make NSP pairs (True) or single
            segments. Defaults to `True`.
        short_sequence_probability: float. The chance of a shorter target
            length. Defaults to `0.1`, as in google-research/bert.
        dupe_factor: int. Passes over the corpus, each with new random splits
            and partners (google-research/bert uses 10 with static masks).
            Defaults to `1`.
        seed: int. A seed for reproducible pairs. Defaults to `None`.
        progress: bool. Whether to show a tqdm progress bar. Defaults to `True`.

    Returns:
        `SentencePairs`.

    Example:

    >>> import numpy as np
    >>> corpus = TokenizedCorpus(
    ...     token_ids=np.arange(10, 40, dtype="int32"),
    ...     sentence_splits=np.arange(0, 31, 5),  # six sentences of five tokens
    ...     document_splits=np.array([0, 3, 6]))  # two documents of three sentences
    >>> pairs = sentence_pairs(corpus, sequence_length=16, seed=0, progress=False)
    >>> all(len(a) + len(b) <= 13 and len(a) > 0 and len(b) > 0
    ...     for a, b in zip(pairs.segment_a, pairs.segment_b))
    True
    """
    spans = sentence_pair_spans(
        corpus, sequence_length, next_sentence_prediction, short_sequence_probability, dupe_factor, seed, progress
    )
    token_ids = corpus.token_ids
    return SentencePairs(
        segment_a=[token_ids[start:end] for start, end in spans.segment_a.tolist()],
        segment_b=[token_ids[start:end] for start, end in spans.segment_b.tolist()],
        next_sentence_label=spans.next_sentence_label,
        document_index=spans.document_index,
    )


def sentence_pair_spans(
    corpus,
    sequence_length,
    next_sentence_prediction=True,
    short_sequence_probability=0.1,
    dupe_factor=1,
    seed=None,
    progress=True,
):
    """`sentence_pairs` as token offsets into the corpus (BERT sec. 3.1 Task #2, A.2):
    the same examples for the same arguments, without copying any token.

    Every span is consecutive text of one document, so a pair is four
    offsets; `pretraining_dataset` gathers all spans at once from them.

    Args:
        corpus: `kzoo.data.TokenizedCorpus`. As in `sentence_pairs`.
        sequence_length: int. As in `sentence_pairs`.
        next_sentence_prediction: bool. As in `sentence_pairs`. Defaults to `True`.
        short_sequence_probability: float. As in `sentence_pairs`. Defaults to `0.1`.
        dupe_factor: int. As in `sentence_pairs`. Defaults to `1`.
        seed: int. As in `sentence_pairs`. Defaults to `None`.
        progress: bool. As in `sentence_pairs`. Defaults to `True`.

    Returns:
        `PairSpans`.

    Example:

    >>> import numpy as np
    >>> corpus = TokenizedCorpus(np.arange(100, 124, dtype="int32"),
    ...     sentence_splits=np.arange(0, 25, 4), document_splits=np.array([0, 2, 4, 6]))
    >>> spans = sentence_pair_spans(corpus, sequence_length=12, seed=0, progress=False)
    >>> pairs = sentence_pairs(corpus, sequence_length=12, seed=0, progress=False)
    >>> start, end = spans.segment_b[0]
    >>> corpus.token_ids[start:end].tolist() == pairs.segment_b[0].tolist()
    True
    """
    _check_pairing(corpus, sequence_length, next_sentence_prediction)
    num_documents = len(corpus.document_splits) - 1
    generator = _PairGenerator(
        corpus, sequence_length, short_sequence_probability, np.random.default_rng(seed)
    )
    make = generator.document_pairs if next_sentence_prediction else generator.single_segments
    a_spans, b_spans, labels, documents = [], [], [], []
    with tqdm(total=dupe_factor * num_documents, desc="pairing", unit="doc", disable=not progress) as bar:
        for _ in range(dupe_factor):
            for document in range(num_documents):
                for a, b, label in make(document):
                    a_spans.append(a)
                    b_spans.append(b)
                    labels.append(label)
                    documents.append(document)
                bar.update()
    return PairSpans(
        segment_a=np.array(a_spans, dtype=np.int64).reshape(-1, 2),
        segment_b=np.array(b_spans, dtype=np.int64).reshape(-1, 2),
        next_sentence_label=np.array(labels, dtype=np.int32),
        document_index=np.array(documents, dtype=np.int64),
    )
