"""The Transformer's optimizer ("Attention Is All You Need", sec. 5.3)."""

import keras

from kzoo.models.input_checks import checked_steps
from kzoo.models.transformer.transformer_schedule import TransformerSchedule


def transformer_optimizer(hidden_dim=512, warmup_steps=4000, scale=1.0, gradient_accumulation_steps=None,
                          **adam_overrides):
    """Adam with β1 = 0.9, β2 = 0.98, ε = 1e-9 and eq. 3's learning rate (sec. 5.3).

    "We used the Adam optimizer with β1 = 0.9, β2 = 0.98 and ε = 10^-9. We
    varied the learning rate over the course of training, according to the
    formula" of eq. 3 (`TransformerSchedule`), with warmup_steps = 4000.

    Args:
        hidden_dim: int. d_model (512 base, 1024 big); the schedule scales
            with d_model^-0.5. Defaults to `512`.
        warmup_steps: int. The schedule's warmup length. Defaults to `4000`.
        scale: float. A constant factor on the schedule. Defaults to `1.0`.
        gradient_accumulation_steps: int or None. Update once every this many
            micro-batches with their mean gradient (Keras' own accumulation);
            the schedule counts optimizer steps, not micro-batches. The paper's
            batches of ~25,000 source and target tokens (sec. 5.2) fit a small
            device as micro-batches whose loss `fit` normalises over the whole
            group's target tokens (`kzoo.models.batching`). Defaults to
            `None`: every batch.
        **adam_overrides: other `keras.optimizers.Adam` arguments, or a
            different `beta_1`, `beta_2`, `epsilon` (e.g. `global_clipnorm=1.0`).

    Returns:
        A `keras.optimizers.Adam` whose `learning_rate` is a `TransformerSchedule`.

    Example:

    >>> optimizer = transformer_optimizer(hidden_dim=512)
    >>> float(optimizer.beta_1), float(optimizer.beta_2), float(optimizer.epsilon)
    (0.9, 0.98, 1e-09)
    >>> _ = optimizer.iterations.assign(3999)  # the paper's step 4000: the peak
    >>> round(float(optimizer.learning_rate), 9)
    0.000698771
    >>> accumulating = transformer_optimizer(hidden_dim=512, gradient_accumulation_steps=2)
    >>> accumulating.gradient_accumulation_steps
    2
    >>> schedule = TransformerSchedule(512, gradient_accumulation_steps=2)
    >>> round(float(schedule(2 * 3999 + 1)), 9)  # micro-batch 7999: optimizer step 3999, the peak
    0.000698771
    """
    if "learning_rate" in adam_overrides:
        raise ValueError(
            "transformer_optimizer sets learning_rate to TransformerSchedule(hidden_dim, "
            "warmup_steps, scale); change those arguments instead, or build "
            "keras.optimizers.Adam(learning_rate=...) yourself."
        )
    accumulate = checked_steps(gradient_accumulation_steps)
    adam_arguments = {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9, **adam_overrides}
    schedule = TransformerSchedule(hidden_dim, warmup_steps=warmup_steps, scale=scale,
                                   gradient_accumulation_steps=accumulate or 1)
    return keras.optimizers.Adam(learning_rate=schedule, gradient_accumulation_steps=accumulate, **adam_arguments)
