"""The feature-based approach with BERT: fixed features from its hidden layers (BERT sec. 5.3, Table 7)."""

import keras
from keras import ops

from kzoo.models.bert.bert_backbone import bert_inputs
from kzoo.models.bert.bert_optimizer import default_finetuning_optimizer
from kzoo.models.bert.bert_preprocessor import BertPreprocessor
from kzoo.models.task import Task

# Table 7's rows; `hidden_states` gives every layer, stacked, for other combinations.
STRATEGIES = (
    "embeddings",
    "second_to_last_hidden",
    "last_hidden",
    "sum_last_four",
    "concat_last_four",
    "sum_all",
    "hidden_states",
)


def combine_hidden_states(hidden_states, strategy):
    """One of Table 7's feature combinations from the L + 1 hidden states
    `(batch, seq, H)` (embeddings output first) (BERT sec. 5.3).

    The paper's "weighted sum" rows are plain sums here (equal weights): no
    weights are learned in the feature-based setting.

    Example:

    >>> import numpy as np
    >>> states = [np.full((1, 2, 3), float(i), "float32") for i in range(13)]
    >>> tuple(combine_hidden_states(states, "concat_last_four").shape)
    (1, 2, 12)
    >>> float(combine_hidden_states(states, "sum_all")[0, 0, 0])  # layers 1..12
    78.0
    """
    if strategy == "embeddings":
        return hidden_states[0]
    if strategy == "second_to_last_hidden":
        return hidden_states[-2]
    if strategy == "last_hidden":
        return hidden_states[-1]
    if strategy == "sum_last_four":
        return sum(hidden_states[-4:][1:], hidden_states[-4])
    if strategy == "concat_last_four":
        return ops.concatenate(hidden_states[-4:], axis=-1)
    if strategy == "sum_all":
        return sum(hidden_states[2:], hidden_states[1])
    return ops.stack(hidden_states, axis=1)


@keras.saving.register_keras_serializable(package="kzoo")
class BertFeatureExtractor(Task):
    """Contextual token features from a pre-trained BERT (BERT sec. 5.3, Table 7).

    "Extracting fixed features from the pre-trained model" for a task model
    built on top (the paper feeds them to a two-layer BiLSTM for CoNLL-2003
    NER). `strategy` picks Table 7's combination of the hidden layers:

    | strategy                 | Table 7 row                    | features        |
    |--------------------------|--------------------------------|-----------------|
    | `embeddings`             | Embeddings                     | H               |
    | `second_to_last_hidden`  | Second-to-Last Hidden          | H               |
    | `last_hidden`            | Last Hidden                    | H               |
    | `sum_last_four`          | Weighted Sum Last Four Hidden  | H               |
    | `concat_last_four`       | Concat Last Four Hidden (best) | 4H              |
    | `sum_all`                | Weighted Sum All 12 Layers     | H               |
    | `hidden_states`          | every layer, stacked           | (L + 1, seq, H) |

    Sums have equal weights. The model is frozen (`trainable=False`) unless
    told otherwise: the feature-based approach does not fine-tune BERT.

    Args:
        backbone: `kzoo.BertBackbone`. The encoder (at least 4 layers for the
            last-four rows), kept as `self.backbone`.
        strategy: str. One of the rows above. Defaults to `"concat_last_four"`.
        preprocessor: `kzoo.BertPreprocessor`, `kzoo.BertTokenizer` or None. With
            one, `predict` takes raw text. Defaults to `None`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict. `token_ids`, `segment_ids` and `padding_mask`, each
            `(batch, sequence_length)`.

    Returns:
        float32 features `(batch, sequence_length, features)`, or
        `(batch, L + 1, sequence_length, H)` for `hidden_states`.

    Example:

    >>> from kzoo import BertBackbone, BertTokenizer
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]
    >>> backbone = BertBackbone(vocabulary_size=len(vocabulary), num_layers=4,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> extractor = BertFeatureExtractor(backbone, preprocessor=BertTokenizer(vocabulary))
    >>> extractor.predict(["hello world"], verbose=0).shape  # [CLS] hello world [SEP] + padding
    (1, 16, 32)
    """

    preprocessor_class = BertPreprocessor
    default_optimizer = default_finetuning_optimizer

    def __init__(self, backbone, strategy="concat_last_four", preprocessor=None, **kwargs):
        if strategy not in STRATEGIES:
            raise ValueError(f"Unknown strategy {strategy!r}; choose one of {list(STRATEGIES)} (BERT Table 7).")
        needed = {"sum_last_four": 4, "concat_last_four": 4, "second_to_last_hidden": 2}.get(strategy, 1)
        if backbone.num_layers < needed:
            raise ValueError(
                f"strategy={strategy!r} needs a backbone with at least {needed} layers; this one "
                f"has {backbone.num_layers}. Choose 'last_hidden' or 'hidden_states'."
            )
        inputs = bert_inputs()
        # The backbone's forward methods on the task's inputs (a functional
        # model called on symbolic inputs returns its graph's outputs only).
        embeddings = backbone.embed(inputs)
        hidden_states = backbone.encode(embeddings, inputs["padding_mask"], return_hidden_states=True)["hidden_states"]
        features = keras.layers.Activation("linear", dtype="float32", name="float32_features")(
            combine_hidden_states(hidden_states, strategy)
        )
        kwargs.setdefault("trainable", False)
        super().__init__(inputs, features, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.strategy = strategy
