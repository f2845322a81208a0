"""LoRA: low-rank adapters on the attention projections (Hu et al., 2021,
"LoRA: Low-Rank Adaptation of Large Language Models", sec. 4), on Keras'
own `Dense.enable_lora` and `EinsumDense.enable_lora`, for every kzoo model
(`enable_lora` of `kzoo.models.Backbone`, `kzoo.models.Task` and
`kzoo.Transformer`, in KerasHub's shape).

- A chosen projection computes `h = W0 x + (alpha / r) B A x` (sec. 4.1):
  W0 frozen, A (d x r, He-uniform) and B (r x k, zeros, so the model starts
  as it was) trained in float32. Everything else in the backbone is frozen,
  biases included (Hugging Face PEFT's `bias="none"`); a task's head trains
  (PEFT's `modules_to_save`).
- The factors are Keras', shaped after the kernel: `A` takes all the
  kernel's axes but the last, `B` is `r x` the last. For the output
  projection and the feed-forward layers that is sec. 4.1's rank-r update.
  The Q/K/V kernels are kept per head (`H x heads x head_dim`, as in
  KerasHub and every checkpoint kzoo reads), so there `A` is
  `H x heads x r` and `B` `r x head_dim`: one rank-r update per head, rank
  up to `heads * r` in all, with about `heads / 2` times the paper's
  parameters (BERT-base, r = 8: 74k against 12k per projection). It is
  KerasHub's LoRA too; the guide gives the counts.
- The backbone's config records it (`"lora": {"rank", "alpha",
  "target_layer_names"}`), so `from_config`, presets and `.keras` files
  give a model with LoRA on.
- Weights files: Keras writes each adapted kernel merged (`W0 + (alpha/r)
  B A`), which any reader loads. kzoo adds the unmerged W0, A and B under
  `kzoo_lora/` (`append_state`), read back by `load_weights` and
  `from_preset` (`restore_state`), so a preset or a
  `keras.callbacks.BackupAndRestore` resume goes on exactly. A `.keras`
  file, read by Keras alone, keeps the merged kernel: Keras zeroes A and B
  on loading, and `revive` draws a fresh A before the next training step
  (with both at zero neither would ever move).
- `save_adapter` / `load_adapter` (`save_lora_weights` / `load_lora_weights`):
  a small file with what trains (the factors and a task's head).
- `merged`: a copy without LoRA whose kernels hold `W0 + (alpha/r) B A`,
  what the exports write (SavedModel, ONNX, Hugging Face).
- Under int8 (`quantize("int8")` of the backbone before `enable_lora`, as
  QLoRA does with 4 bits), W0 stays int8 and the factors float32; the
  merged kernel is re-quantized (Keras'), so a merged int8 model differs by
  int8's rounding.
"""

import json
import os

import h5py
import keras
import numpy as np

from kzoo import atomic

CONFIG_KEY = "lora"
DEFAULT_TARGETS = ("query", "value")  # sec. 7.1: W_q and W_v; KerasHub's and PEFT's BERT default
ADAPTER_SUFFIX = ".lora.h5"
STATE_GROUP = "kzoo_lora"
FORMAT = "kzoo-lora-1"


def adapted_layers(model):
    """The layers of `model` with LoRA on, in a fixed order.

    Example:

    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> adapted_layers(backbone)
    []
    """
    return [layer for layer in model._flatten_layers() if getattr(layer, "lora_enabled", False)]


def _base(model):
    """The part of `model` that LoRA freezes: a task's backbone, else the model."""
    backbone = getattr(model, "backbone", None)
    return backbone if isinstance(backbone, keras.Model) and backbone is not model else model


def _adaptable(base):
    return [
        layer for layer in base._flatten_layers(include_self=False)
        if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense))
    ]


