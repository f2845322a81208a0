"""Named presets: the papers' model configurations, stored as JSON data files.

Each preset is `presets/<family>/<name>.json` in the repository, installed as
`kzoo/_presets/<family>/<name>.json`, with the fields `name`, `family`,
`class_name`, `description`, `paper` (the section or table it reproduces) and
`config` (the constructor arguments of `class_name`).
"""

import difflib
import functools
import importlib.resources
import json
import warnings


@functools.lru_cache(maxsize=None)
def _load_all():
    """{name: preset dict} for every JSON file shipped in `kzoo._presets`."""
    root = importlib.resources.files("kzoo._presets")
    found = {}
    for family in sorted(root.iterdir(), key=lambda p: p.name):
        if not family.is_dir() or family.name.startswith(("_", ".")):
            continue
        for entry in sorted(family.iterdir(), key=lambda p: p.name):
            if entry.name.endswith(".json"):
                preset = json.loads(entry.read_text(encoding="utf-8"))
                found[preset["name"]] = preset
    return found


def list_presets(family=None):
    """Every built-in preset name with its one-line description.

    Args:
        family: optional model family ("bert", "transformer") to filter on.

    Returns:
        A dict `{name: description}`, sorted by name.

    Example:

    >>> presets = list_presets("bert")
    >>> presets["bert_base_uncased"]
    'BERT BASE (L=12, H=768, A=12), uncased 30522-token WordPiece vocabulary: 110M parameters (BERT sec. 3).'
    """
    return {
        name: preset["description"]
        for name, preset in sorted(_load_all().items())
        if family is None or preset["family"] == family
    }


def get_preset(name):
    """The preset dict for `name`; an unknown name raises a `ValueError` with close matches.

    Example:

    >>> get_preset("bert_tiny")["config"]["num_layers"]
    2
    >>> get_preset("bert_bsae_uncased")
    Traceback (most recent call last):
    ...
    ValueError: Unknown preset 'bert_bsae_uncased'. Did you mean: 'bert_base_uncased', 'bert_base_cased', 'bert_large_uncased'? `kzoo.list_presets()` lists all presets.
    """
    all_presets = _load_all()
    if name not in all_presets:
        close = difflib.get_close_matches(str(name), list(all_presets), n=3, cutoff=0.6)
        hint = (
            "Did you mean: " + ", ".join(repr(c) for c in close) + "? "
            if close
            else f"Known presets: {', '.join(sorted(all_presets))}. "
        )
        raise ValueError(
            f"Unknown preset {name!r}. {hint}`kzoo.list_presets()` lists all presets."
        )
    return all_presets[name]


def build_from_preset(cls, name, /, **overrides):
    """Instantiates `cls` from preset `name`, with `overrides` replacing config fields.

    Weights are random until the checkpoint issues land; a `UserWarning` says so.

    Example:

    >>> import warnings
    >>> from kzoo.models.bert.bert_backbone import BertBackbone
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     model = build_from_preset(BertBackbone, "bert_mini")
    >>> model.num_layers, model.hidden_dim, model.num_heads
    (4, 256, 4)
    """
    preset = get_preset(name)
    if preset["class_name"] != cls.__name__:
        raise ValueError(
            f"Preset {name!r} describes a {preset['class_name']}, not a {cls.__name__}. "
            f"Use kzoo.{preset['class_name']}.from_preset({name!r})."
        )
    config = dict(preset["config"])
    unknown = set(overrides) - set(config) - {"dtype", "name"}
    if unknown:
        raise ValueError(
            f"Unknown override(s) {sorted(unknown)} for preset {name!r}; "
            f"{cls.__name__} presets take: {sorted(config) + ['dtype', 'name']}."
        )
    config.update(overrides)
    warnings.warn(
        f"Preset {name!r} built with random weights: kzoo ships no pretrained "
        "weights for it yet. Load a checkpoint before using it for predictions.",
        UserWarning,
        stacklevel=3,
    )
    return cls(**config)
