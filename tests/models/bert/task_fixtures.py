"""Tiny vocabularies, backbones and synthetic labelled text for the BERT task-model tests (BERT sec. 4)."""

import os

import keras
import numpy as np

import kzoo

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FILLERS = [
    "the", "a", "film", "plot", "actor", "scene", "music", "story", "ending", "cast",
    "was", "is", "really", "quite", "very", "this", "that", "and", "with", "some",
]
TOPICS = {
    "music": ["song", "band", "guitar"],
    "sport": ["goal", "team", "match"],
    "food": ["bread", "soup", "cheese"],
}
VOCABULARY = SPECIAL + FILLERS + [w for words in TOPICS.values() for w in words] + ["good", "bad", "##s"]


def tiny_backbone(vocabulary_size=len(VOCABULARY), num_layers=1, hidden_dim=32, max_sequence_length=32):
    return kzoo.BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=hidden_dim,
        intermediate_dim=2 * hidden_dim,
        max_sequence_length=max_sequence_length,
    )


def pretrained_preset(directory, vocabulary=VOCABULARY, **backbone_kwargs):
    """A preset directory as `kzoo.BertPretrainer.save_to_preset` writes it: a
    (randomly initialised) backbone and its tokenizer, no task head."""
    keras.utils.set_random_seed(0)
    tokenizer = kzoo.BertTokenizer(vocabulary)
    backbone = tiny_backbone(vocabulary_size=len(vocabulary), **backbone_kwargs)
    path = os.path.join(str(directory), "pretrained")
    kzoo.BertPretrainer(backbone, tokenizer=tokenizer).save_to_preset(path)
    return path


def topic_sentences(n, seed):
    """Sentences of 3-6 filler words with 1-2 words of one topic at random
    places (some plural: "song" + "##s"); the label is the topic (3 classes,
    9 keywords: no single word decides)."""
    rng = np.random.default_rng(seed)
    names = list(TOPICS)
    texts, labels = [], []
    for _ in range(n):
        label = int(rng.integers(len(names)))
        words = list(rng.choice(FILLERS, size=rng.integers(3, 7)))
        for keyword in rng.choice(TOPICS[names[label]], size=rng.integers(1, 3)):
            words.insert(int(rng.integers(len(words) + 1)), keyword + ("s" if rng.random() < 0.3 else ""))
        texts.append(" ".join(words))
        labels.append(label)
    return texts, np.array(labels)


def good_counts(n, seed):
    """Sentences with 0-3 "good" among fillers; the target is count / 3 (a regression, sec. 4.1 STS-B style)."""
    rng = np.random.default_rng(seed)
    texts, targets = [], []
    for _ in range(n):
        words = list(rng.choice(FILLERS, size=rng.integers(3, 6)))
        count = int(rng.integers(4))
        for _ in range(count):
            words.insert(int(rng.integers(len(words) + 1)), "good")
        texts.append(" ".join(words))
        targets.append(count / 3)
    return texts, np.array(targets, "float32")


def assert_preset_round_trip(model, x, directory):
    """save_to_preset -> from_preset gives the same class and identical predictions."""
    path = os.path.join(str(directory), "saved_task")
    model.save_to_preset(path)
    restored = type(model).from_preset(path)
    assert type(restored) is type(model)
    expected = model.predict(x, verbose=0)
    actual = restored.predict(x, verbose=0)
    for e, a in zip(keras.tree.flatten(expected), keras.tree.flatten(actual)):
        np.testing.assert_allclose(a, e, atol=1e-6, rtol=0)
    return restored


def choice_examples(n, seed, num_choices=4):
    """SWAG-shaped examples (sec. 4.4): a context and `num_choices` endings of
    filler words; the right ending (at a random index) is the only one holding a
    word of the context's topic."""
    rng = np.random.default_rng(seed)
    names = list(TOPICS)
    contexts, choices, labels = [], [], []
    for _ in range(n):
        topic = TOPICS[names[int(rng.integers(len(names)))]]
        contexts.append(" ".join([*rng.choice(FILLERS, 3), str(rng.choice(topic))]))
        right = int(rng.integers(num_choices))
        endings = []
        for i in range(num_choices):
            words = list(rng.choice(FILLERS, 3))
            if i == right:
                words.insert(int(rng.integers(4)), str(rng.choice(topic)))
            endings.append(" ".join(words))
        choices.append(endings)
        labels.append(right)
    return (contexts, choices), np.array(labels)
