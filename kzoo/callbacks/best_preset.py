"""`BestPreset`: the best model of a `fit` kept as a preset directory."""

import math
import warnings

import keras
import numpy as np

GREATER_IS_BETTER = ("acc", "auc", "precision", "recall", "f1", "exact_match", "bleu", "mrr", "ndcg", "map@")


@keras.saving.register_keras_serializable(package="kzoo")
class BestPreset(keras.callbacks.Callback):
    """Saves the model as a preset directory at each epoch whose monitored
    value is the best so far: what Keras' `ModelCheckpoint(save_best_only=True)`
    does for a `.keras` file, written with `save_to_preset` so that the best
    model reloads with `from_preset` (its tokenizer and label names included)
    and serves `kzoo predict`.

    Each save is atomic (`kzoo.atomic`): a save that fails (an exception, a
    full disk, a killed process) leaves the previous best. Epochs whose logs
    lack the monitored value save nothing, with one warning naming the values
    the run logs. The best value is kept by the callback, as Keras' own
    callbacks keep theirs: a `fit` resumed by `keras.callbacks.BackupAndRestore`
    in a new process starts from `initial_value_threshold` (pass the best
    value reached before) so that it does not replace a better preset.

    Args:
        path: str or `os.PathLike`. The preset directory (new, empty, or a preset).
        monitor: str. The logged value to watch. Defaults to `"val_loss"`.
        mode: str. `"min"`, `"max"`, or `"auto"`: lowest for losses, highest
            for accuracies, F1, AUC, precision, recall, exact match, BLEU, MRR, NDCG and MAP.
            Defaults to `"auto"`.
        min_delta: float. The least change that counts as better. Defaults to `0.0`.
        initial_value_threshold: float or None. A value to beat before the
            first save. Defaults to `None`: the first epoch saves.
        verbose: int. 1 prints a line at each save. Defaults to `0`.

    Attributes:
        best: float or None. The best value so far.
        best_epoch: int or None. Its epoch, 0-based (as Keras' `EarlyStopping.best_epoch`).

    Example:

    >>> import tempfile
    >>> import numpy as np
    >>> from kzoo import BertBackbone, BertClassifier, BertTokenizer, BestPreset
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"])
    >>> backbone = BertBackbone(vocabulary_size=7, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> model = BertClassifier(backbone, class_names=["neg", "pos"], preprocessor=tokenizer)
    >>> best = BestPreset(tempfile.mkdtemp(), monitor="val_loss")
    >>> texts, labels = ["good", "bad", "good good", "bad bad"], ["pos", "neg", "pos", "neg"]
    >>> _ = model.fit(texts, labels, validation_split=0.5, epochs=2, verbose=0, callbacks=[best])
    >>> best.best_epoch in (0, 1), BertClassifier.from_preset(best.path).class_names
    (True, ['neg', 'pos'])
    """

    def __init__(self, path, monitor="val_loss", mode="auto", min_delta=0.0, initial_value_threshold=None,
                 verbose=0):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"BestPreset: mode must be 'auto', 'min' or 'max'; got {mode!r}.")
        self.path, self.monitor, self.mode, self.verbose = path, monitor, mode, verbose
        self.min_delta = abs(float(min_delta))
        self.initial_value_threshold = initial_value_threshold
        self.best, self.best_epoch = initial_value_threshold, None
        self._warned = False
        self._sign = _direction(monitor, mode)

    def on_train_begin(self, logs=None):
        if not hasattr(self.model, "save_to_preset"):
            raise ValueError(
                f"BestPreset saves kzoo models (they have `save_to_preset`); got a {type(self.model).__name__}. "
                "For another Keras model use keras.callbacks.ModelCheckpoint(path, save_best_only=True)."
            )
        self._warned = False

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"BestPreset monitors {self.monitor!r}, which this fit does not log (it logs "
                    f"{sorted(logs or {})}): nothing is saved to {str(self.path)!r}. Pass validation_data= "
                    "or validation_split= to log val_ values, or monitor one of those.",
                    UserWarning,
                    stacklevel=2,
                )
            return
        value = float(np.asarray(keras.ops.convert_to_numpy(value)))
        if math.isnan(value) or not self._better(value):
            return
        self.model.save_to_preset(self.path)  # atomic: written beside, then renamed into place
        if self.verbose:
            print(f"\nEpoch {epoch + 1}: {self.monitor} {value:.5g}, the best so far; saved to {self.path}",
                  flush=True)
        self.best, self.best_epoch = value, epoch

    def _better(self, value):
        return self.best is None or self._sign * (value - self.best) > self.min_delta

    def get_config(self):
        return {"path": str(self.path), "monitor": self.monitor, "mode": self.mode, "min_delta": self.min_delta,
                "initial_value_threshold": self.initial_value_threshold, "verbose": self.verbose}


def _direction(monitor, mode):
    """-1 when lower is better, +1 when higher is."""
    if mode != "auto":
        return -1 if mode == "min" else 1
    name = monitor.removeprefix("val_")
    if name.endswith("loss") or name in ("perplexity", "mse", "mae"):
        return -1
    if any(word in name for word in GREATER_IS_BETTER):
        return 1
    raise ValueError(
        f"BestPreset cannot tell whether {monitor!r} is better higher or lower: pass mode='max' or mode='min'."
    )
