"""kzoo.visualize on every backend: pictures are written with the expected
size, and each heatmap's cells are the model's attention weights."""

import keras
import numpy as np
import pytest
from matplotlib.image import imread

import kzoo
from kzoo.visualize import (
    TrainingCurves,
    training_curves,
    plot_attention,
    plot_bert_attention,
    plot_history,
    plot_translation_attention,
)
from tests.models.bert.task_fixtures import VOCABULARY, tiny_backbone


@pytest.fixture(scope="module")
def bert():
    keras.utils.set_random_seed(0)
    preprocessor = kzoo.BertPreprocessor(kzoo.BertTokenizer(VOCABULARY), sequence_length=16)
    return tiny_backbone(num_layers=2), preprocessor  # heat maps per layer


def test_bert_heatmaps_hold_the_models_weights_without_padding(bert, tmp_path):
    backbone, preprocessor = bert
    path = tmp_path / "attention.png"
    figure = plot_bert_attention(backbone, "the band was good", preprocessor=preprocessor, path=path)

    packed = {k: keras.ops.convert_to_numpy(v) for k, v in preprocessor(["the band was good"]).items()}
    expected = backbone(packed, return_attention_scores=True)["attention_scores"]
    maps = [axes for axes in figure.axes if axes.images]
    assert len(maps) == 2 * 2  # layers x heads
    for k, axes in enumerate(maps):  # [CLS] the band was good [SEP]: 6 of 16 positions
        cells = np.asarray(axes.images[0].get_array())
        np.testing.assert_allclose(cells, keras.ops.convert_to_numpy(expected[k // 2])[0, k % 2, :6, :6], atol=1e-6)
        np.testing.assert_allclose(cells.sum(-1), 1.0, atol=1e-5)  # each query's weights sum to 1
    labels = [t.get_text() for t in maps[-1].get_xticklabels()]
    assert labels == ["[CLS]", "the", "band", "was", "good", "[SEP]"]

    height, width, channels = imread(path).shape
    expected_width, expected_height = figure.get_size_inches() * 120  # save_figure's dpi
    assert (abs(width - expected_width) <= 2, abs(height - expected_height) <= 2, channels) == (True, True, 4)


def test_selected_layers_and_heads_and_clear_errors(bert):
    backbone, preprocessor = bert
    figure = plot_bert_attention(backbone, "a film", preprocessor=preprocessor, layers=[-1], heads=[1])
    assert [axes.get_title() for axes in figure.axes if axes.images] == ["layer 2, head 2"]
    with pytest.raises(ValueError, match="layer 5 does not exist: the model has 2 layers"):
        plot_bert_attention(backbone, "a film", preprocessor=preprocessor, layers=[5])
    with pytest.raises(ValueError, match="needs a preprocessor"):
        plot_bert_attention(backbone, "a film")
    with pytest.raises(ValueError, match="4 queries x 4 keys but 3 query and 3 key tokens"):
        plot_attention(np.full((1, 1, 4, 4), 0.25), ["a", "b", "c"])


def test_svg_and_bad_suffix(tmp_path):
    figure = plot_attention(np.full((1, 2, 3, 3), 1 / 3), ["a", "b", "c"], path=tmp_path / "map.svg")
    assert (tmp_path / "map.svg").read_text().lstrip().startswith("<?xml")
    with pytest.raises(ValueError, match=r"use a name ending in \.png, \.svg, \.pdf"):
        plot_attention(np.full((1, 2, 3, 3), 1 / 3), ["a", "b", "c"], path=tmp_path / "map.jpeg")
    assert figure is not None


def test_translation_figure_matches_cross_attention(tmp_path):
    keras.utils.set_random_seed(1)
    tokenizer = kzoo.TransformerTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b", "c", "d"])
    preprocessor = kzoo.TransformerPreprocessor(tokenizer, source_length=8, target_length=8)
    model = kzoo.Transformer(vocabulary_size=8, num_layers=2, hidden_dim=8, intermediate_dim=16,
                             num_heads=2, max_sequence_length=64)
    figure = plot_translation_attention(model, preprocessor, "a b c d", beam_size=2, path=tmp_path / "t.png")

    source = np.array([[4, 5, 6, 7, 3]])
    output = keras.ops.convert_to_numpy(model.generate(source, beam_size=2))[0]
    output = output[: list(output).index(3) + 1] if 3 in output else output[output != 0]
    decoder = np.concatenate([[2], output[:-1]])[None]
    cross = keras.ops.convert_to_numpy(model.attention_maps(source, decoder)["cross_attention"][-1])[0]
    heatmaps = [axes for axes in figure.axes if axes.images]
    assert len(heatmaps) == 2
    for head, axes in enumerate(heatmaps):
        np.testing.assert_allclose(np.asarray(axes.images[0].get_array()), cross[head], atol=1e-6)
    lines = figure.axes[0].collections
    assert len(lines) == 2  # one line collection per head
    assert imread(tmp_path / "t.png").shape[2] == 4


@pytest.mark.once  # a callback's figures from the history: the same on every backend, whose fit is tested elsewhere
def test_training_curves_during_fit_and_history(tmp_path, monkeypatch):
    saves = []
    monkeypatch.setattr(training_curves, "save_figure", lambda figure, path: saves.append(path))
    keras.utils.set_random_seed(0)
    model = kzoo.BertClassifier(tiny_backbone(), num_classes=2)
    x = {"token_ids": np.random.randint(5, len(VOCABULARY), (16, 8)), "padding_mask": np.ones((16, 8))}
    y = np.arange(16) % 2
    total_steps = 4 * 2
    model.compile(optimizer=kzoo.bert_finetuning_optimizer(total_steps, learning_rate=1e-3))
    curves = TrainingCurves(tmp_path / "curves.png")
    history = model.fit(x, y, batch_size=8, epochs=2, validation_data=(x, y), callbacks=[curves], verbose=0)
    assert len(saves) == 2  # at each epoch's end; not again at fit's end, which added nothing
    monkeypatch.undo()
    curves.on_train_batch_end(0, {key: values[-1] for key, values in curves.step_logs.items()})  # a step after
    # the last save (a fit stopped within an epoch):
    curves.on_train_end()  # drawn at the end

    assert (tmp_path / "curves.png").stat().st_size > 10_000
    assert curves.steps == [1, 2, 3, 4, 5]
    # The rate of each update (A.3): 10% warm-up (1 step: rate 0 at step 0, as google-research's
    # global_step / warmup_steps), then linear decay from 1e-3 at step 1 to 0 at step 8.
    np.testing.assert_allclose(curves.learning_rates[:4], [0.0, 1e-3, 1e-3 * 6 / 7, 1e-3 * 5 / 7], rtol=1e-6)
    titles = [axes.get_title() for axes in curves.figure().axes]
    assert titles == ["accuracy", "loss", "learning rate"]
    figure = plot_history(history, path=tmp_path / "history.png")
    assert sorted(axes.get_title() for axes in figure.axes) == ["accuracy", "loss"]
    assert len(figure.axes[0].lines) == 2  # training and validation
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_history({})


def test_validation_curves_beside_training(tmp_path):
    """Each panel's lines hold the logged values: training and validation per
    epoch in `plot_history`; in `TrainingCurves`, validation at each epoch's last step."""
    logs = {"loss": [0.9, 0.5, 0.4], "accuracy": [0.5, 0.7, 0.8], "val_loss": [1.0, 0.7, 0.75],
            "val_accuracy": [0.4, 0.6, 0.55]}
    figure = plot_history(logs, path=tmp_path / "history.png")
    for axes in figure.axes:
        lines = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in axes.lines}
        name = axes.get_title()
        assert lines == {"training": ([1, 2, 3], logs[name]), "validation": ([1, 2, 3], logs[f"val_{name}"])}
    assert imread(tmp_path / "history.png").shape[2] == 4

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    curves = TrainingCurves(tmp_path / "curves.png")
    x = np.random.rand(8, 2)
    history = model.fit(x, x.sum(-1), batch_size=4, epochs=3, validation_data=(x[:4], x[:4].sum(-1)), verbose=0,
                        callbacks=[curves])
    loss = curves.figure().axes[0]
    validation = [line for line in loss.lines if line.get_label() == "validation"][0]
    assert list(validation.get_xdata()) == [2, 4, 6]  # the step ending each epoch
    np.testing.assert_allclose(validation.get_ydata(), history.history["val_loss"], rtol=1e-6)
    assert imread(tmp_path / "curves.png").shape[2] == 4
