"""An independent float64 numpy implementation of BERT's forward pass (BERT sec. 3).

It shares no code with kzoo: it only reads a backbone's weights by variable
path, so a kzoo bug (a transposed kernel, a missing scale, the wrong GELU,
a mask applied to queries instead of keys) shows up as a mismatch.

The computation, for token ids `w`, segment ids `s` and padding mask `m`:

    E = LayerNorm(W_tok[w] + W_pos[0..T-1] + W_seg[s])           (sec. 3, Figure 2)
    for each of the L layers (post-LN, "Attention Is All You Need" sec. 3.1):
        Q, K, V = E W^Q + b^Q, E W^K + b^K, E W^V + b^V          (per head)
        P = softmax(Q K^T / sqrt(d_head) + mask over padded keys)
        E = LayerNorm(E + Concat_h(P V) W^O + b^O)
        E = LayerNorm(E + GELU(E W_1 + b_1) W_2 + b_2)
    sequence_output = E;  pooled_output = tanh(E[:, 0] W_p + b_p)    ([CLS])

Weights are looked up with the paths of `{v.path: value for v in backbone.weights}`:
`token_embedding/embeddings`, `transformer_layer_{i}/self_attention/query/kernel`
(shape `(H, A, H / A)`), ..., `pooled_dense/kernel`.

Convention for a query whose keys are all padding (a fully padded example):
it attends over every key, as if unmasked. Those positions carry no
information; the convention only makes the reference defined there.
"""

import math

import numpy as np

from tests.layers.numpy_reference import gelu_exact, gelu_tanh, softmax
from tests.layers.numpy_reference import normalize as layer_norm

ACTIVATIONS = {"gelu": gelu_exact, "gelu_approximate": gelu_tanh}


def weights_by_path(backbone):
    """`{path: float64 array}` for every variable of a Keras model."""
    from keras import ops

    return {v.path: np.asarray(ops.convert_to_numpy(v), dtype=np.float64) for v in backbone.weights}


def _num_layers(weights):
    indices = {
        int(path.split("/")[0][len("transformer_layer_") :])
        for path in weights
        if path.startswith("transformer_layer_")
    }
    assert indices == set(range(len(indices))), sorted(indices)
    return len(indices)


def self_attention(x, weights, prefix, padding_mask):
    """Multi-head self-attention; returns the output (B, T, H) and probabilities (B, A, T, T)."""
    w = lambda name: weights[f"{prefix}/{name}"]  # noqa: E731
    q = np.einsum("btd,dhk->bthk", x, w("query/kernel")) + w("query/bias")
    k = np.einsum("btd,dhk->bthk", x, w("key/kernel")) + w("key/bias")
    v = np.einsum("btd,dhk->bthk", x, w("value/kernel")) + w("value/bias")
    head_dim = q.shape[-1]
    logits = np.einsum("bthk,bshk->bhts", q, k) / math.sqrt(head_dim)
    keys_allowed = padding_mask.astype(bool)  # (B, S)
    # A fully padded example attends over every key (see the module docstring).
    keys_allowed = keys_allowed | ~keys_allowed.any(axis=-1, keepdims=True)
    logits = np.where(keys_allowed[:, None, None, :], logits, -np.inf)
    probabilities = softmax(logits, axis=-1)
    context = np.einsum("bhts,bshk->bthk", probabilities, v)
    output = np.einsum("bthk,hkd->btd", context, w("attention_output/kernel"))
    return output + w("attention_output/bias"), probabilities


def bert_forward(
    weights,
    token_ids,
    segment_ids=None,
    padding_mask=None,
    activation="gelu",
    layer_norm_epsilon=1e-12,
):
    """BERT's forward pass in float64 numpy.

    Args:
        weights: `{variable path: array}` of a kzoo `BertBackbone` (see `weights_by_path`).
        token_ids, segment_ids, padding_mask: integer arrays `(B, T)`; segment ids
            default to 0 and the padding mask to 1.
        activation: "gelu" (exact erf) or "gelu_approximate" (tanh).
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in BERT).

    Returns:
        A dict with `sequence_output` (B, T, H), `pooled_output` (B, H),
        `hidden_states` (L + 1 arrays) and `attention_scores` (L arrays (B, A, T, T)).
    """
    token_ids = np.asarray(token_ids)
    segment_ids = np.zeros_like(token_ids) if segment_ids is None else np.asarray(segment_ids)
    padding_mask = np.ones_like(token_ids) if padding_mask is None else np.asarray(padding_mask)
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    act = ACTIVATIONS[activation]
    norm = lambda x, name: layer_norm(  # noqa: E731
        x, w[f"{name}/gamma"], w[f"{name}/beta"], layer_norm_epsilon
    )

    length = token_ids.shape[1]
    x = (
        w["token_embedding/embeddings"][token_ids]
        + w["position_embedding/embeddings"][:length][None]
        + w["segment_embedding/embeddings"][segment_ids]
    )
    x = norm(x, "embeddings_layer_norm")

    hidden_states, attention_scores = [x], []
    for i in range(_num_layers(w)):
        prefix = f"transformer_layer_{i}"
        attended, probabilities = self_attention(x, w, f"{prefix}/self_attention", padding_mask)
        x = norm(x + attended, f"{prefix}/self_attention_layer_norm")
        ffn = f"{prefix}/feed_forward"
        inner = act(x @ w[f"{ffn}/intermediate_dense/kernel"] + w[f"{ffn}/intermediate_dense/bias"])
        x = norm(
            x + inner @ w[f"{ffn}/output_dense/kernel"] + w[f"{ffn}/output_dense/bias"],
            f"{prefix}/feed_forward_layer_norm",
        )
        hidden_states.append(x)
        attention_scores.append(probabilities)

    pooled = np.tanh(x[:, 0, :] @ w["pooled_dense/kernel"] + w["pooled_dense/bias"])
    return {
        "sequence_output": x,
        "pooled_output": pooled,
        "hidden_states": hidden_states,
        "attention_scores": attention_scores,
    }
