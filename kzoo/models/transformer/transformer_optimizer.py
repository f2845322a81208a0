"""The Transformer's optimizer ("Attention Is All You Need", sec. 5.3)."""

import keras

from kzoo.backend import adam_base
from kzoo.models.input_checks import checked_steps
from kzoo.models.transformer.transformer_schedule import TransformerSchedule


@keras.saving.register_keras_serializable(package="kzoo")
class TransformerAdam(adam_base(keras.optimizers.Adam)):
    """Adam as the paper's reference [20] writes it (sec. 5.3; Kingma & Ba
    2015, Algorithm 1): epsilon added to sqrt(v_hat), as `torch.optim.Adam`
    takes it (`keras.optimizers.Adam` adds it to sqrt(v)). On torch one fused
    kernel: 2.6 ms a step for the translation benchmark's 1.4 million
    parameters, against 15.5 for Keras' `Adam` (one thread); on TensorFlow one
    fused kernel per variable.

    Args:
        learning_rate: float or `keras.optimizers.schedules.LearningRateSchedule`.
            The step size; `transformer_optimizer` passes eq. 3's
            `TransformerSchedule`. Defaults to `0.001`.
        beta_1: float. The first moment's decay, β1. Defaults to `0.9`, as in the paper.
        beta_2: float. The second moment's decay, β2. Defaults to `0.98`, as in the paper.
        epsilon: float. ε, added to sqrt(v_hat). Defaults to `1e-9`, as in the paper.
        **kwargs: other `keras.optimizers.Adam` arguments (`amsgrad`,
            `global_clipnorm`, `gradient_accumulation_steps`, ...).

    Example:

    >>> optimizer = TransformerAdam(learning_rate=0.1)
    >>> variable = keras.Variable([1.0, 1.0])
    >>> optimizer.apply([keras.ops.convert_to_tensor([2.0, -1e-3])], [variable])
    >>> [round(float(x), 4) for x in keras.ops.convert_to_numpy(variable)]  # Adam's first step: lr · sign(g)
    [0.9, 1.1]
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.98, epsilon=1e-9, **kwargs):
        super().__init__(learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, **kwargs)


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
        A `TransformerAdam` (a `keras.optimizers.Adam`) whose `learning_rate`
        is a `TransformerSchedule`.

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
    return TransformerAdam(learning_rate=schedule, gradient_accumulation_steps=accumulate, **adam_arguments)
