"""`python -m kzoo ...`: the `kzoo` command (its code is the `kzoo_cli`
package, beside this one, so that `kzoo --help` loads no TensorFlow)."""

import sys

from kzoo_cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m kzoo"))
