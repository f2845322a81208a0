"""Keras callbacks for kzoo models: `BestPreset` keeps the best epoch of a
`fit` as a preset directory; `RetrievalEvaluator` logs retrieval metrics
(MRR@k, NDCG@k, ...) of an embedder on held-out queries each epoch. With Keras' own `EarlyStopping(monitor="val_loss",
restore_best_weights=True)` (which ends the run and puts the best weights back
in memory) it is the fine-tuning loop of Hugging Face's `load_best_model_at_end`."""

from kzoo.callbacks.best_preset import BestPreset
from kzoo.callbacks.retrieval_evaluator import RetrievalEvaluator

__all__ = ["BestPreset", "RetrievalEvaluator"]