def enable(model, rank, target_layer_names=None, alpha=None):
    """Turns LoRA on in `model` (see the module docstring): the named
    projections of its backbone get rank-`rank` factors, the rest of the
    backbone freezes, a task's head keeps training.

    Args:
        model: keras.Model. A kzoo backbone, task or Transformer.
        rank: int. r, the factors' inner size (sec. 4.1; 8 is common).
        target_layer_names: list of str or None. Names of the `Dense` /
            `EinsumDense` layers to adapt. Defaults to `None`:
            `("query", "value")`, every attention's W_q and W_v (sec. 7.1).
        alpha: float or None. The update's scale is `alpha / rank`.
            Defaults to `None`: `rank` (scale 1, Keras' default).

    Example:

    >>> from kzoo import BertBackbone, BertClassifier
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> model = BertClassifier(backbone, num_classes=2)
    >>> enable(model, rank=2)
    >>> [v.path for v in model.trainable_weights]  # doctest: +NORMALIZE_WHITESPACE
    ['transformer_layer_0/self_attention/query/lora_kernel_a', 'transformer_layer_0/self_attention/query/lora_kernel_b',
     'transformer_layer_0/self_attention/value/lora_kernel_a', 'transformer_layer_0/self_attention/value/lora_kernel_b',
     'logits/kernel', 'logits/bias']
    """
    owner = type(model).__name__
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
        raise ValueError(f"enable_lora needs rank, a positive int (8 is common); got rank={rank!r}.")
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0):
        raise ValueError(f"enable_lora's alpha must be a positive number or None (= rank); got alpha={alpha!r}.")
    names = DEFAULT_TARGETS if target_layer_names is None else target_layer_names
    if isinstance(names, str) or not names or not all(isinstance(name, str) for name in names):
        raise ValueError(
            f"target_layer_names must be a non-empty list of layer names, e.g. {list(DEFAULT_TARGETS)}; got {names!r}."
        )
    base = _base(model)
    if adapted_layers(base):
        raise ValueError(
            f"LoRA is on already in this {owner} (rank {base._lora['rank']}). To train another adapter, "
            "reload the model (e.g. from_preset) and call enable_lora once."
        )
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and optimizer.built:
        raise ValueError(
            f"This {owner}'s optimizer is built for its present trainable weights, which LoRA changes. "
            "Call enable_lora before the first fit, or compile() again and then enable_lora."
        )
    head_int8 = [layer.name for layer in _adaptable(model) if layer not in _adaptable(base) and layer.quantization_mode]
    if base is not model and head_int8:
        raise ValueError(
            f"This {owner}'s head ({', '.join(head_int8)}) is int8, which does not train. For LoRA on an int8 "
            f"base, quantize the backbone only: model.backbone.quantize('int8'), then model.enable_lora({rank})."
        )
    candidates = _adaptable(base)
    unknown = sorted(set(names) - {layer.name for layer in candidates})
    if unknown:
        raise ValueError(
            f"No Dense or EinsumDense layer of this {owner} is named {unknown}; LoRA adapts "
            f"{sorted({layer.name for layer in candidates})}."
        )
    for layer in base._flatten_layers(include_self=False):
        layer.trainable = False
    alpha = rank if alpha is None else alpha
    for layer in candidates:
        if layer.name in names:
            layer.trainable = True  # before enable_lora, which then freezes W0
            layer.enable_lora(int(rank), lora_alpha=alpha)
            if layer.bias is not None:
                layer.bias.trainable = False
    base._lora = {"rank": int(rank), "alpha": alpha, "target_layer_names": list(names)}


def with_record(model, config):
    """`config` with `"lora"` added when `model` itself (not a task's
    backbone, whose config records its own) has LoRA on.

    Example:

    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> enable(backbone, rank=4)
    >>> with_record(backbone, {})
    {'lora': {'rank': 4, 'alpha': 4, 'target_layer_names': ['query', 'value']}}
    """
    record = getattr(model, "_lora", None) if _base(model) is model and adapted_layers(model) else None
    return config if record is None else {**config, CONFIG_KEY: dict(record)}


