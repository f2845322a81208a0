"""The base class of kzoo's backbones: a network built from its hyper-parameters."""

import keras
import numpy as np

from kzoo import presets
from kzoo.backend import is_concrete
from kzoo.models.base_model import BaseModel
from kzoo.models.batching import IN_MEMORY
from kzoo.models.datasets import checked
from kzoo.models.input_checks import check_examples


class Backbone(BaseModel):
    """A network built from its hyper-parameters as a functional `keras.Model`.

    A subclass's `__init__` reads in three parts, as KerasHub's backbones do:
    the layers and hyper-parameters, set as attributes; the functional graph,
    built by calling the subclass's own forward methods on `keras.Input`s (so
    the graph and every eager path run the same code); then
    `super().__init__(inputs, outputs, dtype=dtype, **kwargs)`. Layers set
    before that call are tracked once the model exists, in the order set, so
    variable paths are deterministic.

    The config is the constructor's arguments, read from the attributes of the
    same names, plus `name`, `trainable` and the dtype policy. `from_preset` and
    `save_to_preset` read and write preset directories (KerasHub's layout);
    saves write beside the destination and rename into place. `fit`, `evaluate`
    and `predict` check packed inputs with `complete_inputs` and against
    `input_limits()` before the compiled step.

    Args:
        inputs: a `keras.Input` or a dict of them. The graph's inputs.
        outputs: a tensor or a dict of tensors. The graph's outputs.
        dtype: str or `keras.DTypePolicy`. The model's dtype policy (e.g.
            `"mixed_bfloat16"`), also its layers'. Defaults to `None`, the
            global policy.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Example:

    >>> class TinyBackbone(Backbone):
    ...     def __init__(self, hidden_dim, dtype=None, **kwargs):
    ...         self.dense = keras.layers.Dense(hidden_dim, dtype=dtype, name="dense")
    ...         self.hidden_dim = hidden_dim
    ...         inputs = keras.Input((4,), name="features")
    ...         super().__init__(inputs, self.dense(inputs), dtype=dtype, **kwargs)
    >>> backbone = TinyBackbone(hidden_dim=3, dtype="mixed_bfloat16")
    >>> config = backbone.get_config()
    >>> config["hidden_dim"], config["dtype"]["config"]["name"]
    (3, 'mixed_bfloat16')
    >>> TinyBackbone.from_config(config).get_config() == config
    True
    """

    def __init__(self, inputs, outputs, dtype=None, **kwargs):
        layers_set_early = self.__dict__.pop("_layers_set_before_init", [])
        self.__dict__["_keras_init_started"] = True
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)
        for name in layers_set_early:
            setattr(self, name, self.__dict__.pop(name))  # tracked now, in the order set
        if dtype is not None:
            # The functional constructor drops `dtype`: without this the model's
            # own policy (and so `get_config()["dtype"]`) stays the global one.
            self.dtype_policy = keras.dtype_policies.get(dtype)

    def __setattr__(self, name, value):
        if "_keras_init_started" in self.__dict__:
            return super().__setattr__(name, value)
        # Before `keras.Model.__init__`, which torch needs before it can track a
        # layer: stored as is, and layers set again by `__init__`.
        self.__dict__[name] = value
        if _holds_layers(value):
            self.__dict__.setdefault("_layers_set_before_init", []).append(name)

    @classmethod
    def from_preset(cls, preset, /, load_weights=True, **overrides):
        """The model from a built-in preset name or a preset directory;
        keyword arguments override its config.

        A name with released weights (`kzoo.list_presets()`) loads them, fetched
        once into a cache; an architecture-only name gives random weights and a
        warning; an unknown name raises a `ValueError` listing close matches. A
        directory written by `save_to_preset` gives the saved model; a BERT
        checkpoint in another format (Hugging Face, google-research, KerasHub) is
        converted.

        Args:
            preset: str or `os.PathLike`. A preset name or directory.
            load_weights: bool. `False` builds a name's architecture with
                random weights: no warning, no network. Defaults to `True`.
            **overrides: config fields to change (e.g. `max_sequence_length`, `dtype`).

        Returns:
            An instance of the class `from_preset` is called on.

        Example:

        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone.from_preset("bert_tiny", load_weights=False, max_sequence_length=128)
        >>> backbone.num_layers, backbone.hidden_dim, backbone.max_sequence_length
        (2, 128, 128)
        """
        return presets.load(cls, preset, load_weights, **overrides)

    def save_to_preset(self, preset_dir, format="kzoo"):
        """Saves `config.json`, `model.weights.h5` and `metadata.json` into
        `preset_dir` (KerasHub's layout) for `from_preset`; a BERT backbone also
        with `format="huggingface"` (`config.json` and `model.safetensors`, which
        `transformers.BertModel` loads).

        Args:
            preset_dir: str or `os.PathLike`. A new or empty directory, or a preset directory.
            format: str. `"kzoo"` or `"huggingface"`. Defaults to `"kzoo"`.

        Example:

        >>> import tempfile
        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> path = tempfile.mkdtemp()
        >>> backbone.save_to_preset(path)
        >>> BertBackbone.from_preset(path).get_config() == backbone.get_config()
        True
        """
        presets.save_backbone(self, preset_dir, format=format)

    def input_limits(self):
        """What the inputs' values must respect: input name -> a list of
        `kzoo.backend.IdsLimit` (ids inside an embedding table) and `LengthLimit`
        (the last axis inside the position table). Defaults to none.

        Example:

        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> [limit[0] for limit in backbone.input_limits()["token_ids"]]
        [50, 512]
        """
        return {}

    def complete_inputs(self, inputs):
        """`inputs` as the graph takes them, checked as an eager call checks them
        (`fit`, `evaluate` and `predict` run it on examples in memory, so that
        text, fractional ids and the like get the same message). Defaults to
        `inputs` as they are.

        Example:

        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> sorted(backbone.complete_inputs({"token_ids": [[2, 7, 3]]}))
        ['padding_mask', 'segment_ids', 'token_ids']
        """
        return inputs

    def _prepare(self, x, y=None, sample_weight=None, batch_size=None, order=None, seed=0, refused=None):
        # Packed inputs, checked once here (`BaseModel`); Keras batches them.
        x, y = check_examples(x, y, type(self).__name__, batch_size)
        if isinstance(x, (dict, *IN_MEMORY)):  # Keras would truncate fractional ids, or fail on strings
            x = self.complete_inputs(x)
        x = checked(x, self.input_limits(), refused)
        return {"x": x, "y": y, "sample_weight": sample_weight, "batch_size": batch_size}, None


