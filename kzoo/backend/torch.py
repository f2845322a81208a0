"""torch: a fused Adam step, small batches and decoder steps run as traces, and
key/value caches written in place.

Keras runs `keras.optimizers.Adam`/`AdamW` on torch with multi-tensor
(`torch._foreach_*`) updates, but only for those exact classes: a subclass
falls back to one Python-level update per variable, much slower for BERT's
hundreds of variables. `fused_adam_base` gives kzoo's optimizer subclasses a
faster base still: the update as one `torch._fused_adam_` kernel (the one
behind `torch.optim.Adam(fused=True)`), Adam's Algorithm 1 as PyTorch computes
it (`kzoo.backend.adam_base`). Weight decay stays Keras' own (decoupled, with
its exclusions).

`TracedCalls` runs a model's small predict batches and the Transformer's
decoder steps as TorchScript traces: eager Keras spends about half of a
one-text forward pass in its per-layer Python (13 of 27 ms for
all-MiniLM-L6-v2 on one core, where the trace takes 12.7, against 15 for
Hugging Face's model), and two thirds of a decoder step.

`write_cache` and `cache_attention` keep a decoder step's memory traffic to
what PyTorch's own growing caches move: Keras' `slice_update` clones the whole
buffer to write one position, and its `dot_product_attention` copies the
transposed keys and values to contiguous memory; a beam step spent two thirds
of its time in those copies.
"""

import collections
import contextlib
import contextvars
import warnings

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

        step = float(keras.ops.convert_to_numpy(self.iterations)) + 1
        indices = [self._get_variable_index(v) for v in variables]
        torch._fused_adam_(
            [v.value for v in variables],
            [g.to(v.value.dtype) for g, v in zip(grads, variables)],
            [self._momentums[i].value for i in indices],
            [self._velocities[i].value for i in indices],
            [self._velocity_hats[i].value for i in indices] if self.amsgrad else [],
            [torch.tensor(step)] * len(variables),
            lr=float(keras.ops.convert_to_numpy(learning_rate)),
            beta1=self.beta_1,
            beta2=self.beta_2,
            weight_decay=0.0,
            eps=self.epsilon,
            amsgrad=self.amsgrad,
            maximize=False,
        )


# Batches of at most this many positions (rows x length) are traced: there Keras'
# Python is most of a call (1 x 24: 2.0x faster traced, 4 x 24: 1.5x, 32 x 24: 1.1x).
TRACED_POSITIONS = 512
TRACES_KEPT = 64


def small_batch_traces(model, predict_function):
    """Keras' torch `predict_function` of `model`, with batches of at most
    `TRACED_POSITIONS` positions run as traces of the same step (`TracedCalls`)."""
    if isinstance(predict_function, _SmallBatchTraces):
        return predict_function
    return _SmallBatchTraces(model, predict_function)


class _SmallBatchTraces:
    """See `small_batch_traces`."""

    def __init__(self, model, eager):
        self.eager = eager
        self.traced = TracedCalls(model, lambda x: model.predict_step((x,)))

    def __call__(self, data):
        x = keras.utils.unpack_x_y_sample_weight(data[0])[0] if len(data) == 1 else None
        leaves = keras.tree.flatten(x) if x is not None else []
        shape = getattr(leaves[0], "shape", ()) if leaves else ()
        if len(shape) < 2 or shape[0] * shape[1] > TRACED_POSITIONS:
            return self.eager(data)
        return self.traced(x, eager=lambda: self.eager(data))


class TracedCalls:
    """`function` (a structure of tensors in, of tensors out, reading `model`'s
    weights) run as a `torch.jit.trace` of itself from the second time the same
    input shapes come (one trace costs about one eager call), eagerly before, where
    tracing fails, or once `torch.jit` is gone (deprecated in torch 2.13). A trace
    reads the model's own parameters, so training and loaded weights show; a
    change of variables (LoRA, quantization) traces again. Used by small predict
    batches and by `Transformer.generate`'s decoder steps, where Keras' per-layer
    Python is most of a call."""

    def __init__(self, model, function):
        self.model, self.function = model, function
        self.traces = collections.OrderedDict()  # (shapes, variables) -> trace; None: seen once; False: eager
        self.variables = None  # inside `fixed_weights`: the model's variables, looked up once

    @contextlib.contextmanager
    def fixed_weights(self):
        """Calls that look the model's variables up once (half a millisecond a
        decoder step), not each time: for a loop that changes none."""
        self.variables = tuple(map(id, self.model.weights))
        try:
            yield self
        finally:
            self.variables = None

    def __call__(self, *arguments, eager=None):
        """`function(*arguments)`, traced once these shapes were seen; `eager()` instead of `function` when not."""
        eager = eager or (lambda: self.function(*arguments))
        leaves = keras.tree.flatten_with_path(arguments)
        if not all(hasattr(v, "dtype") for _, v in leaves):  # a Python number: a value tracing would fix
            return eager()
        variables = self.variables or tuple(map(id, self.model.weights))
        key = tuple((path, tuple(v.shape), v.dtype) for path, v in leaves), variables
        trace = self.traces.get(key)
        if trace is None:
            if key in self.traces:  # the second time: trace it
                trace = self.traces[key] = self._trace(arguments)
            else:
                self.traces[key] = None
                while len(self.traces) > TRACES_KEPT:
                    self.traces.popitem(last=False)
        if not trace:
            return eager()
        self.traces.move_to_end(key)
        import torch  # noqa: PLC0415

        with torch.no_grad():  # Keras' conversion only where needed: 10 µs a tensor, a decoder step has 13
            return trace(*[v if isinstance(v, torch.Tensor) else keras.ops.convert_to_tensor(v) for _, v in leaves])

    def _trace(self, arguments):
        import torch  # noqa: PLC0415

        function, structure = self.function, arguments

        class Step(torch.nn.Module):  # the call's tensors in and out, flat, as tracing takes them
            def __init__(self, model):
                super().__init__()
                self.model = model

            def forward(self, *tensors):
                return function(*keras.tree.pack_sequence_as(structure, list(tensors)))

        tensors = [keras.ops.convert_to_tensor(v) for v in keras.tree.flatten(arguments)]
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tracing's deprecation and shape-specialisation notes
                traced = torch.jit.trace(Step(self.model), tuple(tensors), check_trace=False, strict=False)
        except Exception:  # noqa: BLE001 (a call tracing cannot take runs eagerly, as before)
            return False
        return traced


