"""`Task.from_preset` and `Task.save_to_preset`: a task from a preset directory
or a built-in name, and back (`kzoo.presets` reads and writes the files)."""

from kzoo import presets
from kzoo.models import label_names, serialization

PARTS = ("backbone", "preprocessor", "tokenizer")  # constructor arguments that are objects


def from_preset(cls, preset, /, load_weights=True, **kwargs):
    """The task from a preset directory or a built-in name.

    A directory holding this task (saved by `save_to_preset`) gives it
    back with its weights; one holding a backbone (e.g. saved by a
    pre-trainer) gives the pre-trained backbone with a freshly initialised
    head, and its tokenizer or preprocessor; a checkpoint of another
    format is converted. A built-in name with released weights gives them
    and their tokenizer with a fresh head (e.g.
    `kzoo.BertClassifier.from_preset("bert_base_uncased", num_classes=2)`);
    an architecture-only name gives random weights and a warning.

    Args:
        preset: str or `os.PathLike`. A preset name or directory.
        load_weights: bool. `False` builds a name's architecture with
            random weights, without a warning or the network (the
            preset's tokenizer is attached only if its files are already
            on this machine). Defaults to `True`.
        **kwargs: the head's arguments (e.g. `num_classes`; label names such
            as `class_names` rename a saved head's), `dtype`, the backbone's
            config fields for a name, or `sequence_length` for the preprocessor.

    Returns:
        An instance of the class `from_preset` is called on.
    """
    head = serialization.constructor_parameters(cls, skip=PARTS + label_names.ARGUMENTS)  # shape the head
    saved = presets.saved_task_config(preset, cls)
    changed = {k: v for k, v in kwargs.items() if k in head and saved is not None and saved.get(k) != v}
    if changed:
        raise ValueError(
            f"The {cls.__name__} saved in {preset!r} has "
            + ", ".join(f"{k}={saved.get(k)!r}" for k in changed)
            + f", not {', '.join(f'{k}={v!r}' for k, v in changed.items())}. Its trained head "
            "cannot change shape. To fine-tune a new head on the same encoder, build "
            f"kzoo.{cls.__name__}(backbone=kzoo.{saved['backbone']['class_name']}.from_preset(path), "
            f"preprocessor=kzoo.{cls.preprocessor_class.__name__}.from_preset(path), ...)."
        )
    takes_text = "preprocessor" in serialization.constructor_parameters(cls)
    sequence_length = kwargs.pop("sequence_length", None) if takes_text else None
    try:
        task = presets.load(cls, preset, load_weights, **kwargs)
    except TypeError as error:  # the new head's shape is missing
        missing = [name for name in head if f"'{name}'" in str(error) and name not in kwargs]
        if not missing:
            raise
        raise ValueError(
            f"{preset!r} holds no {cls.__name__}, so `from_preset` puts a new head on its "
            f"backbone, and a new head needs {' and '.join(f'`{name}`' for name in missing)}: "
            f"kzoo.{cls.__name__}.from_preset({preset!r}, {', '.join(f'{n}=...' for n in missing)})."
        ) from None
    if sequence_length is not None:
        task.set_sequence_length(sequence_length)
    return task

def save_to_preset(self, preset_dir, format="kzoo"):
    """Writes the task, its backbone and its preprocessor (or tokenizer)
    as a preset directory (KerasHub's layout), for `from_preset` on any
    backend; `format="huggingface"`, the Hugging Face class with the same
    head (e.g. `BertForSequenceClassification` for a `kzoo.BertClassifier`).

    Args:
        preset_dir: str or `os.PathLike`. A new or empty directory, or a preset directory.
        format: str. `"kzoo"` or `"huggingface"`. Defaults to `"kzoo"`.
    """
    presets.save_task(self, preset_dir, format=format)
