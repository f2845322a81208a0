"""The Transformer's learning-rate schedule ("Attention Is All You Need", sec. 5.3, eq. 3)."""

import keras
from keras import ops

from kzoo.models.input_checks import checked_steps


@keras.saving.register_keras_serializable(package="kzoo")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup then inverse-square-root decay (sec. 5.3, eq. 3):

        lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)

    It rises linearly for the first `warmup_steps` steps, peaks at
    `step = warmup_steps` with `scale · (d_model · warmup_steps)^-0.5`
    (6.99e-4 for the base model: d_model 512, warmup 4000) and then decays
    proportionally to the inverse square root of the step.

    Step numbering: the paper's steps start at 1 (at step 0, `step^-0.5` is
    infinite). Keras calls the schedule with `optimizer.iterations`, which is 0
    before the first update, so this schedule evaluates eq. 3 at
    `step + 1`: the first update uses the paper's step-1 rate,
    `schedule(k - 1)` is the paper's rate at step `k`, and the peak is at
    `schedule(warmup_steps - 1)`. (tensor2tensor's `rsqrt_decay` with
    `linear_warmup` does the same.)

    Args:
        hidden_dim: int. d_model, the model width (512 base, 1024 big).
        warmup_steps: int. The warmup length. Defaults to `4000`, as in the paper.
        scale: float. A constant factor on the whole schedule
            (tensor2tensor's `learning_rate_constant`). Defaults to `1.0`,
            as in the paper.
        gradient_accumulation_steps: int. Micro-batches per optimizer step.
            Keras evaluates a schedule at its count of micro-batches, so the
            schedule divides it by this to count optimizer steps, the steps
            of eq. 3 and `warmup_steps`. Defaults to `1`.

    Call arguments:
        step: int or scalar tensor. The 0-based micro-batch count (the
            optimizer iteration without gradient accumulation).

    Returns:
        A float32 scalar tensor.

    Example:

    >>> schedule = TransformerSchedule(hidden_dim=512, warmup_steps=4000)
    >>> [round(float(schedule(step - 1)), 9) for step in (1, 4000, 16000)]  # paper's steps
    [1.75e-07, 0.000698771, 0.000349386]
    """

    def __init__(self, hidden_dim, warmup_steps=4000, scale=1.0, gradient_accumulation_steps=1):
        if hidden_dim <= 0 or warmup_steps <= 0 or scale <= 0:
            raise ValueError(
                "TransformerSchedule needs a positive hidden_dim, warmup_steps and scale; got "
                f"hidden_dim={hidden_dim}, warmup_steps={warmup_steps}, scale={scale}. "
                "The paper uses hidden_dim=512 (base) or 1024 (big), warmup_steps=4000, scale=1.0."
            )
        self.hidden_dim = hidden_dim
        self.warmup_steps = warmup_steps
        self.scale = scale
        self.gradient_accumulation_steps = checked_steps(gradient_accumulation_steps) or 1

    def __call__(self, step):
        step = ops.floor_divide(step, self.gradient_accumulation_steps)  # optimizer steps
        step = ops.cast(step, "float32") + 1.0  # the paper counts steps from 1
        decay = ops.rsqrt(step)  # step^-0.5
        warmup = step * float(self.warmup_steps) ** -1.5  # step · warmup^-1.5
        return float(self.scale * self.hidden_dim**-0.5) * ops.minimum(decay, warmup)

    def get_config(self):
        return {
            "hidden_dim": self.hidden_dim,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
        }