_OWNED_CACHES = contextvars.ContextVar("kzoo_owned_caches", default=False)


@contextlib.contextmanager
def owned_caches():
    """See `kzoo.backend.owned_caches`."""
    token = _OWNED_CACHES.set(True)
    try:
        yield
    finally:
        _OWNED_CACHES.reset(token)


def write_cache(cache, update, index):
    """`update` written into `cache` at `index` along axis 1: in place inside
    `owned_caches` (the tensor returned is `cache`), into a copy outside it or
    where autograd records the write."""
    import torch  # noqa: PLC0415

    update = update.to(cache.dtype)
    if not _OWNED_CACHES.get() or (torch.is_grad_enabled() and (cache.requires_grad or update.requires_grad)):
        cache = cache.clone()  # the caller's tensor stays as it was (autograd may have saved it)
    positions = torch.arange(update.shape[1], device=cache.device) + torch.as_tensor(index, device=cache.device)
    return cache.index_copy_(1, positions, update)


def cache_attention(query, key_cache, value_cache, mask, scale, length):
    """`torch.nn.functional.scaled_dot_product_attention` of `query` `(batch,
    T, heads, d_k)` over the first `length` slots of the caches `(batch,
    slots, heads, d)`, read where they lie (not copied: fastest stored heads
    first, `attention_layout`); `mask`, bool `(batch | 1, 1 | heads, T, slots)`
    or None, sliced alike; `length` None: all. Returns `(batch, T, heads, d_v)`."""
    import torch  # noqa: PLC0415

    dtype = torch.promote_types(torch.promote_types(query.dtype, key_cache.dtype), value_cache.dtype)
    keys, values = (c[:, :length].to(dtype).transpose(1, 2) for c in (key_cache, value_cache))
    context = torch.nn.functional.scaled_dot_product_attention(
        query.to(dtype).transpose(1, 2), keys, values, attn_mask=None if mask is None else mask[..., :length],
        scale=scale,
    )
    return context.transpose(1, 2)


class CacheRows:
    """See `kzoo.backend.cache_rows`: the rows taken into a free buffer of the
    same shape (zeros the first time), whose slots from `length` on are still
    zeros (a search's lengths only grow); the cache read is free afterwards."""

    def __init__(self):
        self.free = collections.defaultdict(list)  # (shape, strides, dtype) -> buffers

    def __call__(self, cache, rows, length):
        import torch  # noqa: PLC0415

        rows = torch.as_tensor(rows).long()
        free = self.free[(len(rows), *cache.shape[1:]), cache.stride(), cache.dtype]
        taken = free.pop() if free else _in_layout_of(cache, torch.zeros, len(rows))
        torch.index_select(cache[:, :length], 0, rows, out=taken[:, :length])
        free.append(cache)
        return taken


def attention_layout(x):
    """`x` `(batch, slots, heads, dim)` stored heads before slots (strides, not shape)."""
    return x.transpose(1, 2).contiguous().transpose(1, 2)


def take_rows(x, rows):
    """`x`'s rows `rows` (axis 0), stored in `x`'s memory layout."""
    import torch  # noqa: PLC0415

    x = keras.ops.convert_to_tensor(x)
    order = _memory_order(x)
    taken = x.permute(order).index_select(order.index(0), torch.as_tensor(rows).long())
    return taken.permute([order.index(axis) for axis in range(x.dim())])


def _memory_order(x):
    """`x`'s axes from the outermost in memory (largest stride) in; ties in shape order."""
    return sorted(range(x.dim()), key=lambda axis: -x.stride(axis))


def _in_layout_of(x, make, rows):
    """`make(shape)` of `x`'s shape with `rows` rows, stored in `x`'s memory layout."""
    order, shape = _memory_order(x), (rows, *x.shape[1:])
    made = make([shape[axis] for axis in order], dtype=x.dtype, device=x.device)
    return made.permute([order.index(axis) for axis in range(x.dim())])
