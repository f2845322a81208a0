"""One sub-package per model family."""
