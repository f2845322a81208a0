"""`python -m kzoo_cli`: the `kzoo` command (see `kzoo_cli`)."""

import sys

from kzoo_cli import main

if __name__ == "__main__":
    sys.exit(main())
