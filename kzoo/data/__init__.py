"""Data preparation on tf.data / tensorflow-text, feeding models on any backend.

- `learn_wordpiece_vocabulary`: a WordPiece vocabulary from a corpus (BERT
  sec. 3); it lives in `kzoo.tokenizers` and is re-exported here.
- `read_documents`, `read_text_files`: document-level corpora (BERT sec. 3.1);
  `stream_text_file` yields one file's documents one at a time.
- `pretraining_dataset`: the whole pre-training pipeline, tokenize → NSP pairs →
  pack → MLM masking → batch, built from `tokenize_documents`,
  `sentence_pair_spans` (`sentence_pairs` as token offsets), `pack_segments`
  (BERT's `[CLS] A [SEP] B [SEP]`, also used by the models' preprocessors)
  and `mask_language_model` (`default_max_predictions` per sequence).
- `batch_by_length`: batches of similar-length sequences within a token
  budget (Transformer sec. 5.1).
- `length_ladder`, `ladder_length`, `length_batches`: the few lengths a
  batch of text is padded to, and batches of similar lengths, for the
  models' raw-text `fit` / `predict` (`kzoo.data.padding_ladder`).
- `write_pretraining_tfrecords`, `read_pretraining_tfrecords`: pre-masked
  examples as sharded TFRecords in google-research/bert's format, read
  interleaved and split over hosts.
- `write_pretraining_shards`: the same at corpus scale: text shards to
  TFRecord shards in parallel processes or on Apache Beam, memory flat in the
  corpus size (NSP partners from a window of documents).
"""

from kzoo.data.corpus_shards import write_pretraining_shards
from kzoo.data.documents import read_documents, read_text_files, stream_text_file
from kzoo.data.length_batching import batch_by_length, length_boundaries
from kzoo.data.padding_ladder import ladder_length, length_batches, length_ladder
from kzoo.data.masked_lm import default_max_predictions, mask_language_model
from kzoo.data.packing import pack_segments
from kzoo.data.pretraining_dataset import pretraining_dataset
from kzoo.data.pretraining_tfrecords import (
    read_pretraining_tfrecords,
    write_pretraining_tfrecords,
)
from kzoo.data.sentence_pairs import (
    PairSpans,
    SentencePairs,
    TokenizedCorpus,
    sentence_pair_spans,
    sentence_pairs,
    tokenize_documents,
)
from kzoo.tokenizers.wordpiece_vocabulary import learn_wordpiece_vocabulary

__all__ = [
    "batch_by_length",
    "length_boundaries",
    "PairSpans",
    "SentencePairs",
    "TokenizedCorpus",
    "default_max_predictions",
    "ladder_length",
    "learn_wordpiece_vocabulary",
    "length_batches",
    "length_ladder",
    "mask_language_model",
    "pack_segments",
    "pretraining_dataset",
    "read_documents",
    "read_pretraining_tfrecords",
    "read_text_files",
    "sentence_pair_spans",
    "sentence_pairs",
    "stream_text_file",
    "tokenize_documents",
    "write_pretraining_shards",
    "write_pretraining_tfrecords",
]
