"""Converts BERT checkpoints between formats: `kzoo convert SRC DST [--format kzoo|huggingface]`.

SRC is a Hugging Face directory or `hf://owner/name`, a google-research
directory or .zip, a KerasHub preset directory, or a kzoo preset directory.
Everything SRC holds is carried over: the encoder,
the pre-training or fine-tuning heads it has (a `BertForPreTraining`
checkpoint becomes a `kzoo.BertPretrainer`), and its tokenizer. DST is
written as a kzoo preset directory (default) or a Hugging Face directory that
`transformers` loads. A progress bar runs over the tensors.

    kzoo convert uncased_L-12_H-768_A-12.zip bert_base_uncased
    kzoo convert bert_base_uncased bert_base_uncased_hf --format huggingface
"""

import os

import keras

from kzoo import presets
from kzoo.checkpoints import bert_loading
from kzoo.checkpoints.huggingface_export import save_huggingface
from kzoo.models.bert import BertTokenizer
from kzoo.presets import atomic
from kzoo.presets.directory import TOKENIZER_FILE
from kzoo.presets.writing import save_directory

EXPORT_FORMATS = ("kzoo", "huggingface")


def convert(source, destination, format="kzoo", progress=True):
    """Converts a BERT checkpoint into another format, heads and tokenizer
    included.

    Args:
        source: str or os.PathLike. A checkpoint of any format `from_preset`
            reads (Hugging Face, google-research, KerasHub, kzoo).
        destination: str or os.PathLike. A new or empty directory, written
            beside and renamed into place once complete (a conversion that
            fails leaves no partial directory, and an earlier one as it was).
        format: str. "kzoo" or "huggingface". Defaults to `"kzoo"`.
        progress: bool. Show progress bars over the tensors. Defaults to `True`.

    Returns:
        The kzoo model the conversion went through.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertBackbone, BertPretrainer
    >>> source = tempfile.mkdtemp()
    >>> BertPretrainer(BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...     hidden_dim=8, intermediate_dim=16)).save_to_preset(source)
    >>> exported = os.path.join(tempfile.mkdtemp(), "hf")
    >>> type(convert(source, exported, format="huggingface", progress=False)).__name__
    'BertPretrainer'
    >>> sorted(os.listdir(exported))
    ['config.json', 'model.safetensors']
    >>> type(convert(exported, os.path.join(tempfile.mkdtemp(), "kzoo"), progress=False)).__name__
    'BertPretrainer'
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(f"Unknown format {format!r}: kzoo.convert writes {list(EXPORT_FORMATS)}.")
    atomic.recover(source)  # a directory whose save was killed between its two renames
    detected = presets.detect_format(source)
    if detected in bert_loading.READERS:
        opened = bert_loading.open_source(source, detected)
        model = bert_loading.load_from_source(bert_loading.source_class(opened), opened, progress)
        has_tokenizer = opened.tokenizer_config is not None
        tokenizer = bert_loading.tokenizer_from(opened, {}) if has_tokenizer else None
    else:  # a kzoo preset directory: its task, or else its backbone
        model = presets.load_directory(keras.Model, source)
        has_tokenizer = os.path.isfile(os.path.join(os.path.expanduser(source), TOKENIZER_FILE))
        tokenizer = presets.load_directory(BertTokenizer, source) if has_tokenizer else None
    if format == "huggingface":
        save_huggingface(model, destination, tokenizer, progress=progress)
    elif hasattr(model, "backbone"):  # the task carries its own tokenizer
        presets.save_task(model, destination)
    else:  # one write, so a failed conversion leaves no backbone without its tokenizer
        save_directory(model, destination, tokenizer=tokenizer)
    return model
