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


def tokenize_documents(documents, tokenizer, batch_size=4096, progress=True):
    """Tokenizes every sentence of a corpus, keeping sentence and document boundaries.

    Sentences that tokenize to nothing are dropped, and documents left empty with them.

    Args:
        documents: a list of documents, each a list of sentence strings
            (see `kzoo.data.read_documents`).
        tokenizer: a `kzoo.BertTokenizer` (BERT sec. 3 WordPiece).
        batch_size: sentences per tokenizer call (calls run on one thread per CPU core).
        progress: show a tqdm progress bar.

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

    def tokenized(start):
        ragged = tokenizer.tokenize(tf.constant(sentences[start : start + batch_size]))
        return ragged.flat_values.numpy(), ragged.row_lengths().numpy()

    # TensorFlow's eager kernels release the GIL: batches tokenized on one
    # thread per core, results taken in order.
    ids, lengths = [], []
    starts = range(0, len(sentences), batch_size)
    with tqdm(total=len(sentences), desc="tokenizing", unit="sentence", disable=not progress) as bar:
        with ThreadPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1, len(starts)))) as pool:
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
    corrections listed in the module docstring."""

    def __init__(self, corpus, sequence_length, short_sequence_probability, rng):
        self.corpus = corpus
        self.rng = rng
        self.short_sequence_probability = short_sequence_probability
        self.max_tokens = sequence_length - 3  # [CLS] A [SEP] B [SEP]
        self.num_documents = len(corpus.document_splits) - 1

    def sentence(self, index):
        splits = self.corpus.sentence_splits
        return self.corpus.token_ids[splits[index] : splits[index + 1]]

    def target_length(self):
        if self.rng.random() < self.short_sequence_probability:
            return int(self.rng.integers(2, self.max_tokens + 1))
        return self.max_tokens

    def random_segment(self, document, target_length):
        """Sentences of another document, from a random start, up to `target_length` tokens."""
        other = int(self.rng.integers(self.num_documents - 1))
        other += other >= document  # uniform over the other documents
        first, end = self.corpus.document_splits[other : other + 2]
        pieces, length = [], 0
        for s in range(int(self.rng.integers(first, end)), end):
            pieces.append(self.sentence(s))
            length += len(pieces[-1])
            if length >= target_length:
                break
        return np.concatenate(pieces)

    def trim(self, a, b, is_next):
        trim_a, trim_b = longest_first_trim(len(a), len(b), self.max_tokens)
        if is_next:  # keep the junction: A loses its start, B its end
            return a[trim_a:], b[: len(b) - trim_b]
        a = a[trim_a:] if self.rng.random() < 0.5 else a[: len(a) - trim_a]
        b = b[trim_b:] if self.rng.random() < 0.5 else b[: len(b) - trim_b]
        return a, b

    def document_pairs(self, document):
        """Yields (A, B, label) for one document."""
        first, end = (int(x) for x in self.corpus.document_splits[document : document + 2])
        target, chunk, length, s = self.target_length(), [], 0, first
        while s < end:
            chunk.append(s)
            length += len(self.sentence(s))
            if s == end - 1 or length >= target:
                pair, s = self.pair_from_chunk(document, chunk, s, end, target)
                if pair is not None:
                    yield pair
                target, chunk, length = self.target_length(), [], 0
            s += 1

    def pair_from_chunk(self, document, chunk, last, end, target):
        """One pair from the chunk of sentences `chunk`; returns (pair, last sentence used)."""
        is_next = self.rng.random() < 0.5
        if is_next and len(chunk) == 1:
            if last + 1 < end:  # continue into the next sentence
                last += 1
                chunk.append(last)
            elif len(self.sentence(last)) < 2:
                is_next = False  # nothing can follow a one-token, last sentence
        if len(chunk) >= 2:
            a_end = int(self.rng.integers(1, len(chunk)))
            a = np.concatenate([self.sentence(s) for s in chunk[:a_end]])
        else:
            a_end, a = 1, self.sentence(chunk[0])
        if is_next:
            if len(chunk) >= 2:
                b = np.concatenate([self.sentence(s) for s in chunk[a_end:]])
            else:  # a single, last sentence: split it at a random token
                cut = int(self.rng.integers(1, len(a)))
                a, b = a[:cut], a[cut:]
        else:
            b = self.random_segment(document, max(1, target - len(a)))
            last -= len(chunk) - a_end  # unused sentences go back to the document
        a, b = self.trim(a, b, is_next)
        return (a, b, IS_NEXT if is_next else NOT_NEXT), last

    def single_segments(self, document):
        """Yields (A, empty, IS_NEXT) for MLM-only training: whole sentences packed up to the length."""
        first, end = (int(x) for x in self.corpus.document_splits[document : document + 2])
        max_tokens = self.max_tokens + 1  # [CLS] A [SEP]
        target, chunk, length = self.target_length() + 1, [], 0
        for s in range(first, end):
            chunk.append(self.sentence(s))
            length += len(chunk[-1])
            if s == end - 1 or length >= target:
                a = np.concatenate(chunk)[:max_tokens]
                yield a, a[:0], IS_NEXT
                target, chunk, length = self.target_length() + 1, [], 0


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
        corpus: a `TokenizedCorpus` (see `tokenize_documents`).
        sequence_length: the packed length, special tokens included.
        next_sentence_prediction: make NSP pairs (True) or single segments.
        short_sequence_probability: 0.1 as in google-research/bert.
        dupe_factor: passes over the corpus, each with new random splits
            and partners (google-research/bert uses 10 with static masks).
        seed: an int for reproducible pairs.
        progress: show a tqdm progress bar.

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
    if sequence_length < 5:
        raise ValueError(
            f"sequence_length={sequence_length} is too short for pre-training examples "
            "([CLS] A [SEP] B [SEP] needs at least 5); use 32 or more."
        )
    num_documents = len(corpus.document_splits) - 1
    if next_sentence_prediction and num_documents < 2:
        raise ValueError(
            f"Next sentence prediction needs at least two documents (NotNext spans come "
            f"from another document); the corpus has {num_documents}. Keep document "
            "boundaries (blank lines between documents in text files), or pass "
            "next_sentence_prediction=False."
        )
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
    return SentencePairs(
        segment_a=a_spans,
        segment_b=b_spans,
        next_sentence_label=np.array(labels, dtype=np.int32),
        document_index=np.array(documents, dtype=np.int64),
    )
