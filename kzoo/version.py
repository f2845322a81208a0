"""kzoo's version, read by `kzoo.__version__` and written into every preset's metadata.json."""

__version__ = "0.1.0"
