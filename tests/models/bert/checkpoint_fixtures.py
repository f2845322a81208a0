"""Checkpoints made here, offline, for the conversion tests (BERT sec. 3, Appendix A):
tiny vocabularies, random Hugging Face models, and the outputs to compare."""

import os

import keras
import numpy as np
import torch
import transformers

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "the", "a", "cafe", "is", "open", "closed", "today", "we", "went", "to", "paris", "and",
    "berlin", "music", "film", "good", "bad", "very", "un", "not", "it", "was", "quite",
    "in", "of", "on", "at", "for", "with", "story", "ending", "new", "old", "city", "river",
]
PIECES = ["##s", "##ed", "##ing", "##ly", "##able", "##er", "##believ", "##e", "##é"]
PUNCTUATION = [".", ",", "!", "?", "'", "-"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"
UNCASED = list(dict.fromkeys(SPECIAL + WORDS + PIECES + PUNCTUATION + [f"##{c}" for c in LETTERS] + list(LETTERS)))
CASED = UNCASED + ["The", "Paris", "Berlin", "We", "It", "Café", "Music", "City", "A"]
SENTENCES = [
    "The cafe is open today.",
    "We went to Paris and Berlin!",
    "It was quite unbelievable, not bad.",
    "Café music in the old city",
    "the new story's ending was very good",
    "rivers and cities: opened, closed?",
    "Zebra xylophone qwerty",
]


def write_vocabulary(directory, tokens):
    path = os.path.join(str(directory), "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokens))
    return path


def random_hf_model(model_class, seed=0, **config):
    """A `transformers` BERT model with every parameter random (LayerNorm and
    biases included, so no tensor can match by its initial value)."""
    settings = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    max_position_embeddings=40, vocab_size=len(UNCASED))
    settings.update(config)
    torch.manual_seed(seed)
    model = model_class(transformers.BertConfig(**settings)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn_like(parameter) * 0.2 + (1.0 if parameter.ndim == 1 else 0.0) * 0.1)
    return model


def inputs(vocabulary_size, num_segments=2, seed=0):
    """A batch of two sequences, the second padded; positions to predict."""
    rng = np.random.RandomState(seed)
    token_ids = rng.randint(5, vocabulary_size, (2, 10))
    padding_mask = np.ones((2, 10), "int32")
    padding_mask[1, 7:] = 0
    return {
        "token_ids": token_ids.astype("int32"),
        "segment_ids": rng.randint(0, num_segments, (2, 10)).astype("int32"),
        "padding_mask": padding_mask,
    }, np.array([[1, 4, 8], [2, 3, 6]], "int32")


def hf_outputs(model, features, positions):
    """Sequence/pooled outputs and any head's logits of a `transformers` model."""
    with torch.no_grad():
        arguments = {
            "input_ids": torch.tensor(features["token_ids"], dtype=torch.long),
            "token_type_ids": torch.tensor(features["segment_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(features["padding_mask"], dtype=torch.long),
        }
        base = getattr(model, "bert", model)(**arguments)
        outputs = {"sequence_output": base.last_hidden_state.numpy()}
        if base.pooler_output is not None:
            outputs["pooled_output"] = base.pooler_output.numpy()
        if model is not base and not isinstance(model, transformers.BertModel):
            result = model(**arguments)
            if hasattr(result, "prediction_logits"):
                outputs["mlm_logits"] = np.take_along_axis(result.prediction_logits.numpy(), positions[..., None], 1)
                outputs["nsp_logits"] = result.seq_relationship_logits.numpy()
            for name in ("logits", "start_logits", "end_logits"):
                if getattr(result, name, None) is not None:
                    outputs[name] = getattr(result, name).numpy()
    return outputs


def max_differences(expected, found, padding_mask):
    """{output: max |difference|} over real tokens, for every output in `expected`."""
    real = padding_mask.astype(bool)
    differences = {}
    for name, reference in expected.items():
        value = keras.ops.convert_to_numpy(found[name])
        assert value.shape == reference.shape, (name, value.shape, reference.shape)
        if name in ("sequence_output", "start_logits", "end_logits") or (name == "logits" and value.ndim == 3):
            value, reference = value[real], reference[real]
        differences[name] = float(np.abs(value - reference).max())
    return differences


def assert_tokenizers_agree(kzoo_tokenizer, hf_tokenizer, sentences=SENTENCES, min_distinct=20):
    """Same ids for every sentence, and not vacuously: many distinct ids, few [UNK]."""
    expected = [hf_tokenizer(s, add_special_tokens=False)["input_ids"] for s in sentences]
    found = kzoo_tokenizer(sentences).to_list()
    assert found == expected
    ids = [i for sentence in expected for i in sentence]
    unknown = hf_tokenizer.convert_tokens_to_ids("[UNK]")
    assert len(set(ids)) >= min_distinct, sorted(set(ids))
    assert ids.count(unknown) <= len(ids) // 10, ids.count(unknown)
