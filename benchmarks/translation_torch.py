"""The PyTorch reference of `benchmarks/translation.py`: `torch.nn.Transformer`
in a plain training loop, with the paper's embeddings and its own greedy and
beam search. Written for the benchmark; it imports nothing from kzoo.

- Model: `torch.nn.Transformer(batch_first=True)`, post-LN (the paper's
  sub-layers, PyTorch's default), with the final LayerNorm PyTorch adds after
  each stack, or without it (`final_norms=False`: the paper's stacks, whose
  every sub-layer already ends in one, as kzoo's); one embedding matrix for source, target and the pre-softmax
  projection (sec. 3.4, shared vocabulary), scaled by sqrt(d_model), plus
  interleaved sinusoids (sec. 3.5). Dropout as kzoo's: on the embedding sums
  and every sub-layer output (sec. 5.4); the attention weights' and the
  feed-forward's inner dropout, which `nn.Transformer` adds, are set to 0.
- Training: label-smoothed cross-entropy (`label_smoothing=0.1`, padding
  ignored), Adam 0.9 / 0.98 / 1e-9, eq. 3's schedule counted from step 1.
- Decoding (sec. 6.1): a key/value cache over the layers' own weights, greedy
  and beam search with the rules of kzoo's `beam_search` (2k candidates, an
  end counts only within the best k, GNMT's length penalty
  ((5 + |Y|) / 6)^α with |Y| counting the end token, at most source length +
  50 tokens, a row stops once no alive hypothesis can win).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

PAD, BOS, EOS = 0, 2, 3
EXTRA_OUTPUT_LENGTH = 50  # sec. 6.1: input length + 50


def sinusoids(length, width):
    """`PE(pos, 2i) = sin(pos / 10000^(2i/d))`, `PE(pos, 2i+1) = cos(...)` (sec. 3.5)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    rate = torch.pow(10000.0, -torch.arange(0, width, 2, dtype=torch.float32) / width)
    table = torch.zeros(length, width)
    table[:, 0::2], table[:, 1::2] = torch.sin(position * rate), torch.cos(position * rate)
    return table


