"""examples/transformer_translation.py refuses checkpoint averaging and head
counts it cannot run, in its own words, before reading the corpus."""

import os
import sys

import pytest

pytestmark = pytest.mark.backend_independent  # argument checks: run once (conftest.py)

_EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, _EXAMPLES)  # it imports example_runs and translation_data by name, as it runs
try:
    import transformer_translation
finally:
    sys.path.remove(_EXAMPLES)


def test_checkpoint_interval_defaults_to_a_twentieth_and_counts_the_last_step():
    assert transformer_translation.checkpoint_interval(1500, 0, 5) == 75  # the last 5: steps 1200-1500
    assert transformer_translation.checkpoint_interval(10, 4, 3) == 4  # steps 4, 8 and the last, 10
    with pytest.raises(ValueError, match="between 1 and the 3 checkpoints that 10 training steps write"):
        transformer_translation.checkpoint_interval(10, 4, 4)
    with pytest.raises(ValueError, match="--average-last 0 must be between 1"):
        transformer_translation.checkpoint_interval(1500, 0, 0)
    with pytest.raises(ValueError, match="--checkpoint-every -2 must be a positive number"):
        transformer_translation.checkpoint_interval(1500, -2, 5)


@pytest.mark.parametrize("arguments, message", [
    (["--average-last", "21"], "--average-last 21 must be between 1 and the 20 checkpoints"),
    (["--hidden-dim", "256", "--num-heads", "6"], "hidden_dim=256 is not divisible by num_heads=6"),
])
def test_bad_arguments_stop_before_any_work(arguments, message, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["transformer_translation.py", *arguments])
    with pytest.raises(SystemExit) as exit_info:
        transformer_translation.parse_args()
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
