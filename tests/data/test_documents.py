"""Document-level corpus input (BERT sec. 3.1): files, iterables, tf.data."""

import numpy as np
import pytest
import tensorflow as tf

from kzoo.data import read_documents, read_text_files, stream_text_file

pytestmark = pytest.mark.backend_independent  # TensorFlow data code: run once (conftest.py)


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_google_research_text_format(tmp_path):
    write(tmp_path / "a.txt", "  One.\nTwo.\n\n\n Three. \n\nFour.\nFive.")
    write(tmp_path / "b.txt", "\nSix.\n")
    assert read_text_files(tmp_path / "a.txt") == [["One.", "Two."], ["Three."], ["Four.", "Five."]]
    # Globs and lists of patterns; documents never span files; files in sorted order.
    expected = [["One.", "Two."], ["Three."], ["Four.", "Five."], ["Six."]]
    assert read_documents(str(tmp_path / "*.txt")) == expected
    assert read_documents([tmp_path / "a.txt", tmp_path / "b.txt"]) == expected


def test_streamed_file_yields_the_same_documents_one_at_a_time(tmp_path):
    path = write(tmp_path / "a.txt", "  One.\nTwo.\n\n\n Three. \n\nFour.\nFive.")
    stream = stream_text_file(path)
    assert next(stream) == ["One.", "Two."]  # before the rest of the file is read
    assert [["One.", "Two."], *stream] == read_text_files(path)


def test_python_iterables_keep_document_boundaries():
    documents = (d for d in [["a.", " ", "b."], [], np.array(["c."]), (b"d.",)])
    assert read_documents(documents) == [["a.", "b."], ["c."], ["d."]]


def test_tf_data_documents():
    scalars = tf.data.Dataset.from_tensor_slices(["x.\ny.", "\n", "z."])
    assert read_documents(scalars) == [["x.", "y."], ["z."]]
    sentences = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([["p.", "q."], ["r."]]).to_tensor(""))
    assert read_documents(sentences) == [["p.", "q."], ["r."]]


def test_errors_say_what_to_pass(tmp_path):
    with pytest.raises(ValueError, match="No file matches .*list of documents"):
        read_documents(str(tmp_path / "nothing-*.txt"))
    with pytest.raises(ValueError, match="Document 1 is a int"):
        read_documents([["fine."], 3])
    with pytest.raises(ValueError, match="Sentences must be strings"):
        read_documents([["fine.", 7]])
    with pytest.raises(ValueError, match="one document per element"):
        read_documents(tf.data.Dataset.range(3))