def _holds_layers(value):
    if isinstance(value, (list, tuple)):
        return any(isinstance(item, keras.layers.Layer) for item in value)
    return isinstance(value, keras.layers.Layer)


# === The id inputs of an eager call (`complete_inputs`) ===


def check_id_inputs(inputs, tables, owner, text_hint, same_shape=True):
    """`ValueError`s for a backbone's id inputs (`{name: value}`, None absent)
    that cannot be ids: text, rank below 2, shapes that disagree (all of them,
    or with `same_shape=False` the batch size), fractional values, or, for the
    inputs in `tables` (`{name: rows of its table}`), values beyond int32 (a
    cast would wrap them; the embedding layers check the rest of the range).
    `text_hint` says what to call on text first."""
    shapes = {}
    for name, value in inputs.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = arrays_from_lists({name: value}, owner)[name]
        if holds_text(value):
            raise ValueError(
                f"{owner} takes token ids, not text: {name} holds strings. {text_hint}"
            )
        if isinstance(value, np.ndarray) and value.dtype == object:
            raise ValueError(
                f"{owner}: {name} is an array of Python objects (e.g. rows of different lengths, or "
                "None among the ids); ids must be an int array of shape (batch, sequence_length)."
            )
        shape = _shape(value)
        if shape is not None and len(shape) < 2:
            raise ValueError(
                f"{owner}: {name} must be (batch, sequence_length); got shape {shape}. For one "
                "example, keep the batch dimension: give the preprocessor a list of one text, "
                "or use ids[None]."
            )
        if shape is not None:
            shapes[name] = shape
        if name in tables and is_concrete(value):
            values = keras.ops.convert_to_numpy(value) if keras.ops.is_tensor(value) else np.asarray(value)
            _check_integral(values, name, owner)
            _check_int32(values, name, owner, tables[name])
    _check_shapes(shapes, owner, same_shape)


