"""`python -m kzoo.convert SRC DST [--format kzoo|huggingface]`: converts BERT
checkpoints between formats (the code is `kzoo.checkpoints.convert`)."""

from kzoo.checkpoints.convert import convert, main

__all__ = ["convert", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