class Translator(nn.Module):
    """`nn.Transformer` with tied, scaled embeddings and sinusoidal positions."""

    def __init__(self, vocabulary_size, num_layers, width, heads, inner, dropout, max_length, final_norms=True):
        super().__init__()
        self.transformer = nn.Transformer(width, heads, num_layers, num_layers, inner, dropout, batch_first=True)
        if not final_norms:
            self.transformer.encoder.norm = self.transformer.decoder.norm = nn.Identity()
        for layer in [*self.transformer.encoder.layers, *self.transformer.decoder.layers]:
            layer.dropout.p = 0.0  # inside the feed-forward
            for attention in (layer.self_attn, getattr(layer, "multihead_attn", None)):
                if attention is not None:
                    attention.dropout = 0.0
        self.embedding = nn.Embedding(vocabulary_size, width)
        nn.init.normal_(self.embedding.weight, std=width**-0.5)  # unit variance after the scaling
        self.register_buffer("positions", sinusoids(max_length, width), persistent=False)
        self.embedding_dropout = nn.Dropout(dropout)
        self.heads = heads

    def embed(self, ids, start=0):
        x = self.embedding(ids) * math.sqrt(self.embedding.embedding_dim)
        return self.embedding_dropout(x + self.positions[start:start + ids.shape[1]])

    def encode(self, source):
        return self.transformer.encoder(self.embed(source), src_key_padding_mask=source == PAD)

    def forward(self, source, decoder_ids):
        memory = self.encode(source)
        length = decoder_ids.shape[1]
        future = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
        y = self.transformer.decoder(
            self.embed(decoder_ids), memory, tgt_mask=future, tgt_is_causal=True,
            tgt_key_padding_mask=decoder_ids == PAD, memory_key_padding_mask=source == PAD,
        )
        return y @ self.embedding.weight.T

    # === Decoding with a key/value cache ===

    def _project(self, attention, x, part):
        """Part 0, 1, 2 (query, key, value) of `attention`'s input projection, split in heads."""
        width = x.shape[-1]
        rows = slice(part * width, (part + 1) * width)
        y = F.linear(x, attention.in_proj_weight[rows], attention.in_proj_bias[rows])
        return y.view(x.shape[0], x.shape[1], self.heads, -1).transpose(1, 2)  # (B, h, T, d_k)

    def initial_cache(self, source):
        memory = self.encode(source)
        cache = {"memory_mask": (source != PAD)[:, None, None, :]}
        for i, layer in enumerate(self.transformer.decoder.layers):
            cache[f"cross_key_{i}"] = self._project(layer.multihead_attn, memory, 1)
            cache[f"cross_value_{i}"] = self._project(layer.multihead_attn, memory, 2)
            empty = memory.new_zeros(source.shape[0], self.heads, 0, memory.shape[-1] // self.heads)
            cache[f"key_{i}"], cache[f"value_{i}"] = empty, empty
        return cache

    def step(self, tokens, cache, index):
        """Logits `(B, V)` for position `index + 1` given `tokens` `(B,)` at `index`."""
        x = self.embed(tokens[:, None], start=index)
        for i, layer in enumerate(self.transformer.decoder.layers):
            attention = layer.self_attn
            query = self._project(attention, x, 0)
            for part, name in ((1, "key"), (2, "value")):
                cache[f"{name}_{i}"] = torch.cat([cache[f"{name}_{i}"], self._project(attention, x, part)], 2)
            out = F.scaled_dot_product_attention(query, cache[f"key_{i}"], cache[f"value_{i}"])
            x = layer.norm1(x + attention.out_proj(out.transpose(1, 2).flatten(2)))
            cross = layer.multihead_attn
            out = F.scaled_dot_product_attention(
                self._project(cross, x, 0), cache[f"cross_key_{i}"], cache[f"cross_value_{i}"],
                attn_mask=cache["memory_mask"],
            )
            x = layer.norm2(x + cross.out_proj(out.transpose(1, 2).flatten(2)))
            x = layer.norm3(x + layer.linear2(layer.activation(layer.linear1(x))))
        return self.transformer.decoder.norm(x)[:, 0] @ self.embedding.weight.T, cache


def _limits(source):
    """Each row's most output tokens (its source tokens + 50) and the buffer length."""
    max_length = source.shape[1] + EXTRA_OUTPUT_LENGTH
    return torch.clamp((source != PAD).sum(1) + EXTRA_OUTPUT_LENGTH, max=max_length), max_length


@torch.inference_mode()
def greedy_search(model, source):
    """`(B, max_length)` arg-max tokens after [BOS], the end token included, then padding."""
    limits, max_length = _limits(source)
    cache = model.initial_cache(source)
    tokens = torch.full((source.shape[0],), BOS)
    out = torch.full((source.shape[0], max_length), PAD)
    done = torch.zeros(source.shape[0], dtype=torch.bool)
    for index in range(max_length):
        logits, cache = model.step(tokens, cache, index)
        tokens = torch.where(done, PAD, logits.argmax(-1))
        out[:, index] = tokens
        done = done | (tokens == EOS) | (index + 1 >= limits)
        if done.all():
            break
    return out


def _gather(tensor, index):
    """`tensor (B, n, ...)`, `index (B, m)` → `(B, m, ...)`."""
    return tensor[torch.arange(tensor.shape[0])[:, None], index]


@torch.inference_mode()
def beam_search(model, source, beam_size=4, alpha=0.6):
    """Each row's best hypothesis after [BOS] `(B, max_length)`, as kzoo's `beam_search` ranks them."""
    limits, max_length = _limits(source)
    batch, k = source.shape[0], beam_size
    cache = {key: value.repeat_interleave(k, 0) for key, value in model.initial_cache(source).items()}
    state = {
        "tokens": torch.full((batch, k), BOS),
        "sequences": torch.full((batch, k, max_length), PAD),
        "log_p": torch.tensor([0.0] + [-math.inf] * (k - 1)).repeat(batch, 1),
        "finished": torch.full((batch, k, max_length), PAD),
        "scores": torch.full((batch, k), -math.inf),
        "flags": torch.zeros(batch, k, dtype=torch.bool),
    }
    best_penalty = ((5.0 + limits) / 6.0) ** alpha
    done = torch.zeros(batch, dtype=torch.bool)
    for index in range(max_length):
        logits, cache = model.step(state["tokens"].reshape(-1), cache, index)
        log_probs = logits.float().log_softmax(-1).view(batch, k, -1)
        vocabulary = log_probs.shape[-1]
        log_p, flat = (state["log_p"][..., None] + log_probs).view(batch, -1).topk(min(2 * k, k * vocabulary))
        parents, tokens = flat // vocabulary, flat % vocabulary
        sequences = _gather(state["sequences"], parents)
        sequences[..., index] = tokens
        ended = tokens == EOS
        finishes = ended & (torch.arange(tokens.shape[1]) < k) & (log_p > -math.inf)
        scores = torch.where(finishes, log_p / ((5.0 + index + 1) / 6.0) ** alpha, -math.inf)
        scores, best = torch.cat([state["scores"], scores], 1).topk(k)
        new = {
            "scores": scores,
            "finished": _gather(torch.cat([state["finished"], sequences], 1), best),
            "flags": _gather(torch.cat([state["flags"], finishes], 1), best),
        }
        new["log_p"], alive = torch.where(ended, -math.inf, log_p).topk(k)
        new["tokens"], new["sequences"] = _gather(tokens, alive), _gather(sequences, alive)
        state = {key: torch.where(done.view(-1, *[1] * (value.dim() - 1)), state[key], value)
                 for key, value in new.items()}
        rows = (_gather(parents, alive) + torch.arange(batch)[:, None] * k).reshape(-1)
        cache = {key: value.index_select(0, rows) for key, value in cache.items()}
        cannot_improve = state["flags"].all(1) | (state["scores"][:, 0] > state["log_p"][:, 0] / best_penalty)
        done = done | (index + 1 >= limits) | cannot_improve
        if done.all():
            break
    return torch.where(state["flags"].any(1)[:, None], state["finished"][:, 0], state["sequences"][:, 0])


def train(model, batches, hidden_dim, warmup_steps, on_step=None):
    """One pass over `batches` of `(source, decoder input, labels)` int tensors
    with the paper's recipe; `on_step(step)` after each update."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: hidden_dim**-0.5 * min((step + 1) ** -0.5, (step + 1) * warmup_steps**-1.5)
    )
    model.train()
    for step, (source, decoder_ids, labels) in enumerate(batches):
        logits = model(source, decoder_ids)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=PAD, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if on_step:
            on_step(step)


@torch.inference_mode()
def perplexity(model, batches):
    """exp of the mean unsmoothed cross-entropy over the real target tokens."""
    model.eval()
    total, count = 0.0, 0
    for source, decoder_ids, labels in batches:
        logits = model(source, decoder_ids)
        total += float(F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=PAD, reduction="sum"))
        count += int((labels != PAD).sum())
    return math.exp(total / count)


@torch.inference_mode()
def check_cache(model, source, decoder_ids, tolerance=1e-4):
    """The cached step's logits equal the full forward pass's (a self-test, run in `--smoke`)."""
    model.eval()
    full = model(source, decoder_ids)
    cache = model.initial_cache(source)
    for index in range(decoder_ids.shape[1]):
        logits, cache = model.step(decoder_ids[:, index], cache, index)
        real = decoder_ids[:, index] != PAD  # the full pass masks padding keys; the cache holds them
        difference = float((logits - full[:, index])[real].abs().max())
        if difference > tolerance:
            raise AssertionError(f"cached step {index} differs from the full pass by {difference:.1e}")
