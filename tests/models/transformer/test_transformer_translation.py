"""`kzoo.translate` groups sources by length and pads each batch to a rung of the ladder:
the translations equal those of one fixed shape (every source at the full source length),
in the order given."""

import keras
import numpy as np
import tensorflow as tf

import kzoo

VOCABULARY = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"] + [f"w{i}" for i in range(60)]


def test_translations_equal_fixed_length_ones_in_the_callers_order():
    keras.utils.set_random_seed(3)
    tokenizer = kzoo.TransformerTokenizer(VOCABULARY)
    preprocessor = kzoo.TransformerPreprocessor(tokenizer, source_length=32, target_length=32)
    model = kzoo.Transformer(vocabulary_size=len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=16,
                             intermediate_dim=32, max_sequence_length=96)
    rng = np.random.default_rng(0)
    # Sorted by length, two batches of 4: the four shortest (an empty source among them) padded to the
    # 16-token rung, the rest to the full 32 (40 words: cut to fit). Two shapes, each compiled once.
    sources = [" ".join(f"w{j}" for j in rng.integers(0, 60, k)) for k in (0, 15, 40, 3, 1, 20, 7, 2)]
    translations = kzoo.translate(model, preprocessor, sources, batch_size=4, beam_size=2)
    # The fixed shape in the caller's order, in batches of 4 (the full length's batch shape above): each
    # row's search and output limit (its length + 50) are its own, as in translate's batches.
    ids = np.asarray(preprocessor(tf.constant(sources)))
    tokens = np.concatenate([keras.ops.convert_to_numpy(model.generate(ids[at:at + 4], beam_size=2))
                             for at in (0, 4)])
    fixed = [text.decode("utf-8") for text in tokenizer.detokenize(tokens).numpy()]
    assert translations == fixed
    assert sum(len(t.split()) for t in translations) > 20  # the untrained model says something
    assert kzoo.translate(model, preprocessor, [], beam_size=2) == []
