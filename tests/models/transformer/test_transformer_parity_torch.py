"""Parity with PyTorch's reference implementation of the paper's layers
(`torch.nn.TransformerEncoderLayer`, `TransformerDecoderLayer`, `Transformer`,
post-LN, ReLU, dropout 0): with the same weights kzoo's blocks and stacks give
the same outputs within 1e-5, on every Keras backend (torch is the reference
library here, imported whatever the backend).

`torch.nn.Transformer` puts a final LayerNorm after each stack (for pre-LN
models); the paper's post-LN model has none, so the test removes them and
shows that they would make a difference.
"""

import math

import numpy as np
import pytest
import torch
from keras import ops

import kzoo
from kzoo.layers import TransformerDecoderBlock, TransformerEncoderBlock
from kzoo.models.transformer.transformer import Transformer
from tests.layers.numpy_reference import randomize_weights

torch.set_num_threads(1)

HIDDEN, HEADS, FFN, EPSILON = 16, 4, 32, 1e-6
ATOL = 1e-5
SOURCE = np.array([[5, 9, 13, 21, 3, 0, 0], [11, 4, 30, 3, 0, 0, 0], [8, 17, 25, 39, 3, 6, 3]], "int32")
TARGET = np.array([[2, 14, 6, 33, 9, 12], [2, 27, 5, 10, 0, 0], [2, 7, 7, 19, 36, 4]], "int32")


def to_numpy(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float64")


def torch_layers(module, seed):
    """PyTorch's default init leaves biases 0 and LayerNorms 1/0: randomize
    every parameter so that a misplaced one shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = 0.3 * torch.randn(parameter.shape, generator=generator)
            is_norm_gain = "norm" in name and name.endswith("weight")
            parameter.copy_(1.0 + noise if is_norm_gain else noise)
    return module.train()  # dropout is 0; training mode keeps PyTorch off its fused fast path


def copy_attention(source, target):
    """torch `nn.MultiheadAttention` (packed q/k/v rows, head-major) -> kzoo's."""
    w_q, w_k, w_v = (w.detach().numpy() for w in source.in_proj_weight.chunk(3))
    b_q, b_k, b_v = (b.detach().numpy() for b in source.in_proj_bias.chunk(3))
    head_dim = HIDDEN // HEADS
    for dense, weight, bias in ((target.query_dense, w_q, b_q), (target.key_dense, w_k, b_k), (target.value_dense, w_v, b_v)):
        dense.kernel.assign(weight.T.reshape(HIDDEN, HEADS, head_dim))  # x W^T, split by head
        dense.bias.assign(bias.reshape(HEADS, head_dim))
    target.output_dense.kernel.assign(source.out_proj.weight.detach().numpy().T.reshape(HEADS, head_dim, HIDDEN))
    target.output_dense.bias.assign(source.out_proj.bias.detach().numpy())


def copy_layer_norm(source, target):
    target.gamma.assign(source.weight.detach().numpy())
    target.beta.assign(source.bias.detach().numpy())


def copy_feed_forward(source, target):
    target.intermediate_dense.kernel.assign(source.linear1.weight.detach().numpy().T)
    target.intermediate_dense.bias.assign(source.linear1.bias.detach().numpy())
    target.output_dense.kernel.assign(source.linear2.weight.detach().numpy().T)
    target.output_dense.bias.assign(source.linear2.bias.detach().numpy())


def copy_encoder_layer(source, target):
    copy_attention(source.self_attn, target.self_attention)
    copy_layer_norm(source.norm1, target.self_attention_layer_norm)
    copy_feed_forward(source, target.feed_forward)
    copy_layer_norm(source.norm2, target.feed_forward_layer_norm)


def copy_decoder_layer(source, target):
    copy_attention(source.self_attn, target.self_attention)
    copy_layer_norm(source.norm1, target.self_attention_layer_norm)
    copy_attention(source.multihead_attn, target.cross_attention)
    copy_layer_norm(source.norm2, target.cross_attention_layer_norm)
    copy_feed_forward(source, target.feed_forward)
    copy_layer_norm(source.norm3, target.feed_forward_layer_norm)


TORCH_ARGUMENTS = dict(
    dim_feedforward=FFN, dropout=0.0, activation="relu", layer_norm_eps=EPSILON,
    batch_first=True, norm_first=False,
)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(3, 6, HIDDEN)).astype("float32"),  # decoder sequence
            rng.normal(size=(3, 7, HIDDEN)).astype("float32"))  # encoder sequence / memory


