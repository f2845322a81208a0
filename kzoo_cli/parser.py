"""The `kzoo` command's arguments: argparse only, so `kzoo --help` and every
`kzoo COMMAND --help` answer without loading TensorFlow or a Keras backend."""

import argparse

BACKENDS = ("tensorflow", "jax", "torch")
TABLE_FORMATS = ("csv", "tsv", "jsonl")
TEXT_FORMATS = (*TABLE_FORMATS, "txt")
PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")  # kzoo.quantize_embeddings's (no kzoo import here)

EPILOG = """exit status: 0 done; 2 bad arguments, files or columns (the message says what
to change); 1 anything else (with its traceback).

The backend is --backend, else the KERAS_BACKEND environment variable, else
tensorflow. Examples:
  kzoo presets --family bert
  kzoo finetune all_minilm_l6_v2 --train train.csv --text-column text --label-column label --output model
  kzoo predict model --input new.csv --text-column text > predictions.csv
  kzoo search all_minilm_l6_v2 --corpus faq.csv --column question --queries questions.txt
  kzoo fill-mask bert_base_uncased "The capital of France is [MASK]."
"""


FULL_RATE = 5e-5  # the highest of BERT's grid (sec. A.3), for short runs
LORA_RATE = 2e-3  # kzoo.models.bert.bert_optimizer.LORA_LEARNING_RATE, here without loading Keras

def _backend_option(parser, default):
    parser.add_argument(
        "--backend", choices=BACKENDS, default=default,
        help="Keras backend to run on (default: $KERAS_BACKEND, else tensorflow)",
    )


