"""`python -m kzoo.convert SRC DST [--format kzoo|huggingface]`: converts BERT
checkpoints between formats; the older spelling of `kzoo convert` (the code is
`kzoo.checkpoints.convert`)."""

import sys

from kzoo.checkpoints.convert import convert


def main(argv=None):
    """`kzoo convert` with these arguments.

    Args:
        argv: list of str or None. Defaults to `None`: `sys.argv[1:]`.

    Returns:
        The exit status: 0 done, 2 bad arguments or input.

    Example:

    >>> main(["--help"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    SystemExit: 0
    """
    from kzoo_cli import main as command  # noqa: PLC0415 (the command line sits beside the package)

    return command(["convert", *(sys.argv[1:] if argv is None else argv)], prog="python -m kzoo")


__all__ = ["convert", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