def from_config(cls, config, build):
    """`build(cls, config)` without `"lora"`, then LoRA turned on as it says.

    Example:

    >>> from kzoo import BertBackbone
    >>> from kzoo.models.serialization import from_constructor_config
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> enable(backbone, rank=4)
    >>> len(adapted_layers(from_config(BertBackbone, backbone.get_config(), from_constructor_config)))
    2
    """
    config = dict(config)
    record = config.pop(CONFIG_KEY, None)
    model = build(cls, config)
    if record is not None:
        enable(model, **record)
    return model


def _without_records(config):
    if isinstance(config, dict):
        return {key: _without_records(value) for key, value in config.items() if key != CONFIG_KEY}
    return [_without_records(value) for value in config] if isinstance(config, list) else config


def merged(model):
    """A new model of `model`'s class without LoRA, each adapted kernel
    holding `W0 + (alpha / r) B A` (Keras' merge; re-quantized under int8):
    what exports write. `model` is unchanged.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> enable(backbone, rank=2)
    >>> for layer in adapted_layers(backbone):
    ...     _ = layer.lora_kernel_b.assign(np.ones(layer.lora_kernel_b.shape))
    >>> plain = merged(backbone)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]])}
    >>> pooled = lambda m: keras.ops.convert_to_numpy(m(x)["pooled_output"])
    >>> adapted_layers(plain), bool(np.allclose(pooled(plain), pooled(backbone), atol=1e-5))
    ([], True)
    """
    clone = type(model).from_config(_without_records(model.get_config()))
    for source, target in zip(model._flatten_layers(), clone._flatten_layers(), strict=True):
        store = {}
        source.save_own_variables(store)  # an adapted kernel: merged by Keras
        # Copies: JAX would share (then donate) the source's buffers.
        target.load_own_variables({key: keras.ops.convert_to_numpy(value) for key, value in store.items()})
    return clone


def revive(model):
    """Draws a fresh A (He-uniform, as `enable_lora`) for each adapted layer
    whose A and B are both zero (Keras' loading of a merged kernel), so
    that training moves them; the outputs stay the same (B is zero).

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> enable(backbone, rank=2)
    >>> layer = adapted_layers(backbone)[0]
    >>> _ = layer.lora_kernel_a.assign(np.zeros(layer.lora_kernel_a.shape))
    >>> revive(backbone)
    >>> bool(np.abs(keras.ops.convert_to_numpy(layer.lora_kernel_a)).max() > 0)
    True
    """
    for layer in adapted_layers(model):
        a, b = (keras.ops.convert_to_numpy(v) for v in (layer.lora_kernel_a, layer.lora_kernel_b))
        if not a.any() and not b.any():
            layer.lora_kernel_a.assign(keras.initializers.HeUniform()(a.shape, dtype="float32"))


def saved_weights(model):
    """`model.weights` as Keras' weights files hold them: without the factors
    (Keras merges them into the kernels)."""
    factors = {id(v) for layer in adapted_layers(model) for v in (layer.lora_kernel_a, layer.lora_kernel_b)}
    return [v for v in model.weights if id(v) not in factors]


def append_state(model, path):
    """Adds the unmerged variables of `model`'s adapted layers (W0, bias, A,
    B; int8 scales) to the weights file `path`, under `kzoo_lora/`."""
    layers = adapted_layers(model)
    if not layers:
        return
    with h5py.File(path, "a") as f:
        group = f.create_group(STATE_GROUP)
        for variable in (v for layer in layers for v in layer.weights):
            group.create_dataset(variable.path, data=keras.ops.convert_to_numpy(variable))