def torch_tensor(x):
    return torch.from_numpy(np.asarray(x))


def causal_mask(length):
    """PyTorch's boolean convention: True where attention is not allowed."""
    return torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)


def test_encoder_block_matches_torch():
    _, x = inputs()
    reference = torch_layers(torch.nn.TransformerEncoderLayer(HIDDEN, HEADS, **TORCH_ARGUMENTS), seed=1)
    block = TransformerEncoderBlock(HEADS, FFN, dropout=0.0, layer_norm_epsilon=EPSILON)
    block.build(x.shape)
    copy_encoder_layer(reference, block)
    padding = SOURCE != 0
    with torch.no_grad():
        expected = reference(torch_tensor(x), src_key_padding_mask=torch_tensor(~padding)).numpy()
    assert np.abs(expected).max() > 1.0
    np.testing.assert_allclose(to_numpy(block(x, padding_mask=padding)), expected, atol=ATOL, rtol=0)


def test_decoder_block_matches_torch():
    y, memory = inputs()
    reference = torch_layers(torch.nn.TransformerDecoderLayer(HIDDEN, HEADS, **TORCH_ARGUMENTS), seed=2)
    block = TransformerDecoderBlock(HEADS, FFN, dropout=0.0, layer_norm_epsilon=EPSILON)
    block.build(y.shape, memory.shape)
    copy_decoder_layer(reference, block)
    source_padding, target_padding = SOURCE != 0, TARGET != 0
    with torch.no_grad():
        expected = reference(
            torch_tensor(y), torch_tensor(memory),
            tgt_mask=causal_mask(6),
            tgt_key_padding_mask=torch_tensor(~target_padding),
            memory_key_padding_mask=torch_tensor(~source_padding),
            tgt_is_causal=True,
        ).numpy()
    assert np.abs(expected).max() > 1.0
    output = block(y, memory, decoder_padding_mask=target_padding, encoder_padding_mask=source_padding)
    np.testing.assert_allclose(to_numpy(output), expected, atol=ATOL, rtol=0)


def paired_models():
    """A 2-layer kzoo.Transformer and torch.nn.Transformer with the same weights."""
    model = randomize_weights(Transformer(
        vocabulary_size=40, num_layers=2, hidden_dim=HIDDEN, intermediate_dim=FFN,
        num_heads=HEADS, dropout=0.0, layer_norm_epsilon=EPSILON, max_sequence_length=24,
    ), seed=3)
    reference = torch_layers(torch.nn.Transformer(
        HIDDEN, HEADS, num_encoder_layers=2, num_decoder_layers=2, **TORCH_ARGUMENTS
    ), seed=4)
    for source, target in zip(reference.encoder.layers, model.encoder_layers):
        copy_encoder_layer(source, target)
    for source, target in zip(reference.decoder.layers, model.decoder_layers):
        copy_decoder_layer(source, target)
    return model, reference


@pytest.fixture(scope="module")
def models():
    return paired_models()


def torch_forward(reference, model):
    """torch.nn.Transformer on kzoo's embeddings (sqrt(d_model) · E + PE), with
    the paper's padding and causal masks; returns (memory, decoder output)."""
    source_embedded = torch_tensor(to_numpy(model.embed(SOURCE, "encoder")).astype("float32"))
    target_embedded = torch_tensor(to_numpy(model.embed(TARGET, "decoder")).astype("float32"))
    masks = dict(
        src_key_padding_mask=torch_tensor(SOURCE == 0),
        memory_key_padding_mask=torch_tensor(SOURCE == 0),
        tgt_key_padding_mask=torch_tensor(TARGET == 0),
        tgt_mask=causal_mask(TARGET.shape[1]),
        tgt_is_causal=True,
    )
    with torch.no_grad():
        memory = reference.encoder(source_embedded, src_key_padding_mask=masks["src_key_padding_mask"])
        output = reference(source_embedded, target_embedded, **masks)
    return memory.numpy(), output.numpy()


