"""Converts BERT checkpoints between formats: `python -m kzoo.convert SRC DST [--format kzoo|huggingface]`.

SRC is a Hugging Face directory or `hf://owner/name`, a google-research
directory or .zip, a KerasHub preset directory, or a kzoo preset directory.
Everything SRC holds is carried over: the encoder,
the pre-training or fine-tuning heads it has (a `BertForPreTraining`
checkpoint becomes a `kzoo.BertPretrainer`), and its tokenizer. DST is
written as a kzoo preset directory (default) or a Hugging Face directory that
`transformers` loads. A progress bar runs over the tensors.

    python -m kzoo.convert uncased_L-12_H-768_A-12.zip bert_base_uncased
    python -m kzoo.convert bert_base_uncased bert_base_uncased_hf --format huggingface
"""

import argparse
import os

import keras

from kzoo import presets, preset_directories
from kzoo.models.bert import bert_checkpoints
from kzoo.models.bert.bert_tokenizer import BertTokenizer


def convert(source, destination, format="kzoo", progress=True):
    """Converts the checkpoint at `source` into `destination` in `format`
    ("kzoo" or "huggingface"), heads and tokenizer included;
    returns the kzoo model it went through.

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
    if format not in bert_checkpoints.EXPORT_FORMATS:
        raise ValueError(f"Unknown format {format!r}: kzoo.convert writes {list(bert_checkpoints.EXPORT_FORMATS)}.")
    detected = bert_checkpoints.detect_format(source)
    if detected in bert_checkpoints.FORMATS:
        opened = bert_checkpoints.open_source(source, detected)
        model = bert_checkpoints.load_from_source(bert_checkpoints.source_class(opened), opened, progress)
        has_tokenizer = opened.tokenizer_config is not None
        tokenizer = bert_checkpoints.tokenizer_from(opened, {}) if has_tokenizer else None
    else:  # a kzoo preset directory: its task, or else its backbone
        model = preset_directories.load(keras.Model, source)
        has_tokenizer = os.path.isfile(os.path.join(os.path.expanduser(source), preset_directories.TOKENIZER_FILE))
        tokenizer = preset_directories.load(BertTokenizer, source) if has_tokenizer else None
    if format == "huggingface":
        bert_checkpoints.save_huggingface(model, destination, tokenizer, progress=progress)
    elif hasattr(model, "backbone"):  # the task carries its own tokenizer
        presets.save_task(model, destination)
    else:
        presets.save_backbone(model, destination)
        if tokenizer is not None:
            presets.save_tokenizer(tokenizer, destination)
    return model


def main(argv=None):
    """The command line (see the module docstring); returns the exit status.

    >>> main(["--help"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    SystemExit: 0
    """
    parser = argparse.ArgumentParser(
        prog="python -m kzoo.convert",
        description="Convert a BERT checkpoint (Hugging Face, google-research, KerasHub or kzoo) "
        "into a kzoo preset directory or a Hugging Face directory.",
    )
    parser.add_argument("source", help="directory, .zip, or hf://owner/name")
    parser.add_argument("destination", help="new or empty directory")
    parser.add_argument("--format", choices=bert_checkpoints.EXPORT_FORMATS, default="kzoo")
    arguments = parser.parse_args(argv)
    model = convert(arguments.source, arguments.destination, arguments.format)
    print(f"Wrote a {type(model).__name__} ({model.count_params():,} parameters) to "
          f"{arguments.destination} ({arguments.format} format).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
