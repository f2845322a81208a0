"""The `kzoo` command: BERT and the Transformer from the shell.

    kzoo presets                                   the built-in presets
    kzoo convert SRC DST [--format huggingface]    checkpoints between formats
    kzoo finetune PRESET --train FILE --output DIR fine-tune a classifier (CSV, TSV, JSON lines)
    kzoo predict DIR --input FILE|-                labels and probabilities
    kzoo embed PRESET --input FILE|- --output OUT  sentence embeddings (.npy or JSON lines)
    kzoo search PRESET --corpus FILE --queries FILE|-  the closest corpus texts per query
    kzoo rerank MODEL --documents FILE --query TEXT  documents ordered by a cross-encoder
    kzoo fill-mask PRESET "... [MASK] ..."         the masked LM's guesses
    kzoo attention PRESET "text" --out map.png     every attention map, drawn
    kzoo translate DIR --input FILE|-              beam search with a trained Transformer
    kzoo pretrain --corpus 'shards/*.txt' --output DIR

`pip install kzoo` puts it on PATH; `python -m kzoo` is the same command.
This package sits beside `kzoo`, not inside it, so that `kzoo --help` (and
every `kzoo COMMAND --help`) answers at once: kzoo, TensorFlow and the Keras
backend load only when a command runs, after `--backend` (else
`KERAS_BACKEND`, else tensorflow) has been set.

Exit status: 0 done; 2 bad arguments, files or columns, with a message
saying what to change (`kzoo_cli.tables.CommandError`, and kzoo's own
`ValueError`s: they name what was wrong); 1 anything else, with its traceback.
"""

import importlib.util
import os
import subprocess
import sys

from kzoo_cli.parser import BACKENDS, build_parser
from kzoo_cli.tables import CommandError

# The backends' packages, and the extra that installs each.
BACKEND_PACKAGES = {"tensorflow": ("tensorflow", ""), "jax": ("jax", "jax"), "torch": ("torch", "torch")}
# Errors that mean the input was wrong, not kzoo: reported in one line, status 2.
INPUT_ERRORS = (CommandError, ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError)


def main(argv=None, prog="kzoo"):
    """Runs the `kzoo` command.

    Args:
        argv: list of str or None. The arguments after the program name.
            Defaults to `None`: `sys.argv[1:]`.
        prog: str. The program's name in help and messages. Defaults to `"kzoo"`.

    Returns:
        The exit status: 0 done, 2 bad arguments or input, 1 a failure.

    Example:

    >>> main(["presets", "--family", "transformer"])  # doctest: +ELLIPSIS
    preset ...
    transformer_base ...
    0
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.version:
        from importlib.metadata import version  # noqa: PLC0415

        print(f"kzoo {version('kzoo')}")
        return 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        backend = _choose_backend(args.backend)
    except CommandError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    # TensorFlow logs C++ lines that report nothing wrong (cuInit's error 303 on a machine without an NVIDIA
    # driver, at its first op): the command, an application, keeps them off unless TF_CPP_MIN_LOG_LEVEL is set.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "keras" in sys.modules and sys.modules["keras"].backend.backend() != backend:
        # Keras fixed its backend when it was imported (`python -m kzoo` imports kzoo first):
        # the command runs in a fresh interpreter that starts on the backend asked for.
        environment = {**os.environ, "KERAS_BACKEND": backend}
        return subprocess.call([sys.executable, "-m", "kzoo_cli", *argv], env=environment)
    os.environ["KERAS_BACKEND"] = backend
    from kzoo_cli import embed_commands, rerank_commands, train_commands, use_commands  # noqa: PLC0415

    commands = {
        "presets": use_commands.presets, "convert": use_commands.convert, "predict": use_commands.predict,
        "fill-mask": use_commands.fill_mask, "attention": use_commands.attention,
        "translate": use_commands.translate, "finetune": train_commands.finetune,
        "pretrain": train_commands.pretrain, "embed": embed_commands.embed, "search": embed_commands.search,
        "rerank": rerank_commands.rerank,
    }
    try:  # each command checks its arguments and files before it imports kzoo (seconds)
        return commands[args.command](args)
    except INPUT_ERRORS as error:
        print(f"{prog} {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog} {args.command}: interrupted", file=sys.stderr)
        return 130


def _choose_backend(given):
    backend = given or os.environ.get("KERAS_BACKEND") or "tensorflow"
    if backend not in BACKENDS:
        raise CommandError(f"KERAS_BACKEND={backend!r} is not a backend kzoo runs on: use one of "
                           f"{', '.join(BACKENDS)} (or --backend).")
    package, extra = BACKEND_PACKAGES[backend]
    if importlib.util.find_spec(package) is None:
        raise CommandError(f"The {backend} backend needs the {package} package, which is not installed: "
                           f'pip install "kzoo[{extra}]" (or choose another --backend).')
    return backend
