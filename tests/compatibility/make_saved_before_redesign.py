"""Writes tests/compatibility/saved_before_redesign/: presets and `.keras` files
saved by kzoo before the base-class redesign (commit 3b7ede9), with the outputs
they gave, so that `test_saved_files_load.py` proves later code loads them with
identical outputs on every backend.

    KERAS_BACKEND=tensorflow python tests/compatibility/make_saved_before_redesign.py

Run once, at that commit; the files are committed. Running it again on newer
code would only re-record what that code saves.
"""

import os
import shutil

import keras
import numpy as np

import kzoo

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "saved_before_redesign")
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog", "##s", "ran", "a"]
TEXTS = ["the cat sat on the mat", "a dog ran", "cats and dogs"]
PAIRS = (["the cat sat", "a dog"], ["on the mat", "ran"])


def numpy(tree):
    return keras.tree.map_structure(lambda x: np.asarray(keras.ops.convert_to_numpy(x)), tree)


def tiny_backbone():
    return kzoo.BertBackbone(vocabulary_size=len(VOCABULARY), num_layers=2, num_heads=2, hidden_dim=8,
                             intermediate_dim=16, max_sequence_length=16)


def main():
    shutil.rmtree(HERE, ignore_errors=True)
    os.makedirs(HERE)
    keras.utils.set_random_seed(0)
    tokenizer = kzoo.BertTokenizer(VOCABULARY)
    preprocessor = kzoo.BertPreprocessor(tokenizer, sequence_length=12)
    packed = {k: np.asarray(v) for k, v in preprocessor(PAIRS).items()}
    expected = {}

    pretrainer = kzoo.BertPretrainer(tiny_backbone(), tokenizer=tokenizer)
    pretrainer.save_to_preset(os.path.join(HERE, "bert_pretrainer"))
    masked = {**packed, "mask_positions": np.array([[1, 2], [3, 1]], "int32")}
    for name, value in numpy(pretrainer(masked)).items():
        expected[f"bert_pretrainer/{name}"] = value
    for name, value in numpy(pretrainer.backbone(packed)).items():
        expected[f"bert_backbone/{name}"] = value

    classifier = kzoo.BertClassifier(tiny_backbone(), num_classes=3, preprocessor=preprocessor)
    classifier.save_to_preset(os.path.join(HERE, "bert_classifier"))
    classifier.save(os.path.join(HERE, "bert_classifier.keras"))
    expected["bert_classifier/texts"] = numpy(classifier.predict(TEXTS, verbose=0))
    expected["bert_classifier/pairs"] = numpy(classifier.predict(PAIRS, verbose=0))

    token_classifier = kzoo.BertTokenClassifier(tiny_backbone(), num_classes=3, tags=["O", "B-X", "I-X"],
                                                preprocessor=kzoo.BertTokenClassifierPreprocessor(tokenizer, sequence_length=12))
    token_classifier.save_to_preset(os.path.join(HERE, "bert_token_classifier"))
    expected["bert_token_classifier/words"] = numpy(token_classifier.predict([["the", "cat"], ["a", "dog", "ran"]], verbose=0))

    translator = kzoo.Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8, intermediate_dim=16,
                                  num_heads=2, max_sequence_length=16)
    translator.save_to_preset(os.path.join(HERE, "transformer"))
    translator.save(os.path.join(HERE, "transformer.keras"))
    source = np.array([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]], "int32")
    target = np.array([[2, 5, 6, 7], [2, 8, 9, 0]], "int32")
    expected["transformer/logits"] = numpy(translator({"encoder_token_ids": source, "decoder_token_ids": target}))
    expected["transformer/generate"] = numpy(translator.generate(source, beam_size=2, max_length=6))
    np.savez(os.path.join(HERE, "expected_outputs.npz"), packed_pairs=packed["token_ids"], **expected)


if __name__ == "__main__":
    main()