def arrays_from_lists(inputs, owner):
    """`inputs` with lists made NumPy arrays and None values dropped; ragged rows a `ValueError` saying to pad them."""
    arrays = {}
    for name, value in inputs.items():
        if isinstance(value, (list, tuple)):
            try:
                value = np.asarray(value)
            except ValueError:
                raise ValueError(
                    f"{owner}: the rows of {name} have different lengths; ids must be an int array of "
                    "shape (batch, sequence_length): pad the rows (the preprocessor does)."
                ) from None
        if value is not None:
            arrays[name] = value
    return arrays


def missing_token_ids(name, owner, text_hint):
    """The `ValueError` for a backbone called without its token ids."""
    return ValueError(
        f"{owner} got no {name} (None): it takes token ids, an int array (batch, "
        f"sequence_length). {text_hint}"
    )


def _shape(value):
    """The shape as a tuple (None for unknown, symbolic dimensions), or None when even the rank is unknown."""
    shape = getattr(value, "shape", None)
    if shape is None:
        return np.shape(value)
    try:
        return tuple(int(d) if isinstance(d, (int, np.integer)) else None for d in shape)
    except (TypeError, ValueError):  # a TensorShape of unknown rank
        return None


def holds_text(value):
    """Whether `value` holds text: a string, a `tf.string` tensor, an array of strings, a list starting with one."""
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    if isinstance(value, (str, bytes)):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return False
    if isinstance(dtype, np.dtype):
        strings = dtype == np.dtype(object) and any(isinstance(v, (str, bytes)) for v in value.flat)
        return dtype.kind in "US" or strings
    return getattr(dtype, "name", None) == "string"  # a tf.string tensor


def _check_integral(values, name, owner):
    if values.dtype.kind == "f" and values.size:
        fractional = np.argwhere(np.mod(values, 1) != 0)
        if len(fractional):
            index = tuple(int(i) for i in fractional[0])
            raise ValueError(
                f"{owner}: {name} must be integer ids; got {values[index]} at index {index}. Ids "
                "are never rounded: check where they came from."
            )


def _check_int32(values, name, owner, table):
    """Ids the model's int32 cast would wrap (2**32 + 5 becomes 5)."""
    if values.size and (values.min() < -(2**31) or values.max() >= 2**31):
        extreme = values.max() if values.max() >= 2**31 else values.min()
        raise ValueError(
            f"{owner}: {name} holds {extreme}, beyond int32, the ids' dtype (a cast would wrap it "
            f"to another id). Ids must lie in [0, {table}): were they made with another vocabulary?"
        )


def _check_shapes(shapes, owner, same_shape):
    """Known dimensions must agree (all of them, or the batch size)."""
    names = list(shapes)
    for other in names[1:]:
        a, b = shapes[names[0]], shapes[other]
        dims = range(max(len(a), len(b))) if same_shape else (0,)
        agree = len(a) == len(b) or not same_shape
        agree = agree and all(a[d] is None or b[d] is None or a[d] == b[d] for d in dims)
        if not agree:
            what = "the same shape" if same_shape else "the same batch size"
            raise ValueError(
                f"{owner}: {names[0]} has shape {a} but {other} has shape {b}; they must have "
                f"{what}. Make them together, e.g. with the preprocessor."
            )
