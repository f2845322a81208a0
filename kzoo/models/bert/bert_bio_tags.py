"""Entities of BIO-tagged sentences and the entity-level F1 of CoNLL-2003 NER
(BERT sec. 5.3, Table 3).

Tags are "O" or a prefix and a type, "B-PER", "I-LOC". Entities are read
with the rules of the CoNLL `conlleval` script, which `seqeval` follows in
its default (non-strict) mode:

- "B-X" starts an entity of type X; "I-X" continues the entity before it
  if that has type X;
- an "I-X" after "O" or after another type starts a new entity (so IOB1,
  where entities start with "I-", is read correctly too);
- the IOBES prefixes are accepted as `seqeval` reads them: "S-X" is a
  one-word entity, "E-X" ends one.

An entity is `(type, start, end)` with `end` exclusive (`tags[start:end]`).
A predicted entity is correct only if a true one has the same type, start
and end; precision, recall and F1 are micro-averaged over all entities.
"""

import re

_TAG = re.compile(r"O|[BIES]-.+")


def _parse(tag):
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', '')."""
    if isinstance(tag, bytes):
        tag = tag.decode("utf-8")
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise ValueError(
            f"Bad tag {tag!r}: tags are 'O' or a prefix B-, I-, E- or S- and an entity "
            "type, e.g. 'B-PER', 'I-LOC'."
        )
    return tag[0], tag[2:]


def _ends(prev_prefix, prefix, prev_type, type_):
    """Whether an entity ends before this tag (conlleval's `endOfChunk`)."""
    return (
        prev_prefix in ("E", "S")
        or (prev_prefix in ("B", "I") and prefix in ("B", "S", "O"))
        or (prev_prefix != "O" and prev_type != type_)
    )


def _starts(prev_prefix, prefix, prev_type, type_):
    """Whether an entity starts at this tag (conlleval's `startOfChunk`)."""
    return (
        prefix in ("B", "S")
        or (prev_prefix in ("E", "S", "O") and prefix in ("E", "I"))
        or (prefix != "O" and prev_type != type_)
    )


def bio_entities(tags):
    """The entities of one tagged sentence, as CoNLL's `conlleval` reads them
    (the NER evaluation of BERT sec. 5.3).

    Args:
        tags: list of str. The tags ("O", "B-PER", "I-PER", ...).

    Returns:
        A list of `(type, start, end)` in order, `end` exclusive.

    Example:

    >>> bio_entities(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"])
    [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5), ('ORG', 5, 6)]
    """
    entities = []
    prev_prefix, prev_type, start = "O", "", 0
    for i, tag in enumerate([*tags, "O"]):  # the final "O" closes an open entity
        prefix, type_ = _parse(tag)
        if _ends(prev_prefix, prefix, prev_type, type_):
            entities.append((prev_type, start, i))
        if _starts(prev_prefix, prefix, prev_type, type_):
            start = i
        prev_prefix, prev_type = prefix, type_
    return entities


def _sentences(tag_sequences, name):
    sentences = list(tag_sequences)
    if any(isinstance(s, (str, bytes)) for s in sentences):
        raise ValueError(
            f"`{name}` must be a list of tag sequences, one per sentence, e.g. "
            "[['B-PER', 'O'], ['O']]; got a flat list of tags. Wrap one sentence in a list."
        )
    return [list(s) for s in sentences]


def entity_f1(true_tag_sequences, predicted_tag_sequences):
    """Entity-level precision, recall and F1 (CoNLL-2003 NER, BERT sec. 5.3, Table 3).

    Micro-averaged over all entities of all sentences, as `conlleval` and
    `seqeval`'s default mode: a predicted entity counts as correct only with
    the exact type, start and end of a true one. With no predicted (or true)
    entities, precision (or recall) is 0; F1 is 0 when nothing is correct.

    Args:
        true_tag_sequences: list of lists of str. The true tags, one list per sentence.
        predicted_tag_sequences: list of lists of str. The predicted tags,
            equally long sentences.

    Returns:
        `{"precision": float, "recall": float, "f1": float}`.

    Example:

    >>> true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    >>> predicted = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "O"]]
    >>> entity_f1(true, predicted)
    {'precision': 1.0, 'recall': 0.6666666666666666, 'f1': 0.8}
    """
    true = _sentences(true_tag_sequences, "true_tag_sequences")
    predicted = _sentences(predicted_tag_sequences, "predicted_tag_sequences")
    if len(true) != len(predicted):
        raise ValueError(f"Got {len(true)} true tag sequences but {len(predicted)} predicted ones.")
    true_entities, predicted_entities = set(), set()
    for i, (true_tags, predicted_tags) in enumerate(zip(true, predicted)):
        if len(true_tags) != len(predicted_tags):
            raise ValueError(
                f"Sentence {i} has {len(true_tags)} true tags but {len(predicted_tags)} "
                "predicted tags; predict one tag per word."
            )
        true_entities.update((i, *entity) for entity in bio_entities(true_tags))
        predicted_entities.update((i, *entity) for entity in bio_entities(predicted_tags))
    correct = len(true_entities & predicted_entities)
    precision = correct / len(predicted_entities) if predicted_entities else 0.0
    recall = correct / len(true_entities) if true_entities else 0.0
    f1 = 2 * precision * recall / (precision + recall) if correct else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