def restore_state(model, path):
    """Puts back what `append_state` wrote to `path` into `model`'s adapted
    layers; a file without it (a merged kernel) leaves `revive`'s fresh A."""
    layers = adapted_layers(model)
    if not layers:
        return
    with h5py.File(path, "r") as f:
        group = f.get(STATE_GROUP)
        variables = [v for layer in layers for v in layer.weights]
        if group is None or any(v.path not in group for v in variables):
            return revive(model)
        for variable in variables:
            variable.assign(group[variable.path][()])


def save_adapter(model, path):
    """Writes what trains in `model` with LoRA on (the factors, a task's
    head) to a small `.lora.h5` file, atomically; `load_adapter` on the same
    preset's model reads it back.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> enable(backbone, rank=2)
    >>> path = os.path.join(tempfile.mkdtemp(), "adapter.lora.h5")
    >>> save_adapter(backbone, path)
    >>> os.listdir(os.path.dirname(path))
    ['adapter.lora.h5']
    """
    owner = type(model).__name__
    path = os.fspath(path)
    if not path.endswith(ADAPTER_SUFFIX):
        raise ValueError(f"A LoRA file's name ends with {ADAPTER_SUFFIX!r} (KerasHub's); got {path!r}.")
    if not adapted_layers(model):
        raise ValueError(f"This {owner} has no LoRA to save: call enable_lora(rank) and fit first.")
    record = _base(model)._lora
    with atomic.replacing_file(path) as scratch, h5py.File(scratch, "w") as f:
        f.attrs.update(format=FORMAT, model=owner, record=json.dumps(record))
        for variable in model.trainable_weights:
            f.create_dataset(variable.path, data=keras.ops.convert_to_numpy(variable))


def load_adapter(model, path):
    """Reads a `save_adapter` file into `model`, turning LoRA on with the
    file's rank and targets if it is off; every trained variable must match.

    Example:

    >>> import os, tempfile
    >>> from kzoo import BertBackbone
    >>> path = os.path.join(tempfile.mkdtemp(), "empty.lora.h5")
    >>> h5py.File(path, "w").close()
    >>> load_adapter(BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                           intermediate_dim=16), path)
    Traceback (most recent call last):
    ...
    ValueError: '...empty.lora.h5' is not a kzoo LoRA file (written by save_lora_weights).
    """
    owner = type(model).__name__
    path = os.fspath(path)
    try:
        f = h5py.File(path, "r")
    except (OSError, ValueError) as error:
        raise ValueError(f"Cannot read the LoRA file {path!r} ({error}); write it with save_lora_weights.") from None
    with f:
        if f.attrs.get("format") != FORMAT:
            raise ValueError(f"{path!r} is not a kzoo LoRA file (written by save_lora_weights).")
        record, saved_from = json.loads(f.attrs["record"]), f.attrs["model"]
        values = {}
        f.visititems(lambda name, item: values.update({name: item[()]}) if isinstance(item, h5py.Dataset) else None)
    if not adapted_layers(model):
        enable(model, **record)
    elif _base(model)._lora != record:
        raise ValueError(
            f"{path!r} holds LoRA {record}, but this {owner} has {_base(model)._lora}. Load it into a model "
            "without LoRA (e.g. from_preset of the base), which then takes the file's."
        )
    expected = {v.path: v for v in model.trainable_weights}
    differences = [
        f"{name!r}: " + ("not in the file" if name not in values else "not in the model" if name not in expected
                         else f"shape {tuple(expected[name].shape)} in the model, {values[name].shape} in the file")
        for name in sorted(expected.keys() | values.keys())
        if name not in values or name not in expected or tuple(expected[name].shape) != values[name].shape
    ]
    if differences:
        raise ValueError(
            f"{path!r} was saved from another model than this {owner} ({len(differences)} trained variable(s) "
            f"differ):\n  " + "\n  ".join(differences[:5]) + "\nLoad it into the model it was trained on "
            f"(a {saved_from} from the same preset, with the same head)."
        )
    for name, variable in expected.items():
        variable.assign(values[name])
