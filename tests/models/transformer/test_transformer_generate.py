"""Transformer.generate (sec. 6.1): a tiny Transformer learns to copy and to
reverse random token sequences, and greedy and beam search decode held-out
sequences exactly, ending with padding well before the maximum length; beam
search with one beam is greedy search on the model.

One model learns both tasks: the source starts with a task token. It trains
with the paper's recipe (label-smoothed loss ε_ls = 0.1, Adam β = (0.9, 0.98),
ε = 1e-9, eq. 3's schedule) with the warm-up shortened to 50 steps and the
rate scaled by 0.25, since 200 steps replace the paper's 100,000.
"""

import keras
import numpy as np
import pytest
from keras import ops

from kzoo.models.transformer.beam_search import beam_search
from kzoo.models.transformer.transformer import Transformer
from kzoo.models.transformer.transformer_optimizer import transformer_optimizer

PAD, START, END = 0, 2, 3  # the Transformer's id convention
COPY, REVERSE = 4, 5  # task tokens
FIRST_TOKEN, VOCAB = 6, 16  # content tokens 6..15
MIN_LENGTH, MAX_LENGTH = 3, 6
STEPS, BATCH_SIZE = 200, 256


def task_examples(rng, count, min_length=MIN_LENGTH, max_length=MAX_LENGTH):
    """Sources `[task, x..., END, PAD...]`, decoder inputs `[START, y...]` and
    labels `[y..., END]`, with y = x (copy) or x reversed. The tokens of x are
    distinct: a tiny model that has seen repeats too rarely in 200 steps
    confuses their order."""
    width = max_length + 2
    sources, decoder_inputs, labels = (np.full((count, width), PAD, "int32") for _ in range(3))
    for row in range(count):
        task = rng.choice([COPY, REVERSE])
        tokens = rng.choice(np.arange(FIRST_TOKEN, VOCAB), rng.integers(min_length, max_length + 1), replace=False)
        target = tokens if task == COPY else tokens[::-1]
        sources[row, : len(tokens) + 2] = [task, *tokens, END]
        decoder_inputs[row, : len(target) + 1] = [START, *target]
        labels[row, : len(target) + 1] = [*target, END]
    return sources, decoder_inputs, labels


@pytest.fixture(scope="module")
def trained():
    keras.utils.set_random_seed(0)
    held_out = task_examples(np.random.default_rng(1), 100)
    # Short sequences recur among 51,200 random ones: keep the held-out ones out.
    sources, decoder_inputs, labels = task_examples(np.random.default_rng(0), STEPS * BATCH_SIZE + 2000)
    unseen = {tuple(row) for row in held_out[0]}
    train = np.array([tuple(row) not in unseen for row in sources])
    assert train.sum() >= STEPS * BATCH_SIZE
    sources, decoder_inputs, labels = (x[train][: STEPS * BATCH_SIZE] for x in (sources, decoder_inputs, labels))
    model = Transformer(
        vocabulary_size=VOCAB, num_layers=1, hidden_dim=64, intermediate_dim=128, num_heads=4,
        dropout=0.0, max_sequence_length=64,
    )
    model.compile(optimizer=transformer_optimizer(64, warmup_steps=50, scale=0.25))
    model.fit(
        {"encoder_token_ids": sources, "decoder_token_ids": decoder_inputs}, labels,
        batch_size=BATCH_SIZE, verbose=0,
    )
    return model, held_out


@pytest.mark.once  # trains to a stated accuracy: one backend per run (tests/conftest.py)
def test_learns_to_copy_and_reverse_with_greedy_and_beam_search(trained):
    """Held-out sequences decode exactly with greedy search (`beam_size=1`)
    and beam search (4 beams, α = 0.6); longer sequences than the model
    learned (rows that end at different steps, or not at all) check that beam
    search with one beam is greedy search on the model."""
    model, (held_out, _, labels) = trained
    longer, _, _ = task_examples(np.random.default_rng(2), 16, MAX_LENGTH + 1, VOCAB - FIRST_TOKEN)
    width = longer.shape[1]
    sources = np.concatenate([np.pad(held_out, ((0, 0), (0, width - held_out.shape[1]))), longer])
    # A maximum length of 16 rather than the default source length + 50
    # (sec. 6.1): rows that never end run the loop that long.
    greedy = ops.convert_to_numpy(model.generate(sources, beam_size=1, max_length=16))
    beam = ops.convert_to_numpy(model.generate(sources, beam_size=4, max_length=16))
    assert greedy.shape == beam.shape == (len(sources), 16)
    is_copy = held_out[:, 0] == COPY
    assert 30 <= is_copy.sum() <= 70
    for tokens in (greedy[: len(held_out)], beam[: len(held_out)]):
        # Every held-out row ended within the label width, then padding.
        assert (tokens[:, labels.shape[1] :] == PAD).all()
        exact = (tokens[:, : labels.shape[1]] == labels).all(axis=1)
        assert exact[is_copy].mean() >= 0.99 and exact[~is_copy].mean() >= 0.99, exact.mean()

    one_beam = beam_search(
        model.next_token_logits, model.initial_cache(sources, 16),
        np.full((len(sources),), START, "int32"), end_id=END, max_length=16, beam_size=1,
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(one_beam), greedy)
    ends = {int(np.argmax(row == END)) if END in row else None for row in greedy}
    assert len(ends) >= 3  # the rows end at different steps (the longer ones maybe not at all)
