"""Applications' start-up without TensorFlow's C++ lines on the terminal.

TensorFlow 2.21 prints lines while its C++ libraries load ("All log messages
before absl::InitializeLog()", "Could not find cuda drivers", oneDNN's notice),
twice, before it reads `TF_CPP_MIN_LOG_LEVEL`: they report nothing wrong. Only
swapping file descriptor 2 while it loads hides them, which a library must not
do, so `import kzoo` does not; the `kzoo` command and the examples (applications)
call `import_kzoo` instead. Other lines written meanwhile still reach stderr.
"""

import os
import re
import sys
import tempfile

STARTUP_LINES = re.compile(
    r"^WARNING: All log messages before absl|^To enable the following instructions|^[IE]\d{4} .*\] "
    r"(oneDNN custom operations are on|Could not find cuda drivers|This TensorFlow binary is optimized)"
)


def import_kzoo():
    """`kzoo`, imported with TensorFlow's C++ start-up lines kept off stderr
    (when TensorFlow is not loaded yet); every other line written meanwhile
    is passed on, and an import that fails shows them all.

    Returns:
        The `kzoo` module.

    Example:

    >>> import_kzoo().__name__
    'kzoo'
    """
    if "tensorflow" not in sys.modules:
        _import_tensorflow_quietly()
    import kzoo  # noqa: PLC0415

    return kzoo


def _import_tensorflow_quietly():
    sys.stderr.flush()
    saved = os.dup(2)
    failed = True
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            import tensorflow  # noqa: F401, PLC0415

            failed = False
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode("utf-8", "replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if failed or not STARTUP_LINES.search(line)))
            sys.stderr.flush()
