"""Text to token ids on tensorflow-text, for every model family (BERT sec. 3's
WordPiece; the Transformer's shared vocabulary, sec. 5.1, uses the same).

- `wordpiece_tokenizer.WordPieceTokenizer`: normalization + WordPiece over any
  vocabulary; `kzoo.BertTokenizer` and `kzoo.TransformerTokenizer` subclass it.
- `word_splitting`: BERT's basic tokenization, `normalize` and `split_words`.
- `inputs`: `read_vocabulary` (a file or a list) and `to_string_tensor` (text in).
- `wordpiece_vocabulary.learn_wordpiece_vocabulary`: a vocabulary from a corpus.

Nothing here imports `kzoo.models`.
"""

from kzoo.tokenizers.inputs import read_vocabulary, to_string_tensor
from kzoo.tokenizers.word_splitting import normalize, split_words
from kzoo.tokenizers.wordpiece_tokenizer import WordPieceTokenizer
from kzoo.tokenizers.wordpiece_vocabulary import learn_wordpiece_vocabulary

__all__ = [
    "WordPieceTokenizer",
    "learn_wordpiece_vocabulary",
    "normalize",
    "read_vocabulary",
    "split_words",
    "to_string_tensor",
]
