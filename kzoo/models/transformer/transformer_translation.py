"""Raw source text in, translations out: the preprocessor, beam search (sec.
6.1) and the tokenizer's detokenizer around `Transformer.generate`."""

import keras
import numpy as np
import tensorflow as tf

from kzoo.data.padding_ladder import ladder_length, length_batches
from kzoo.models.input_checks import check_int
from kzoo.progress import Progress


def translate(model, preprocessor, sources, batch_size=32, progress=False, **search):
    """Translations of source strings (sec. 6.1's beam search by default).

    Sources are grouped by length (`kzoo.data.length_batches`), and every
    batch is `batch_size` sources padded only to the smallest rung of
    `kzoo.data.length_ladder(source_length)` that holds its longest (the
    short batch filled up with copies of its first source, whose outputs are
    dropped): compiled search compiles at most once per rung, and a short
    sentence is not searched next to 256 positions of padding. Each source's
    output limit (its own length + 50, sec. 6.1) does not depend on the
    batch, so the translations are those of one fixed shape, in the order given.

    Args:
        model: `kzoo.Transformer`. The trained model.
        preprocessor: `kzoo.TransformerPreprocessor`. The one it was trained
            with (tokenizer and `source_length`).
        sources: list of str. The sentences to translate.
        batch_size: int. Sources per call of `generate`. Defaults to `32`.
        progress: bool. Show progress (a bar on a terminal, a line every 10 s
            in a log). Defaults to `False`.
        **search: `Transformer.generate` arguments (`beam_size`,
            `length_penalty`, `max_length`).

    Returns:
        A list of str, one translation per source, in order.

    Example:

    >>> import kzoo
    >>> tokenizer = kzoo.TransformerTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b"])
    >>> preprocessor = kzoo.TransformerPreprocessor(tokenizer, source_length=8, target_length=8)
    >>> model = kzoo.Transformer(vocabulary_size=6, num_layers=1, num_heads=2, hidden_dim=8,
    ...                          intermediate_dim=16, max_sequence_length=32)
    >>> outputs = translate(model, preprocessor, ["a b", "b"], batch_size=4, beam_size=2, max_length=5)
    >>> len(outputs), all(isinstance(text, str) for text in outputs)
    (2, True)
    """
    batch_size = check_int(batch_size, "batch_size", "translate")
    if isinstance(sources, str) or not all(isinstance(s, str) for s in sources):
        raise ValueError("translate takes a list of source strings (one sentence each).")
    sources = list(sources)
    length = preprocessor.source_length
    outputs = [""] * len(sources)
    if not sources:
        return outputs
    source_ids = preprocessor(tf.constant(sources))
    if isinstance(source_ids, tf.RaggedTensor):  # a preprocessor with pad=False
        source_ids = source_ids.to_tensor(shape=[None, length])
    source_ids = np.asarray(source_ids)
    lengths = (source_ids != preprocessor.tokenizer.padding_id).sum(axis=1)
    shown = Progress(len(sources), unit="sentence", label="translating: ") if progress else None
    for batch in length_batches(lengths, batch_size, "by_length"):
        rows = np.concatenate([batch, np.repeat(batch[:1], batch_size - len(batch))])
        rung = ladder_length(int(lengths[batch].max()), length)
        tokens = model.generate(source_ids[rows, :rung], **search)
        texts = preprocessor.tokenizer.detokenize(keras.ops.convert_to_numpy(tokens)).numpy()
        for row, text in zip(batch, texts):
            outputs[row] = text.decode("utf-8")
        if shown is not None:
            shown.add(len(batch))
    return outputs
