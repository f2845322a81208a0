"""Presets: the papers' configurations by name, preset directories, and the
registry of formats `from_preset` reads and `save_to_preset` writes.

Every kzoo class's `from_preset(preset, **kwargs)` is
`kzoo.presets.load(cls, preset, **kwargs)`, and its
`save_to_preset(path, format=...)` is `kzoo.presets.save(obj, path, format)`
(or the `save_backbone` / `save_task` / `save_preprocessor` /
`save_tokenizer` that check the object's role first).

| module                        | what it holds                                                   |
|-------------------------------|-----------------------------------------------------------------|
| `kzoo.presets.entry`          | `load` and `save`: a name, a directory, or a registered format  |
| `kzoo.presets.registry`       | `register_format`, `detect_format`, `get_format`                |
| `kzoo.presets.builtin`        | built-in names and their JSON configs (`list_presets`, ...)     |
| `kzoo.presets.names`          | loading a name: released weights, or the architecture           |
| `kzoo.presets.sources`        | where released weights come from; fetching, unpacking, caches   |
| `kzoo.presets.directory`      | a preset directory's file names, and reading its JSON           |
| `kzoo.presets.writing`        | writing preset directories (format "kzoo")                      |
| `kzoo.presets.reading`        | reading preset directories (format "kzoo")                      |
| `kzoo.presets.weights`        | weights files: saved without optimizer state, shapes checked    |
| `kzoo.presets.arguments`      | constructor arguments: a task's, its backbone's, overrides      |

This package imports no model and no checkpoint format: the formats in
`kzoo.checkpoints` register themselves when `kzoo` is imported, and a
preset's released weights are handed to whichever format reads them.
"""

from kzoo.presets.arguments import override_config, pop_backbone_kwargs, takes_argument
from kzoo.presets.builtin import PresetInfo, build_from_preset, get_preset, list_presets, print_presets
from kzoo.presets.entry import (
    load,
    save,
    save_backbone,
    save_preprocessor,
    save_task,
    save_tokenizer,
)
from kzoo.presets.reading import load_directory, load_task, saved_task_config
from kzoo.presets.sources import cache_directory
from kzoo.presets.registry import (
    detect_format,
    format_names,
    get_format,
    register_format,
    unregister_format,
)

__all__ = [
    "PresetInfo",
    "build_from_preset",
    "cache_directory",
    "detect_format",
    "format_names",
    "get_format",
    "get_preset",
    "list_presets",
    "load",
    "load_directory",
    "load_task",
    "override_config",
    "pop_backbone_kwargs",
    "print_presets",
    "register_format",
    "save",
    "save_backbone",
    "save_preprocessor",
    "save_task",
    "save_tokenizer",
    "saved_task_config",
    "takes_argument",
    "unregister_format",
]
