"""What `kzoo.Transformer` takes: its config (sec. 3.2.2, 3.5, Table 3) and its
inputs, source and target token ids, checked before any work."""

from kzoo.models.backbone import arrays_from_lists, check_id_inputs, holds_text, missing_token_ids

INPUT_NAMES = ("encoder_token_ids", "decoder_token_ids")
POSITION_ENCODINGS = ("sinusoidal", "learned")
TEXT_HINT = (
    "For text, use kzoo.TransformerPreprocessor (or the TransformerTokenizer) first: "
    "model(preprocessor(sources, targets)[0]), or model.generate(preprocessor(sources))."
)


def check_config(vocabulary_size, hidden_dim, num_heads, key_dim, position_encoding, **special_ids):
    """`ValueError`s for configurations the model cannot build (sec. 3.2.2:
    d_k = d_model / h unless given)."""
    if position_encoding not in POSITION_ENCODINGS:
        raise ValueError(
            f"Unknown position_encoding {position_encoding!r}: use 'sinusoidal' (sec. 3.5) "
            "or 'learned' (Table 3 row E)."
        )
    if key_dim is None and hidden_dim % num_heads:
        raise ValueError(
            f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}, so "
            "key_dim = hidden_dim / num_heads is undefined. Choose a number of heads that "
            "divides hidden_dim, or pass key_dim (d_k) explicitly (Table 3 row B)."
        )
    for name, value in special_ids.items():
        if not 0 <= value < vocabulary_size:
            raise ValueError(
                f"{name}={value} is not a token id of the {vocabulary_size}-token vocabulary; "
                "kzoo's convention is 0 padding, 1 unknown, 2 start, 3 end."
            )


def standardize_inputs(inputs, vocabulary_size=None):
    """The inputs dict with lists made arrays, checked (`check_id_inputs`,
    ids against `vocabulary_size` if given), or a `ValueError` naming the keys."""
    if not isinstance(inputs, dict) and holds_text(inputs):
        raise ValueError(
            f"Transformer takes token ids, not text: a dict with keys {list(INPUT_NAMES)}. {TEXT_HINT}"
        )
    if not isinstance(inputs, dict) or set(inputs) != set(INPUT_NAMES):
        got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(
            f"Transformer takes a dict with keys {list(INPUT_NAMES)} (source and target "
            f"token ids, each (batch, length)); got {got}. {TEXT_HINT}"
        )
    for name, value in inputs.items():
        if value is None:
            raise missing_token_ids(name, "Transformer", TEXT_HINT)
    inputs = arrays_from_lists(inputs, "Transformer")
    tables = {} if vocabulary_size is None else dict.fromkeys(INPUT_NAMES, vocabulary_size)
    check_id_inputs(inputs, tables, "Transformer", TEXT_HINT, same_shape=False)
    return inputs
