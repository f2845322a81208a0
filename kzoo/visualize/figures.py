"""A matplotlib figure without pyplot, and its atomic save."""

import os
import tempfile

SUFFIXES = (".png", ".svg", ".pdf")


def new_figure(width, height):
    """A `matplotlib.figure.Figure` of `width` x `height` inches, or an
    `ImportError` saying how to install matplotlib."""
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415  (optional dependency)
    except ImportError:
        raise ImportError(
            'kzoo.visualize draws with matplotlib, which is not installed: pip install "kzoo[plots]" '
            "(or pip install matplotlib)."
        ) from None
    return Figure(figsize=(width, height), layout="constrained")


def save_figure(figure, path, dpi=120):
    """Writes `figure` to `path` (PNG, SVG or PDF after its suffix) through a
    temporary file in the same folder, so a failed save leaves no half picture."""
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"Cannot save a figure as {path!r}: use a name ending in {', '.join(SUFFIXES)}.")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(suffix=suffix, dir=folder, prefix=".kzoo-figure-")
    os.close(handle)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temporary, 0o666 & ~umask)  # as open() would create it (mkstemp makes it private)
    try:
        figure.savefig(temporary, dpi=dpi, format=suffix[1:])
        os.replace(temporary, path)
    except BaseException:
        os.remove(temporary)
        raise
    return path
