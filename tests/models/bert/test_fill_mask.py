"""Fill-mask on raw text (BERT sec. 3.1): special tokens written in the text read as
Hugging Face reads them, and the top-k predictions equal transformers' own."""

import keras
import numpy as np
import pytest
import torch
import transformers

import kzoo
from tests.models.bert import checkpoint_fixtures as fx

TEXTS = [
    "We went to [MASK] and Berlin.",
    "[CLS] the cafe[SEP]is open [PAD] today[MASK]",
    "[mask] is not [ MASK ] but [MASK][MASK] is two",
    "Paris [UNK] [UNK]able, [SEP].",
    "no special token here",
    "",
]


@pytest.fixture(scope="module")
def hf_masked_lm(tmp_path_factory):
    directory = tmp_path_factory.mktemp("masked_lm")
    model = fx.random_hf_model(transformers.BertForMaskedLM)
    model.save_pretrained(directory / "hf")
    fx.write_vocabulary(directory, fx.UNCASED)
    hf_tokenizer = transformers.BertTokenizerFast(vocab=str(directory / "vocab.txt"), do_lower_case=True)
    hf_tokenizer.save_pretrained(directory / "hf")
    return model, hf_tokenizer, directory / "hf"


@pytest.mark.backend_independent
@pytest.mark.parametrize("vocabulary,lowercase", [(fx.UNCASED, True), (fx.CASED, False)], ids=["uncased", "cased"])
def test_special_tokens_in_strings_match_transformers_default(tmp_path, vocabulary, lowercase):
    path = fx.write_vocabulary(tmp_path, vocabulary)
    hf = transformers.BertTokenizerFast(vocab=path, do_lower_case=lowercase)
    reading = kzoo.BertTokenizer(path, lowercase=lowercase, special_tokens_in_strings=True)
    expected = [hf(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    assert reading(TEXTS).to_list() == expected
    assert sum(ids.count(hf.mask_token_id) for ids in expected) == 4  # not vacuous
    ids, starts, ends = reading.tokenize_with_offsets(TEXTS)
    offsets = [hf(t, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"] for t in TEXTS]
    assert [list(zip(s, e)) for s, e in zip(starts.to_list(), ends.to_list())] == offsets  # ASCII: bytes = chars

    # The default reads text as data, as transformers with split_special_tokens=True.
    data = transformers.BertTokenizerFast(vocab=path, do_lower_case=lowercase, split_special_tokens=True)
    default = kzoo.BertTokenizer(path, lowercase=lowercase)
    assert default(TEXTS).to_list() == [data(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    assert default(TEXTS).to_list() != expected
    config = reading.get_config()
    assert kzoo.BertTokenizer.from_config(config).special_tokens_in_strings is True


def test_fill_mask_matches_transformers(hf_masked_lm):
    hf_model, hf_tokenizer, directory = hf_masked_lm
    model = kzoo.BertMaskedLM.from_preset(directory)
    assert not model.tokenizer.special_tokens_in_strings  # the preset's tokenizer is unchanged
    texts = ["We went to [MASK] and Berlin.", "The [MASK] is open, the [MASK] closed today."]
    found = model.fill_mask(texts, top_k=4)

    for text, per_mask in zip(texts, found):
        encoded = hf_tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            logits = hf_model(**encoded).logits[0]
        positions = (encoded["input_ids"][0] == hf_tokenizer.mask_token_id).nonzero()[:, 0]
        assert len(per_mask) == len(positions)
        for candidates, position in zip(per_mask, positions):
            probabilities = torch.softmax(logits[position], -1).numpy()
            best = np.argsort(-probabilities)[:4]
            assert [token for token, _ in candidates] == hf_tokenizer.convert_ids_to_tokens(best.tolist())
            np.testing.assert_allclose([p for _, p in candidates], probabilities[best], atol=1e-4)
    single, batch = model.fill_mask("We went to [MASK].", top_k=2), model.fill_mask(["We went to [MASK]."], top_k=2)[0]
    assert [t for t, _ in single[0]] == [t for t, _ in batch[0]]
    np.testing.assert_allclose([p for _, p in single[0]], [p for _, p in batch[0]], atol=1e-6)


def test_fill_mask_errors_say_what_to_do():
    keras.utils.set_random_seed(0)
    backbone = kzoo.BertBackbone(vocabulary_size=len(fx.UNCASED), num_layers=1, num_heads=2, hidden_dim=8,
                                 intermediate_dim=16, max_sequence_length=8)
    model = kzoo.BertPretrainer(backbone, tokenizer=kzoo.BertTokenizer(fx.UNCASED))
    with pytest.raises(ValueError, match=r"Text 1 \('the cafe'\) has no \[MASK\]: write \[MASK\]"):
        model.fill_mask(["the [MASK]", "the cafe"])
    with pytest.raises(ValueError, match="top_k must be a positive int"):
        model.fill_mask("the [MASK]", top_k=0)
    with pytest.raises(ValueError, match="each at most 6 tokens long"):
        model.fill_mask("the cafe is open today and we went [MASK]")
    with pytest.raises(ValueError, match="fill_mask takes one or more texts"):
        model.fill_mask([])
    with pytest.raises(ValueError, match="needs the model's tokenizer"):
        kzoo.BertMaskedLM(backbone).fill_mask("the [MASK]")
