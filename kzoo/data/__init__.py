"""Data preparation on tf.data / tensorflow-text, feeding models on any backend."""

from kzoo.data.wordpiece_vocabulary import learn_wordpiece_vocabulary

__all__ = ["learn_wordpiece_vocabulary"]
