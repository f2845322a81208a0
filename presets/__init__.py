"""The preset data files, installed as the package `kzoo._presets` (see `kzoo/presets/builtin.py`)."""
