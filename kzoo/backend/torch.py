"""torch: a fused Adam step.

Keras runs `keras.optimizers.Adam`/`AdamW` on torch with multi-tensor
(`torch._foreach_*`) updates, but only for those exact classes: a subclass
falls back to one Python-level update per variable, much slower for BERT's
hundreds of variables. `fused_adam_base` gives kzoo's optimizer subclasses a
faster base still: Keras' update as one `torch._fused_adam_` kernel (the one
behind `torch.optim.Adam(fused=True)`), with epsilon rescaled per step so it
computes `p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)`.
Weight decay stays Keras' own (decoupled, with its exclusions).
"""

import keras


def fused_adam_base(optimizer_class):
    """Keras' torch multi-tensor `Adam`/`AdamW` class (private module
    `keras.src.backend.torch.optimizers`) with its step as one fused kernel."""
    from keras.src.backend.torch.optimizers import torch_adam, torch_adamw  # noqa: PLC0415

    base = {keras.optimizers.Adam: torch_adam.Adam, keras.optimizers.AdamW: torch_adamw.AdamW}[optimizer_class]
    return type(f"Fused{optimizer_class.__name__}", (_FusedAdamStep, base), {})


class _FusedAdamStep:
    """Keras' torch Adam/AdamW step as one fused kernel (see `fused_adam_base`)."""

    def _parallel_update_step(self, grads, variables, learning_rate):
        import torch  # noqa: PLC0415

        if self.amsgrad or variables[0].value.dtype != torch.float32:
            return super()._parallel_update_step(grads, variables, learning_rate)
        step = float(keras.ops.convert_to_numpy(self.iterations)) + 1
        indices = [self._get_variable_index(v) for v in variables]
        bias_correction_2_sqrt = (1 - self.beta_2**step) ** 0.5
        torch._fused_adam_(
            [v.value for v in variables],
            [g.to(torch.float32) for g in grads],
            [self._momentums[i].value for i in indices],
            [self._velocities[i].value for i in indices],
            [],
            [torch.tensor(step)] * len(variables),
            lr=float(keras.ops.convert_to_numpy(learning_rate)),
            beta1=self.beta_1,
            beta2=self.beta_2,
            weight_decay=0.0,
            eps=self.epsilon / bias_correction_2_sqrt,
            amsgrad=False,
            maximize=False,
        )
