"""BERT's pre-training optimizer recipe (BERT sec. 3.1 and appendix A.2).

The paper trains with Adam (lr 1e-4, beta_1 0.9, beta_2 0.999), L2 weight
decay 0.01, learning-rate warmup over the first 10,000 steps then linear
decay, for 1M steps: 90% of them at sequence length 128 and the last 10% at
512. google-research/bert's `optimization.py` implements the decay as
decoupled weight decay (AdamW), skips LayerNorm parameters and every bias,
uses epsilon 1e-6 and clips gradients to a global norm of 1.0.

Three pieces, usable on any backend:

- `LinearWarmupLinearDecay`: the learning-rate schedule.
- `BertAdamW`: `keras.optimizers.AdamW` whose weight-decay exclusions are
  part of its config (so they survive `.keras` save/load).
- `bert_pretraining_optimizer`: the two put together with the paper's numbers;
  `pretraining_phases`: the 128/512 split of the steps.

Differences from google-research/bert, kept on purpose:

- The decay reaches `peak_learning_rate` at the end of the warmup and falls
  linearly to `end_learning_rate` over the remaining steps (as Hugging Face's
  `get_linear_schedule_with_warmup`). google-research's code decays over all
  `total_steps` and overrides the warmup steps, so just after warmup it
  drops to `peak * (1 - warmup / total)` (1% lower for the paper's numbers).
- Adam's bias correction (Algorithm 1, as PyTorch; see `BertAdamW`), which
  google-research's `AdamWeightDecayOptimizer` lacks: it fades within the warmup.
"""

import collections
import math

import keras
from keras import ops

from kzoo.data.masked_lm import default_max_predictions
from kzoo.distribution import sum_over_replicas
from kzoo.models.input_checks import checked_steps
from kzoo.backend import adam_base

DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("gamma", "beta", "bias")
# LoRA's factors start at B = 0 and train alone: 5e-5 barely moves them. Rank 8's best of 5e-4 to
# 3e-3 on the main job's task (held-out accuracy within 2 points of every weight at 5e-5).
LORA_LEARNING_RATE = 2e-3