def _command(commands, name, description, backend=True):
    # SUPPRESS: a --backend given before the command is not overwritten by the subparser's default.
    parser = commands.add_parser(name, help=description, description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    if backend:
        _backend_option(parser, argparse.SUPPRESS)
    return parser


def _table_input(parser, default_column):
    parser.add_argument("--text-column", action="append", metavar="NAME",
                        help=f"column holding the text (default: {default_column!r}); give it twice for "
                             "sentence pairs (segment A, then B)")
    parser.add_argument("--input-format", choices=TEXT_FORMATS,
                        help="csv, tsv, jsonl (one JSON object a line) or txt (one text a line); "
                             "default: from the file's extension, txt for standard input")


def _column_option(parser, option, what):
    parser.add_argument(option, default="text", metavar="NAME",
                        help=f"{what} in a .csv, .tsv or .jsonl file (default: 'text')")


def _training(parser, epochs, batch_size, learning_rate, sequence_length, rate_note=""):
    if epochs is not None:
        parser.add_argument("--epochs", type=int, default=epochs, help=f"passes over the data (default: {epochs})")
    parser.add_argument("--batch-size", type=int, default=batch_size, help=f"default: {batch_size}")
    parser.add_argument("--learning-rate", type=float, default=None if rate_note else learning_rate,
                        help=f"peak learning rate after warm-up (default: {learning_rate:g}{rate_note})")
    parser.add_argument("--sequence-length", type=int, default=sequence_length,
                        help=f"tokens per example, [CLS] and [SEP] included (default: {sequence_length})")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def build_parser(prog="kzoo"):
    """The argument parser of the `kzoo` command, one subparser per command.

    Args:
        prog: str. The program's name in messages. Defaults to `"kzoo"`.

    Returns:
        An `argparse.ArgumentParser`; `parse_args` gives a namespace whose
        `command` names the command.

    Example:

    >>> arguments = build_parser().parse_args(["fill-mask", "bert_tiny", "Paris is [MASK]."])
    >>> arguments.command, arguments.texts, arguments.top_k
    ('fill-mask', ['Paris is [MASK].'], 5)
    """
    parser = argparse.ArgumentParser(
        prog=prog, description="kzoo: BERT and the Transformer on TensorFlow, JAX and PyTorch, from the shell.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _backend_option(parser, None)
    parser.add_argument("--version", action="store_true", help="print kzoo's version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    presets = _command(commands, "presets", "List the built-in presets: names, sizes, where weights come from.",
                       backend=False)
    presets.add_argument("--family", choices=("bert", "transformer"), help="only this model family")
    presets.add_argument("--details", action="store_true", help="also print each preset's description")

    convert = _command(commands, "convert", "Convert a BERT checkpoint (Hugging Face, google-research, "
                       "KerasHub or kzoo) into a kzoo preset or a Hugging Face directory.")
    convert.add_argument("source", help="directory, .zip, or hf://owner/name")
    convert.add_argument("destination", help="new or empty directory")
    convert.add_argument("--format", choices=("kzoo", "huggingface"), default="kzoo",
                         help="what to write (default: kzoo)")

    finetune = _command(commands, "finetune", "Fine-tune a BERT classifier on a labelled table of texts "
                        "(BERT sec. 4.1) and save it as a preset directory with its class names.")
    finetune.add_argument("preset", help="preset name (kzoo presets) or directory to start from")
    finetune.add_argument("--train", required=True, metavar="FILE", help="training examples (.csv, .tsv, .jsonl)")
    finetune.add_argument("--validation", metavar="FILE", help="held-out examples, evaluated after each epoch")
    _table_input(finetune, "text")
    finetune.add_argument("--label-column", default="label", metavar="NAME", help="default: 'label'")
    finetune.add_argument("--class-names", metavar="A,B,...",
                          help="the classes, in label-id order (default: the training labels, sorted)")
    finetune.add_argument("--output", required=True, metavar="DIR",
                          help="preset directory to write (with training_curves.png)")
    _training(finetune, epochs=3, batch_size=32, learning_rate=FULL_RATE, sequence_length=128,
              rate_note=f"; {LORA_RATE:g} with --lora-rank")
    finetune.add_argument("--validation-split", type=float, metavar="F",
                          help="hold out the last fraction F of the --train rows (before shuffling) as the "
                               "validation examples, instead of --validation")
    finetune.add_argument("--early-stopping", type=int, metavar="N",
                          help="stop when the validation loss has not improved for N epochs, and keep the best "
                               "epoch (restored and saved to --output as it trains); needs --validation or "
                               "--validation-split")
    finetune.add_argument("--accumulate", type=int, default=1, metavar="K",
                          help="gradient accumulation: one optimizer step every K batches, the update of one "
                               "batch of K x --batch-size (default: 1)")
    finetune.add_argument("--lora-rank", type=int, metavar="R",
                          help="train LoRA adapters of rank R on the attention's query and value instead of "
                               "every weight (the classification layer trains too); the preset records it")

    predict = _command(commands, "predict", "Classify texts with a fine-tuned classifier: "
                       "labels and probabilities as CSV or JSON lines.")
    predict.add_argument("model", help="preset directory written by `kzoo finetune` (or any classifier preset)")
    predict.add_argument("--input", default="-", metavar="FILE", help="texts to classify; - for standard input "
                         "(default)")
    _table_input(predict, "text")
    predict.add_argument("--output", default="-", metavar="FILE", help="- for standard output (default)")
    predict.add_argument("--output-format", choices=("csv", "jsonl"),
                         help="default: from the output file's extension, csv for standard output")
    predict.add_argument("--batch-size", type=int, default=32, help="default: 32")

    embed = _command(commands, "embed", "Embed texts with a sentence embedder (Sentence-BERT): a vector per "
                     "text, as a NumPy .npy array or JSON lines.")
    embed.add_argument("preset", help="embedder preset directory, or a built-in name such as all_minilm_l6_v2")
    embed.add_argument("--input", default="-", metavar="FILE", help="texts to embed (.csv, .tsv, .jsonl, or .txt: "
                       "one text a line); - for standard input (default)")
    _column_option(embed, "--column", "column holding the text")
    embed.add_argument("--input-format", choices=TEXT_FORMATS,
                       help="default: from the file's extension, txt for standard input")
    embed.add_argument("--output", required=True, metavar="FILE",
                       help="OUT.npy (float32, a row per text, in input order) or OUT.jsonl (each input row with "
                            "its 'embedding'); - writes JSON lines to standard output")
    embed.add_argument("--batch-size", type=int, default=32, help="default: 32")
    _embedding_options(embed, "the vectors")
    embed.add_argument("--prompt-name", metavar="NAME",
                       help="the preset's prompt put before each text (e.g. query or document; default: the "
                            "preset's default prompt, if any)")

    search = _command(commands, "search", "Semantic search: for each query, the corpus texts whose embeddings "
                      "are most similar (cosine), as a table of query, rank, score, text, row.")
    search.add_argument("preset", help="embedder preset directory, or a built-in name such as all_minilm_l6_v2")
    search.add_argument("--corpus", required=True, metavar="FILE",
                        help="the texts to search (.csv, .tsv, .jsonl, or .txt: one text a line)")
    _column_option(search, "--column", "corpus column holding the text")
    search.add_argument("--queries", default="-", metavar="FILE",
                        help="the queries, in the same formats; - for standard input, one a line (default)")
    _column_option(search, "--query-column", "queries' column holding the text")
    search.add_argument("--top-k", type=int, default=10, help="results per query (default: 10)")
    search.add_argument("--output", default="-", metavar="FILE", help="- for standard output (default)")
    search.add_argument("--output-format", choices=("csv", "jsonl"),
                        help="default: from the output file's extension, csv for standard output")
    search.add_argument("--batch-size", type=int, default=32, help="texts per batch when embedding (default: 32)")
    search.add_argument("--corpus-embeddings", metavar="X.npy",
                        help="the corpus' vectors, written by `kzoo embed` with the same preset and --corpus: read "
                             "instead of embedding the corpus again (its first rows are checked against the model)")
    _embedding_options(search, "the corpus, searched as codes, the best 2 x top-k rescored with the float queries")
    _reranking(commands, search)

    fill_mask = _command(commands, "fill-mask", "Predict the tokens written as [MASK] in a text "
                         "(BERT sec. 3.1, the masked LM).")
    fill_mask.add_argument("preset", help="a preset with a masked-LM head (pre-trained), name or directory")
    fill_mask.add_argument("texts", nargs="+", metavar="TEXT", help='e.g. "The capital of France is [MASK]."')
    fill_mask.add_argument("--top-k", type=int, default=5, help="candidates per [MASK] (default: 5)")
    fill_mask.add_argument("--json", action="store_true", help="print JSON lines instead of a table")

    attention = _command(commands, "attention", "Draw every attention map of a BERT model for a text "
                         "(layers x heads) to a picture.")
    attention.add_argument("preset", help="preset name or directory")
    attention.add_argument("text", help="the text (segment A)")
    attention.add_argument("--pair", metavar="TEXT", help="a second segment (B)")
    attention.add_argument("--out", required=True, metavar="FILE", help="picture to write (.png, .svg, .pdf)")
    attention.add_argument("--layers", metavar="I,J,...", help="layers to draw, 0-based, negative from the end "
                           "(default: all)")
    attention.add_argument("--heads", metavar="I,J,...", help="heads to draw (default: all)")

    translate = _command(commands, "translate", "Translate sentences with a trained Transformer "
                         "(beam search, sec. 6.1).")
    translate.add_argument("model", help="directory with transformer_translation.keras and preprocessor/ "
                           "(what examples/transformer_translation.py saves)")
    translate.add_argument("--input", default="-", metavar="FILE",
                           help="one sentence a line; - for standard input (default)")
    translate.add_argument("--output", default="-", metavar="FILE", help="- for standard output (default)")
    translate.add_argument("--beam-size", type=int, default=4, help="1 is greedy search (default: 4)")
    translate.add_argument("--length-penalty", type=float, default=0.6, help="alpha (default: 0.6)")
    translate.add_argument("--batch-size", type=int, default=32, help="default: 32")

    pretrain = _command(commands, "pretrain", "Pre-train BERT (masked LM + next sentence prediction, "
                        "BERT sec. 3.1) on text files: one sentence a line, a blank line between documents.")
    pretrain.add_argument("--corpus", required=True, action="append", metavar="GLOB",
                          help="text files, e.g. 'shards/*.txt' (quote it); may be given more than once")
    pretrain.add_argument("--output", required=True, metavar="DIR",
                          help="preset directory to write (with training_curves.png)")
    start = pretrain.add_mutually_exclusive_group()
    start.add_argument("--architecture", default="bert_tiny", metavar="PRESET",
                       help="start from random weights with this preset's architecture and a WordPiece "
                            "vocabulary learned from the corpus (default: bert_tiny)")
    start.add_argument("--preset", metavar="PRESET",
                       help="continue pre-training this pre-trained preset (its weights and tokenizer)")
    pretrain.add_argument("--vocabulary-size", type=int, default=8000,
                          help="WordPiece tokens to learn with --architecture (default: 8000)")
    pretrain.add_argument("--steps", type=int, default=1000, help="optimizer steps (default: 1000)")
    pretrain.add_argument("--dupe-factor", type=int, default=5,
                          help="passes over the corpus when drawing pairs and masks (default: 5)")
    _training(pretrain, epochs=None, batch_size=32, learning_rate=1e-4, sequence_length=128)
    return parser


def _embedding_options(command, what):
    command.add_argument("--truncate-dim", type=int, metavar="N",
                         help="keep the first N dimensions of each vector, scaled back to unit length (Matryoshka "
                              "embeddings; default: all)")
    command.add_argument("--precision", choices=PRECISIONS, default="float32",
                         help=f"float32 (default), or codes of {what}: int8 / uint8 (a byte a dimension, ranges "
                              "from these texts), binary / ubinary (a bit a dimension)")


def _reranking(commands, search):
    """`kzoo rerank`, and `kzoo search`'s options that rerank its results."""
    search.add_argument("--rerank", metavar="MODEL",
                        help="reorder each query's first --rerank-top-k results by this trained reranker (a "
                             "BertReranker preset directory or a sentence-transformers CrossEncoder directory) and "
                             "write its scores")
    search.add_argument("--rerank-top-k", type=int, metavar="K",
                        help="the embedder's results per query that --rerank reorders (default: 50; at least --top-k)")
    search.add_argument("--rerank-weight", type=float, metavar="W",
                        help="order by W x the reranker's standardised logit + (1 - W) x the embedder's standardised "
                             "score, per query (default: the reranker alone; the semantic-search example uses 0.25)")
    rerank = _command(commands, "rerank", "Rerank documents for queries with a cross-encoder (BERT reading the "
                      "query and the document together): a table of query, rank, score, text, row.")
    rerank.add_argument("model", help="a trained reranker: a BertReranker preset directory, or a sentence-transformers "
                        "CrossEncoder directory")
    rerank.add_argument("--documents", required=True, metavar="FILE",
                        help="the texts to rank (.csv, .tsv, .jsonl, or .txt: one text a line); - for standard input")
    _column_option(rerank, "--column", "documents' column holding the text")
    queries = rerank.add_mutually_exclusive_group()
    queries.add_argument("--query", metavar="TEXT", help="one query")
    queries.add_argument("--queries", metavar="FILE", help="queries, in the same formats; - for standard input")
    _column_option(rerank, "--query-column", "queries' column holding the text")
    rerank.add_argument("--top-k", type=int, help="results per query (default: every document)")
    rerank.add_argument("--output", default="-", metavar="FILE", help="- for standard output (default)")
    rerank.add_argument("--output-format", choices=("csv", "jsonl"),
                        help="default: from the output file's extension, csv for standard output")
    rerank.add_argument("--batch-size", type=int, default=32, help="(query, document) pairs per batch (default: 32)")
