"""`kzoo.translate` groups sources by length and pads each batch to a rung of the ladder:
the translations equal those of one fixed shape (every source in one batch at the full source length),
in the order given."""

import keras
import numpy as np
import tensorflow as tf

import kzoo

VOCABULARY = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"] + [f"w{i}" for i in range(60)]


def test_translations_equal_fixed_length_ones_in_the_callers_order():
    keras.utils.set_random_seed(3)
    tokenizer = kzoo.TransformerTokenizer(VOCABULARY)
    preprocessor = kzoo.TransformerPreprocessor(tokenizer, source_length=48, target_length=48)
    model = kzoo.Transformer(vocabulary_size=len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=16,
                             intermediate_dim=32, max_sequence_length=128)
    rng = np.random.default_rng(0)
    sources = [" ".join(f"w{j}" for j in rng.integers(0, 60, k)) for k in (0, 3, 40, 15, 60, 1, 7, 20, 2)]
    translations = kzoo.translate(model, preprocessor, sources, batch_size=4, beam_size=2)
    # One call: each row's search and output limit (its length + 50) are its own, as in translate's batches.
    tokens = model.generate(np.asarray(preprocessor(tf.constant(sources))), beam_size=2)
    fixed = [text.decode("utf-8") for text in tokenizer.detokenize(keras.ops.convert_to_numpy(tokens)).numpy()]
    assert translations == fixed
    assert sum(len(t.split()) for t in translations) > 20  # the untrained model says something
    assert kzoo.translate(model, preprocessor, [], beam_size=2) == []
