"""kzoo's models: the base classes, and one package per family (`bert`, `transformer`)."""

from kzoo.models.backbone import Backbone
from kzoo.models.preprocessor import Preprocessor
from kzoo.models.task import Task

__all__ = ["Backbone", "Preprocessor", "Task"]