def test_stack_matches_torch_transformer_without_its_final_norms(models):
    model, reference = models
    final_norms = reference.encoder.norm, reference.decoder.norm
    # With PyTorch's extra final LayerNorms the outputs differ (they must be accounted for).
    with_norms = torch_forward(reference, model)
    reference.encoder.norm = reference.decoder.norm = None  # the paper's post-LN stacks
    try:
        memory, decoder_output = torch_forward(reference, model)
    finally:
        reference.encoder.norm, reference.decoder.norm = final_norms
    assert np.abs(memory).max() > 1.0
    np.testing.assert_allclose(to_numpy(model.encode(SOURCE)), memory, atol=ATOL, rtol=0)
    assert np.abs(to_numpy(model.encode(SOURCE)) - with_norms[0]).max() > 0.1
    # kzoo's logits are the decoder output times the tied embedding matrix (sec. 3.4).
    table = to_numpy(model.token_embedding.embeddings)
    logits = to_numpy(model({"encoder_token_ids": SOURCE, "decoder_token_ids": TARGET}))
    np.testing.assert_allclose(logits, decoder_output @ table.T, atol=ATOL, rtol=0)
    assert np.abs(logits - with_norms[1] @ table.T).max() > 0.1


def test_training_steps_match_torch_adam_and_label_smoothed_cross_entropy():
    """The recipe end to end (sec. 5.3-5.4, dropout 0): `compile()`'s loss
    (label smoothing 0.1, padding ignored) and `transformer_optimizer` take,
    step by step, the losses of a plain PyTorch loop: `nn.Transformer`
    without its final norms, tied embeddings, `F.cross_entropy(label_smoothing=0.1,
    ignore_index=0)`, `torch.optim.Adam(0.9, 0.98, 1e-9)` and eq. 3 by `LambdaLR`."""
    model, reference = paired_models()
    reference.encoder.norm = reference.decoder.norm = None
    table = torch.nn.Parameter(torch_tensor(to_numpy(model.token_embedding.embeddings).astype("float32")))
    sides = (("encoder", SOURCE), ("decoder", TARGET[:, :-1]))
    positions = {side: torch_tensor(to_numpy(model.embed(ids, side)).astype("float32"))
                 - table.detach()[torch_tensor(ids).long()] * math.sqrt(HIDDEN) for side, ids in sides}
    labels = TARGET[:, 1:]
    optimizer = torch.optim.Adam([table, *reference.parameters()], lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    warmup = 3
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: HIDDEN**-0.5 * min((step + 1) ** -0.5, (step + 1) * warmup**-1.5))
    model.compile(optimizer=kzoo.transformer_optimizer(HIDDEN, warmup_steps=warmup))
    batch = {"encoder_token_ids": SOURCE, "decoder_token_ids": TARGET[:, :-1]}
    kzoo_losses, torch_losses = [], []
    for _ in range(6):
        kzoo_losses.append(float(model.train_on_batch(batch, labels, return_dict=True)["loss"]))
        source, target = (table[torch_tensor(ids).long()] * math.sqrt(HIDDEN) + positions[side] for side, ids in sides)
        output = reference(source, target, src_key_padding_mask=torch_tensor(SOURCE == 0),
                           memory_key_padding_mask=torch_tensor(SOURCE == 0),
                           tgt_key_padding_mask=torch_tensor(TARGET[:, :-1] == 0),
                           tgt_mask=causal_mask(labels.shape[1]), tgt_is_causal=True)
        loss = torch.nn.functional.cross_entropy((output @ table.T).flatten(0, 1), torch_tensor(labels).long().flatten(),
                                                 ignore_index=0, label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        torch_losses.append(loss.item())
    assert kzoo_losses[0] - kzoo_losses[-1] > 1.0  # the steps are large enough to show a wrong one
    np.testing.assert_allclose(kzoo_losses, torch_losses, rtol=1e-4)