@keras.saving.register_keras_serializable(package="kzoo")
class LinearWarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup to a peak, then linear decay (BERT sec. 3.1, appendix A.2).

        lr(step) = peak * step / warmup_steps                        step < warmup_steps
        lr(step) = end + (peak - end) * (total - step) / (total - warmup)
                                                                     warmup_steps <= step <= total
        lr(step) = end                                               step > total

    The paper: warmup over the first 10,000 steps to 1e-4, then linear decay
    over the 1M training steps. Keras evaluates the schedule at
    `optimizer.iterations` before each update, so the first update uses
    `lr(0) = 0`, as in google-research/bert and Hugging Face.

    Args:
        peak_learning_rate: float. The learning rate at the end of the warmup (1e-4).
        warmup_steps: int. The number of warmup steps (10,000); 0 starts at the peak.
        total_steps: int. The step at which the decay reaches `end_learning_rate`
            (1,000,000); at least `warmup_steps`.
        end_learning_rate: float. The learning rate at and after `total_steps`.
            Defaults to `0.0`.
        gradient_accumulation_steps: int. Micro-batches per optimizer step.
            Keras evaluates a schedule at its count of micro-batches, so the
            schedule divides it by this to count optimizer steps, the steps
            of `warmup_steps` and `total_steps`. Defaults to `1`.

    Call arguments:
        step: int or scalar tensor. The micro-batch count (the optimizer
            step without gradient accumulation).

    Returns:
        A float32 scalar tensor.

    Example:

    >>> schedule = LinearWarmupLinearDecay(1e-4, warmup_steps=10, total_steps=110)
    >>> [round(float(schedule(step)), 8) for step in (0, 5, 10, 60, 110, 200)]
    [0.0, 5e-05, 0.0001, 5e-05, 0.0, 0.0]
    """

    def __init__(self, peak_learning_rate, warmup_steps, total_steps, end_learning_rate=0.0,
                 gradient_accumulation_steps=1):
        if warmup_steps < 0 or total_steps < max(warmup_steps, 1):
            raise ValueError(
                "LinearWarmupLinearDecay needs 0 <= warmup_steps <= total_steps and "
                f"total_steps >= 1; got warmup_steps={warmup_steps}, total_steps={total_steps}. "
                "Pass the number of optimizer steps of the whole run as `total_steps`."
            )
        self.peak_learning_rate = peak_learning_rate
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.end_learning_rate = end_learning_rate
        self.gradient_accumulation_steps = gradient_accumulation_steps

    def __call__(self, step):
        step = ops.cast(ops.floor_divide(step, self.gradient_accumulation_steps), "float32")
        peak = ops.cast(self.peak_learning_rate, "float32")
        end = ops.cast(self.end_learning_rate, "float32")
        warmup = float(max(self.warmup_steps, 1))
        decay_steps = float(max(self.total_steps - self.warmup_steps, 1))
        warming_up = peak * step / warmup
        remaining = ops.clip((self.total_steps - step) / decay_steps, 0.0, 1.0)
        decaying = end + (peak - end) * remaining
        return ops.where(step < self.warmup_steps, warming_up, decaying)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "end_learning_rate": self.end_learning_rate,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
        }


@keras.saving.register_keras_serializable(package="kzoo")
class BertAdamW(adam_base(keras.optimizers.AdamW)):
    """AdamW that skips LayerNorm parameters and biases (BERT sec. 3.1, A.2).

    The paper's "L2 weight decay of 0.01" is decoupled weight decay in
    google-research/bert (`AdamWeightDecayOptimizer`, excluding variables named
    "LayerNorm", "layer_norm" or "bias"). In Keras the LayerNorm variables are
    named `gamma` and `beta` and biases `bias`, so those are the default
    exclusions. Each step every other variable shrinks by the factor
    `1 - learning_rate * weight_decay` before the Adam update.

    The Adam step is the paper's (Kingma & Ba 2015, Algorithm 1: epsilon added
    to sqrt(v_hat)), as PyTorch's and Hugging Face's AdamW take it; Keras'
    `AdamW` adds epsilon to sqrt(v), a 32x larger epsilon at the first step
    that slows fine-tuning's first hundreds of steps (`kzoo.backend.adam_base`).
    It runs as fused kernels on torch and TensorFlow.

    Unlike `keras.optimizers.AdamW.exclude_from_weight_decay(var_names=...)`,
    whose names are lost by `get_config` (and so by `.keras` save/load), the
    names here are a constructor argument and part of the config.

    Args:
        exclude_from_weight_decay_names: sequence of str. Regular expressions
            searched in each variable's short `.name` (not its path); a match
            skips weight decay. Defaults to `("gamma", "beta", "bias")`.
        **kwargs: `keras.optimizers.AdamW` arguments (`learning_rate`,
            `weight_decay`, `beta_1`, `beta_2`, `epsilon`, `global_clipnorm`, ...).

    Example:

    >>> optimizer = BertAdamW(learning_rate=1e-4, weight_decay=0.01)
    >>> restored = BertAdamW.from_config(optimizer.get_config())
    >>> restored.exclude_from_weight_decay_names
    ('gamma', 'beta', 'bias')
    >>> kernel, bias = keras.Variable([1.0], name="kernel"), keras.Variable([1.0], name="bias")
    >>> restored._use_weight_decay(kernel), restored._use_weight_decay(bias)
    (True, False)
    """

    def __init__(
        self, exclude_from_weight_decay_names=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, **kwargs
    ):
        super().__init__(**kwargs)
        self.exclude_from_weight_decay_names = tuple(exclude_from_weight_decay_names or ())
        self.exclude_from_weight_decay(var_names=list(self.exclude_from_weight_decay_names))

    def get_config(self):
        config = super().get_config()
        config["exclude_from_weight_decay_names"] = list(self.exclude_from_weight_decay_names)
        return config

    def _clip_gradients(self, grads):
        """Clips the global batch's gradient (A.2): Keras' TensorFlow optimizer
        clips each replica's share before summing the shares, so under a
        `tf.distribute` strategy the shares are summed first (one extra
        all-reduce), clipped, and handed back as equal shares."""
        # One replica (JAX and torch always: they see the global batch): Keras' own clipping.
        replicas = getattr(getattr(self, "_distribution_strategy", None), "num_replicas_in_sync", 1)
        if not self.global_clipnorm or replicas == 1:
            return super()._clip_gradients(grads)
        total, replicas = sum_over_replicas(grads)
        clipped = super()._clip_gradients(total)
        return clipped if replicas == 1 else [None if g is None else g / replicas for g in clipped]


def bert_pretraining_optimizer(
    total_steps=None,
    warmup_steps=10_000,
    learning_rate=1e-4,
    weight_decay=0.01,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
    global_clipnorm=1.0,
    gradient_accumulation_steps=None,
):
    """The paper's pre-training optimizer (BERT sec. 3.1, appendix A.2).

    Adam with lr 1e-4, beta_1 0.9, beta_2 0.999, decoupled weight decay 0.01
    (not on LayerNorm parameters and biases), warmup over 10,000 steps then
    linear decay to 0 at `total_steps`. epsilon 1e-6 and the global-norm
    gradient clipping at 1.0 come from google-research/bert's `optimization.py`
    (the paper does not state them); pass `global_clipnorm=None` to turn it off.

    Args:
        total_steps: int or None. Optimizer steps of the whole run (1,000,000 in
            the paper, both sequence-length phases together). Defaults to
            `None`: a constant `learning_rate` (no warmup, no decay).
        warmup_steps: int. The warmup length, clipped to `total_steps`.
            Defaults to `10_000`.
        learning_rate: float. The peak learning rate. Defaults to `1e-4`.
        weight_decay: float. The decoupled weight-decay rate. Defaults to `0.01`.
        beta_1: float. Adam's beta_1. Defaults to `0.9`.
        beta_2: float. Adam's beta_2. Defaults to `0.999`.
        epsilon: float. Adam's epsilon. Defaults to `1e-6`.
        global_clipnorm: float or None. Clip the gradients to this global norm;
            `None` turns clipping off. Defaults to `1.0`.
        gradient_accumulation_steps: int or None. Update once every this many
            micro-batches with their mean gradient (Keras' own accumulation),
            clipped and decayed as one batch of that many times the size;
            `total_steps`, `warmup_steps` and the schedule count optimizer
            steps, not micro-batches. Defaults to `None`: every batch.

    Returns:
        A `BertAdamW`.

    Example:

    >>> optimizer = bert_pretraining_optimizer(total_steps=1000, warmup_steps=100)
    >>> rates = []
    >>> for step in (0, 50, 100, 550, 1000):
    ...     _ = optimizer.iterations.assign(step)
    ...     rates.append(round(float(optimizer.learning_rate), 8))
    >>> rates
    [0.0, 5e-05, 0.0001, 5e-05, 0.0]
    >>> round(float(bert_pretraining_optimizer().learning_rate), 8)  # no total: constant
    0.0001
    """
    accumulate = checked_steps(gradient_accumulation_steps)
    if total_steps is None:
        schedule = learning_rate
    else:
        schedule = LinearWarmupLinearDecay(
            learning_rate, min(warmup_steps, total_steps), total_steps, gradient_accumulation_steps=accumulate or 1
        )
    return BertAdamW(
        gradient_accumulation_steps=accumulate,
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=global_clipnorm,
    )


def bert_finetuning_optimizer(
    total_steps=None, learning_rate=5e-5, warmup_proportion=0.1, weight_decay=0.01, **kwargs
):
    """The fine-tuning optimizer of BERT (sec. 3.2, 4; appendix A.3).

    Adam with a peak learning rate of 5e-5 (the paper searches 5e-5, 3e-5 and
    2e-5), linear warmup over the first `warmup_proportion` of the steps
    (google-research/bert's `warmup_proportion=0.1`) and linear decay to 0,
    with `bert_pretraining_optimizer`'s weight decay (0.01, not on LayerNorm
    parameters and biases), epsilon 1e-6 and gradient clipping at global norm
    1.0, as google-research/bert's `run_classifier.py` and `run_squad.py` use.

    Args:
        total_steps: int or None. Optimizer steps of the whole fine-tuning run
            (epochs × steps per epoch). Defaults to `None`: a constant
            `learning_rate`; the task models' `fit` fills it in when
            `compile()` was called without an optimizer.
        learning_rate: float. The peak learning rate. Defaults to `5e-5`.
        warmup_proportion: float. The fraction of `total_steps` spent warming
            up. Defaults to `0.1`.
        weight_decay: float. The decoupled weight-decay rate. Defaults to `0.01`.
        **kwargs: passed to `bert_pretraining_optimizer` (`beta_1`, `beta_2`,
            `epsilon`, `global_clipnorm`).

    Returns:
        A `BertAdamW`.

    Example:

    >>> optimizer = bert_finetuning_optimizer(total_steps=100)
    >>> rates = []
    >>> for step in (0, 5, 10, 55, 100):
    ...     _ = optimizer.iterations.assign(step)
    ...     rates.append(round(float(optimizer.learning_rate), 8))
    >>> rates
    [0.0, 2.5e-05, 5e-05, 2.5e-05, 0.0]
    """
    if not 0.0 <= warmup_proportion <= 1.0:
        raise ValueError(
            f"warmup_proportion={warmup_proportion} must be a fraction in [0, 1] (BERT uses 0.1)."
        )
    warmup_steps = 0 if total_steps is None else int(round(warmup_proportion * total_steps))
    return bert_pretraining_optimizer(
        total_steps=total_steps,
        warmup_steps=warmup_steps,
        learning_rate=learning_rate,
        weight_decay=weight_decay,
        **kwargs,
    )


PretrainingPhase = collections.namedtuple(
    "PretrainingPhase", ["sequence_length", "max_predictions_per_seq", "steps", "first_step"]
)
PretrainingPhase.__doc__ = (
    "One phase of pre-training (BERT sec. 3.1, A.2): its sequence length, the "
    "masked-LM predictions per sequence, its number of steps and the global "
    "step it starts at."
)


def _round_half_up(x):
    return int(math.floor(x + 0.5))


def pretraining_phases(
    total_steps,
    phase_one_sequence_length=128,
    phase_two_sequence_length=512,
    phase_two_fraction=0.1,
    max_predictions_per_seq=None,
):
    """The paper's two pre-training phases (BERT sec. 3.1, appendix A.2).

    "To speed up pretraining ..., we pre-train the model with sequence length
    of 128 for 90% of the steps. Then, we train the rest 10% of the steps of
    sequence of 512 to learn the positional embeddings." Phase two gets
    `round(phase_two_fraction * total_steps)` steps (halves round up), phase
    one the rest, so the steps add up to `total_steps` exactly.

    Use one optimizer, with one schedule over `total_steps`, for both phases:
    `optimizer.iterations` carries on from phase one into phase two.

        optimizer = kzoo.bert_pretraining_optimizer(total_steps=total_steps)
        model.compile(optimizer=optimizer)
        for phase in kzoo.pretraining_phases(total_steps):
            dataset = make_dataset(phase.sequence_length, phase.max_predictions_per_seq)
            model.fit(dataset.repeat(), epochs=1, steps_per_epoch=phase.steps)

    Args:
        total_steps: int. Optimizer steps of the whole run (1,000,000 in the paper).
        phase_one_sequence_length: int. The sequence length of phase one.
            Defaults to `128`, as in the paper.
        phase_two_sequence_length: int. The sequence length of phase two (at
            most the backbone's `max_sequence_length`). Defaults to `512`, as
            in the paper.
        phase_two_fraction: float. The share of steps in phase two, in (0, 1).
            Defaults to `0.1`.
        max_predictions_per_seq: int, pair of ints or None. An int for both
            phases, or a pair `(phase_one, phase_two)`. Defaults to `None`: the
            paper's 20 (at 128) and 80 (at 512), `round(0.15 * length)` for
            other lengths.

    Returns:
        A list of two `PretrainingPhase(sequence_length,
        max_predictions_per_seq, steps, first_step)` namedtuples.

    Example:

    >>> for phase in pretraining_phases(1000):
    ...     print(tuple(phase))
    (128, 20, 900, 0)
    (512, 80, 100, 900)
    """
    phase_two_steps = _round_half_up(phase_two_fraction * total_steps)
    phase_one_steps = total_steps - phase_two_steps
    if not 0 < phase_two_fraction < 1 or min(phase_one_steps, phase_two_steps) < 1:
        raise ValueError(
            f"pretraining_phases needs 0 < phase_two_fraction < 1 and at least one step "
            f"per phase; got total_steps={total_steps}, phase_two_fraction="
            f"{phase_two_fraction} ({phase_one_steps} and {phase_two_steps} steps). "
            "Use more total steps or a fraction further from 0 and 1."
        )
    lengths = (phase_one_sequence_length, phase_two_sequence_length)
    if max_predictions_per_seq is None:
        predictions = tuple(default_max_predictions(length) for length in lengths)
    elif isinstance(max_predictions_per_seq, int):
        predictions = (max_predictions_per_seq, max_predictions_per_seq)
    else:
        predictions = tuple(max_predictions_per_seq)
    return [
        PretrainingPhase(lengths[0], predictions[0], phase_one_steps, 0),
        PretrainingPhase(lengths[1], predictions[1], phase_two_steps, phase_one_steps),
    ]


def default_finetuning_optimizer(task, total_steps=None, learning_rate=5e-5):
    """The optimizer a BERT task's `compile()` picks, built directly:
    `bert_finetuning_optimizer(total_steps, learning_rate)`, at
    `LORA_LEARNING_RATE` (2e-3) when `enable_lora` has frozen the backbone for
    its low-rank factors, whose updates start at zero and need a rate ~40x
    BERT's (sec. A.3's grid is for every weight).

    Args:
        task: `kzoo.models.Task`. The model being compiled.
        total_steps: int or None. As for `bert_finetuning_optimizer`. Defaults to `None`.
        learning_rate: float. The rate without LoRA. Defaults to `5e-5`.

    Returns:
        A `BertAdamW`.

    Example:

    >>> from kzoo import BertClassifier
    >>> model = BertClassifier.from_preset("bert_tiny", load_weights=False, num_classes=2)
    >>> round(float(default_finetuning_optimizer(model).learning_rate), 8)
    5e-05
    >>> model.enable_lora(8)
    >>> round(float(default_finetuning_optimizer(model).learning_rate), 8)
    0.002
    """
    if getattr(task.backbone, "_lora", None):  # `enable_lora`'s record
        learning_rate = LORA_LEARNING_RATE
    if total_steps is not None:  # warmup over 10% of the steps, then decay to 0
        learning_rate = LinearWarmupLinearDecay(learning_rate, int(round(0.1 * total_steps)), total_steps)
    return BertAdamW(learning_rate=learning_rate, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
