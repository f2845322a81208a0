"""kzoo TransformerTokenizer (sec. 5.1 shared source-target vocabulary):
special ids, exact tokenize → detokenize round trips, words written against
the previous one as continuation pieces, [EOS]/[PAD]/[BOS] handling, vocabulary
learning, tf.data, config and presets."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.models.transformer.transformer_tokenizer import TransformerTokenizer

pytestmark = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)

SMALL = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "Hallo", "Welt", "hallo", "##,", "##!", "!",
         "E", "##-", "##M", "##ail", ",", "Datei", "(", "##Dat", "##ei", "##)"]

EN = ["Cannot open file '%s': permission denied.", "Save the document (as PDF)?",
      "The E-Mail address is invalid!", "Resize the window to 50% of the screen."]
DE = ["Kann Datei »%s« nicht öffnen: Zugriff verweigert.", "Das Dokument (als PDF) speichern?",
      "Die E-Mail-Adresse ist ungültig!", "Größe des Fensters auf 50 % des Bildschirms ändern."]


@pytest.fixture(scope="module")
def trained():
    return TransformerTokenizer.train((EN + DE) * 10, 200, progress=False)


def test_special_token_ids():
    tokenizer = TransformerTokenizer(SMALL)
    assert (tokenizer.padding_id, tokenizer.start_id, tokenizer.end_id) == (0, 2, 3)
    assert tokenizer.unknown_token_id == 1 and tokenizer.vocabulary_size() == len(SMALL) == 20
    shuffled = ["x", "[EOS]", "[UNK]", "[BOS]", "[PAD]"]
    assert (TransformerTokenizer(shuffled).padding_id, TransformerTokenizer(shuffled).end_id) == (4, 1)
    with pytest.raises(ValueError, match=r"\['\[BOS\]', '\[EOS\]'\].*TransformerTokenizer"):
        TransformerTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])


def test_words_against_the_previous_one_become_continuation_pieces():
    tokenizer = TransformerTokenizer(SMALL)
    ids, starts, ends = tokenizer.tokenize_with_offsets(["Hallo, Welt!", "(Datei) , E-Mail !"])
    # "," after "Hallo" is "##," (7); "," after a space is "," (14); "(Datei)" → ( ##Dat ##ei ##).
    assert ids.to_list() == [[4, 7, 5, 8], [16, 17, 18, 19, 14, 10, 11, 12, 13, 9]]
    # Offsets still point into the original text.
    assert starts.to_list() == [[0, 5, 7, 11], [0, 1, 4, 6, 8, 10, 11, 12, 13, 17]]
    assert ends.to_list() == [[5, 6, 11, 12], [1, 4, 6, 7, 9, 11, 12, 13, 16, 18]]
    assert tokenizer.detokenize(ids).numpy().tolist() == [b"Hallo, Welt!", b"(Datei) , E-Mail !"]


def test_detokenize_inverts_tokenize_on_both_languages(trained):
    texts = EN + DE + ["  Zu   viele\tDateien ", "(E-Mail)? »%s«"]
    ids = trained(texts)
    assert sum(ids.flat_values.numpy() == trained.unknown_token_id) == 0
    expected = [" ".join(t.split()).encode() for t in texts]
    assert trained.detokenize(ids).numpy().tolist() == expected
    # Cased by default: a cased vocabulary, upper-case letters kept.
    assert "Datei" in trained.get_vocabulary() and not trained.lowercase


def test_detokenize_stops_at_end_and_drops_padding_and_start():
    tokenizer = TransformerTokenizer(SMALL)
    rows = [[2, 4, 7, 5, 3, 9, 9], [2, 6, 8, 0, 0, 0, 0], [3, 4, 0, 0, 0, 0, 0]]
    expected = [b"Hallo, Welt", b"hallo!", b""]
    for ids in (rows, np.array(rows), tf.constant(rows, tf.int64), keras.ops.convert_to_tensor(rows)):
        assert tokenizer.detokenize(ids).numpy().tolist() == expected
    ragged = [[2, 4, 7, 5, 3, 9], [6, 8]]
    assert tokenizer.detokenize(ragged).numpy().tolist() == [b"Hallo, Welt", b"hallo!"]
    assert tokenizer.detokenize(tf.ragged.constant(ragged)).numpy().tolist() == [b"Hallo, Welt", b"hallo!"]
    assert tokenizer.detokenize([4, 7, 5, 3, 4]).numpy() == b"Hallo, Welt"
    with pytest.raises(ValueError, match=r"shape \(length,\) or \(batch, length\)"):
        tokenizer.detokenize(np.zeros((1, 2, 3), "int32"))


def test_train_puts_the_special_tokens_first(trained):
    vocabulary = trained.get_vocabulary()
    assert vocabulary[:4] == ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
    assert 140 <= len(vocabulary) <= 200 and len(set(vocabulary)) == len(vocabulary)
    uncased = TransformerTokenizer.train(DE * 5, 100, lowercase=True, progress=False)
    assert uncased.lowercase and "Datei" not in uncased.get_vocabulary()
    assert uncased.detokenize(uncased("Größe DES Fensters")).numpy().decode() == "große des fensters"


def test_graph_mode_in_tf_data(trained):
    expected = trained(DE).to_list()
    scalar = tf.data.Dataset.from_tensor_slices(DE).map(lambda x: (trained(x), trained.detokenize(trained(x))))
    assert [ids.numpy().tolist() for ids, _ in scalar] == expected
    assert [text.numpy().decode() for _, text in scalar] == DE
    batched = tf.data.Dataset.from_tensor_slices(DE).batch(2).map(lambda x: trained(x, sequence_length=8))
    dense = np.concatenate([b.numpy() for b in batched])
    assert dense.shape == (4, 8)
    assert dense.tolist() == [(row + [0] * 8)[:8] for row in expected]


def test_config_and_preset_round_trip(trained, tmp_path):
    config = trained.get_config()
    assert config["vocabulary"] == trained.get_vocabulary() and config["lowercase"] is False
    restored = TransformerTokenizer.from_config(config)
    assert restored.get_config() == config
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(trained))
    assert type(again) is TransformerTokenizer and again(DE).to_list() == trained(DE).to_list()
    trained.save_to_preset(tmp_path)
    vocabulary_file = (tmp_path / "assets" / "tokenizer" / "vocabulary.txt").read_text("utf-8")
    assert vocabulary_file.splitlines() == trained.get_vocabulary()
    loaded = TransformerTokenizer.from_preset(str(tmp_path))
    assert loaded(EN + DE).to_list() == trained(EN + DE).to_list()
    assert TransformerTokenizer.from_preset(str(tmp_path), lowercase=True).lowercase


def test_errors():
    tokenizer = TransformerTokenizer(SMALL)
    with pytest.raises(ValueError, match="TransformerTokenizer expected strings"):
        tokenizer([1, 2, 3])
    with pytest.raises(ValueError, match="Unknown TransformerTokenizer arguments"):
        TransformerTokenizer(SMALL, sequence_length=3)
