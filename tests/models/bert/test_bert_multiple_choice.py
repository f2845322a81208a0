"""kzoo.BertMultipleChoice (BERT sec. 4.4, SWAG): packing, learning, presets, errors."""

import keras
import numpy as np
import pytest

import kzoo
from tests.test_case import run_task_test
from tests.models.bert.task_fixtures import (
    VOCABULARY,
    assert_preset_round_trip,
    choice_examples,
    pretrained_preset,
    tiny_backbone,
)


def test_preprocessor_packs_the_context_with_each_choice():
    preprocessor = kzoo.BertMultipleChoicePreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=7)
    packed, labels = preprocessor((["the song"], [["was good", "a goal"]]), np.array([1]))
    song, was, good, a, goal = (VOCABULARY.index(w) for w in ("song", "was", "good", "a", "goal"))
    the = VOCABULARY.index("the")
    assert packed["token_ids"].numpy().tolist() == [
        [[2, the, song, 3, was, good, 3], [2, the, song, 3, a, goal, 3]]
    ]
    assert packed["segment_ids"].numpy().tolist() == [[[0, 0, 0, 0, 1, 1, 1]] * 2]
    assert labels.tolist() == [1]


@pytest.mark.once  # trains to a stated accuracy: one backend per run (tests/conftest.py)
def test_from_pretrained_preset_learns_to_choose_and_round_trips(tmp_path):
    """One score per choice's [CLS], softmax over 4 choices: >= 95% held out."""
    preset = pretrained_preset(tmp_path, hidden_dim=64)
    keras.utils.set_random_seed(1)
    model = kzoo.BertMultipleChoice.from_preset(preset, num_choices=4)
    model.preprocessor.sequence_length = 12
    x, y = choice_examples(192, seed=0)
    x_test, y_test = choice_examples(100, seed=1)
    model.compile(optimizer=kzoo.bert_finetuning_optimizer(total_steps=60, learning_rate=1e-3))
    model.fit(x, y, epochs=10, batch_size=32, verbose=0)
    results = model.evaluate(x_test, y_test, verbose=0, return_dict=True)
    assert results["accuracy"] >= 0.95, results
    assert model.predict(x_test, verbose=0).shape == (100, 4)
    assert_preset_round_trip(model, (x_test[0][:8], x_test[1][:8]), tmp_path)


def test_choices_are_scored_independently():
    """Each choice is encoded on its own: permuting the choices permutes the logits."""
    model = kzoo.BertMultipleChoice(
        tiny_backbone(), num_choices=3,
        preprocessor=kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), 10),
    )
    contexts, choices = ["the song"], [["was good", "a goal", "some bread"]]
    logits = model.predict((contexts, choices), verbose=0)
    permuted = model.predict((contexts, [[choices[0][2], choices[0][0], choices[0][1]]]), verbose=0)
    np.testing.assert_allclose(permuted[0], logits[0][[2, 0, 1]], atol=1e-5)
    # The last layer runs at [CLS] only: the whole encoder's scores within 1e-6.
    packed = {name: np.asarray(ids)[0] for name, ids in model.preprocessor((contexts, choices)).items()}
    full = model.choice_score(model.backbone(packed)["pooled_output"])  # (3 choices, 1)
    np.testing.assert_allclose(logits[0], keras.ops.convert_to_numpy(full)[:, 0], atol=1e-6)


def test_task(tmp_path):
    model = kzoo.BertMultipleChoice(tiny_backbone(), num_choices=3, dropout=0.2,
                                    preprocessor=kzoo.BertTokenizer(VOCABULARY))
    x = (["the song", "a team"], [["was good", "a goal", "some bread"], ["a goal", "was good", "the song"]])
    # The score's bias is added to every choice's logit: the softmax over choices cancels it.
    run_task_test(model, x, np.array([0, 1]), (2, 3), tmp_path, gradient_free=("choice_score/bias",))


def test_errors():
    model = kzoo.BertMultipleChoice(tiny_backbone(), num_choices=4, dropout=0.2)
    with pytest.raises(ValueError, match="num_choices must be an int >= 2"):
        kzoo.BertMultipleChoice(tiny_backbone(), num_choices=1)
    preprocessor = kzoo.BertMultipleChoicePreprocessor(kzoo.BertTokenizer(VOCABULARY), 8)
    with pytest.raises(ValueError, match=r"x = \(contexts, choices\)"):
        preprocessor(["the song"])
    with pytest.raises(ValueError, match=r"choices of shape\s+\(batch, num_choices\)"):
        preprocessor((["the song"], ["was good"]))
    model = kzoo.BertMultipleChoice(tiny_backbone(), num_choices=2, preprocessor=preprocessor)
    with pytest.raises(ValueError, match=r"labels must be integers in \[0, 1\]"):
        model.fit((["a song"], [["x", "y"]]), np.array([2]), verbose=0)
