"""Parameter counts of the Transformer in closed form ("Attention Is All You
Need", Table 3's "params ×10^6" column), independent of Keras.

The count follows sec. 3 term by term: one shared `V × d_model` embedding
matrix (sec. 3.4; it is also the pre-softmax projection, so no output layer of
its own), N encoder layers of self-attention + feed-forward and N decoder layers
of self-attention + encoder-decoder attention + feed-forward (sec. 3.1), each
sub-layer followed by a LayerNorm (gain and bias); sinusoids have no
parameters, learned positions (row E) one `max_sequence_length × d_model` table
per stack.
"""

from kzoo.presets import get_preset

# The presets in Table 3's order (rows base, A, B, C, D, E, big).
TABLE_3_PRESETS = (
    "transformer_base",
    "transformer_a_h1",
    "transformer_a_h4",
    "transformer_a_h16",
    "transformer_a_h32",
    "transformer_b_dk16",
    "transformer_b_dk32",
    "transformer_c_n2",
    "transformer_c_n4",
    "transformer_c_n8",
    "transformer_c_dmodel256",
    "transformer_c_dmodel1024",
    "transformer_c_dff1024",
    "transformer_c_dff4096",
    "transformer_d_dropout0",
    "transformer_d_dropout0_2",
    "transformer_d_ls0",
    "transformer_d_ls0_2",
    "transformer_e_learned_positions",
    "transformer_big",
)

# Table 3's "params ×10^6" column; rows A, D and E leave it blank.
PAPER_PARAMETERS_MILLIONS = {
    "transformer_base": 65,
    "transformer_b_dk16": 58,
    "transformer_b_dk32": 60,
    "transformer_c_n2": 36,
    "transformer_c_n4": 50,
    "transformer_c_n8": 80,
    "transformer_c_dmodel256": 28,
    "transformer_c_dmodel1024": 168,
    "transformer_c_dff1024": 53,
    "transformer_c_dff4096": 90,
    "transformer_big": 213,
}

# The base model's sizes (Table 3, first row), for fields a config leaves out.
BASE = {
    "vocabulary_size": 37000,
    "num_layers": 6,
    "hidden_dim": 512,
    "intermediate_dim": 2048,
    "num_heads": 8,
    "key_dim": None,
    "value_dim": None,
    "position_encoding": "sinusoidal",
    "max_sequence_length": 1024,
}


def head_dims(config):
    """(d_k, d_v) of a config: d_k = d_model / h and d_v = d_k unless given (sec. 3.2.2).

    Example:

    >>> head_dims({"hidden_dim": 512, "num_heads": 8})
    (64, 64)
    >>> head_dims({"hidden_dim": 512, "num_heads": 8, "key_dim": 16, "value_dim": 64})
    (16, 64)
    """
    config = {**BASE, **config}
    key_dim = config["key_dim"] or config["hidden_dim"] // config["num_heads"]
    return key_dim, config["value_dim"] or key_dim


def transformer_parameter_count(config):
    """The exact number of parameters of a `kzoo.Transformer` config (sec. 3, Table 3).

    Per attention sub-layer (sec. 3.2.2) with h heads: `W^Q`, `W^K`
    (`d_model × h·d_k` and biases), `W^V` (`d_model × h·d_v` and biases) and
    `W^O` (`h·d_v × d_model` and bias). Per feed-forward sub-layer (eq. 2):
    `d_model × d_ff + d_ff + d_ff × d_model + d_model`. Per LayerNorm `2 d_model`.

    Args:
        config: a dict of `Transformer` arguments (a preset's `config`);
            missing sizes are the base model's.

    Returns:
        An int.

    Example:

    >>> transformer_parameter_count({"vocabulary_size": 37000})  # the base model
    63082496
    """
    config = {**BASE, **config}
    d, d_ff, h, n = (config[k] for k in ("hidden_dim", "intermediate_dim", "num_heads", "num_layers"))
    d_k, d_v = head_dims(config)
    attention = 2 * (d * h * d_k + h * d_k) + (d * h * d_v + h * d_v) + (h * d_v * d + d)
    feed_forward = d * d_ff + d_ff + d_ff * d + d
    layer_norm = 2 * d
    encoder_layer = attention + feed_forward + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    embeddings = config["vocabulary_size"] * d
    if config["position_encoding"] == "learned":
        embeddings += 2 * config["max_sequence_length"] * d  # one table per stack
    return embeddings + n * (encoder_layer + decoder_layer)


def parameter_table(names=None):
    """One row per preset (`names`, default all of Table 3 in its order): the
    sizes, the exact count and the paper's rounded figure (Table 3; None where
    the paper leaves it blank).

    Example:

    >>> row = parameter_table(["transformer_base"])[0]
    >>> row["N"], row["d_model"], row["d_k"], row["params"], row["paper_params_millions"]
    (6, 512, 64, 63082496, 65)
    """
    rows = []
    for name in names or TABLE_3_PRESETS:
        config = {**BASE, **get_preset(name)["config"]}
        d_k, d_v = head_dims(config)
        rows.append({
            "preset": name,
            "N": config["num_layers"],
            "d_model": config["hidden_dim"],
            "d_ff": config["intermediate_dim"],
            "h": config["num_heads"],
            "d_k": d_k,
            "d_v": d_v,
            "positions": config["position_encoding"],
            "params": transformer_parameter_count(config),
            "paper_params_millions": PAPER_PARAMETERS_MILLIONS.get(name),
        })
    return rows


def format_parameter_table(rows=None):
    """`parameter_table()` as a Markdown table (for the README), params in millions.

    Example:

    >>> print(format_parameter_table(parameter_table(["transformer_base"])))
    | preset | N | d_model | d_ff | h | d_k | d_v | positions | params | paper (Table 3) |
    |---|---|---|---|---|---|---|---|---|---|
    | transformer_base | 6 | 512 | 2048 | 8 | 64 | 64 | sinusoidal | 63,082,496 (63.1M) | 65M |
    """
    rows = parameter_table() if rows is None else rows
    lines = [
        "| preset | N | d_model | d_ff | h | d_k | d_v | positions | params | paper (Table 3) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        paper = "—" if row["paper_params_millions"] is None else f"{row['paper_params_millions']}M"
        lines.append(
            f"| {row['preset']} | {row['N']} | {row['d_model']} | {row['d_ff']} | {row['h']} "
            f"| {row['d_k']} | {row['d_v']} | {row['positions']} "
            f"| {row['params']:,} ({row['params'] / 1e6:.1f}M) | {paper} |"
        )
    return "\n".join(lines)
