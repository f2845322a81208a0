"""BERT's config in Hugging Face's `BertConfig` fields (google-research's
`bert_config.json` has the same), read into `kzoo.BertBackbone` arguments,
each field checked here so that an error names it as the file writes it."""

# Hugging Face `hidden_act` -> kzoo activation: "gelu" is the exact erf GELU,
# "gelu_new", "gelu_fast" and "gelu_pytorch_tanh" the tanh approximation.
ACTIVATIONS = {"gelu": "gelu", "gelu_python": "gelu", "relu": "relu",
               **dict.fromkeys(("gelu_new", "gelu_fast", "gelu_pytorch_tanh"), "gelu_approximate")}
EXPORTED_ACTIVATIONS = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu"}
# `BertConfig` field -> (kzoo.BertBackbone argument, transformers' default (None:
# required), the smallest int allowed (None: a float)).
FIELDS = {
    "vocab_size": ("vocabulary_size", None, 1),
    "num_hidden_layers": ("num_layers", 12, 0),
    "num_attention_heads": ("num_heads", 12, 1),
    "hidden_size": ("hidden_dim", 768, 1),
    "intermediate_size": ("intermediate_dim", 3072, 1),
    "hidden_dropout_prob": ("dropout", 0.1, None),
    "max_position_embeddings": ("max_sequence_length", 512, 1),
    "type_vocab_size": ("num_segments", 2, 1),
    "layer_norm_eps": ("layer_norm_epsilon", 1e-12, None),
}


def backbone_config(config, location):
    """`kzoo.BertBackbone` arguments from a Hugging Face `BertConfig` dict (`transformers`' defaults);
    errors name `location` and the fields as the file writes them."""
    model_type = config.get("model_type")
    if model_type != "bert":
        raise ValueError(
            f"{location} has model_type {model_type!r}: kzoo loads Hugging Face checkpoints with "
            "model_type in ['bert']."
        )
    activation = config.get("hidden_act", "gelu")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{location} has hidden_act {activation!r}; kzoo's BERT supports {sorted(ACTIVATIONS)}.")
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute" or config.get("is_decoder"):
        raise ValueError(
            f"{location} is a BERT variant kzoo does not build (position_embedding_type="
            f"{position_type!r}, is_decoder={config.get('is_decoder', False)}); kzoo's BERT is "
            "the paper's encoder with absolute learned positions."
        )
    arguments = {"activation": ACTIVATIONS[activation]}
    for field, (argument, default, smallest) in FIELDS.items():
        arguments[argument] = _field(config, field, default, smallest, location)
    return arguments


def _field(config, field, default, smallest, location):
    """`config[field]` (else `default`): an int >= `smallest`, or where it is None a number >= 0."""
    if field not in config and default is None:
        raise ValueError(f"{location} has no {field}: a BERT config.json needs it. Copy the checkpoint again.")
    value = config.get(field, default)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if smallest is None and not (number and value >= 0):
        raise ValueError(f"{location}: {field} must be a JSON number >= 0; got {value!r} ({type(value).__name__}).")
    if smallest is not None and not (number and isinstance(value, int) and value >= smallest):
        raise ValueError(
            f"{location}: {field} must be a JSON integer >= {smallest}; got {value!r} ({type(value).__name__}). "
            'It is never rounded or parsed: write e.g. 2, not "2" or 2.0.'
        )
    return value
