"""What packed inputs must satisfy, and the messages when they do not: ids
inside their embedding table (`IdsLimit`), sequences inside the position
table (`LengthLimit`). The same words on every backend, in eager calls, in
compiled steps and for whole batches (`kzoo.backend.check_batch`).
"""

from typing import NamedTuple

VOCABULARY_ADVICE = "Check that the vocabulary of the tokenizer matches the `vocabulary_size` of the model."
SEGMENT_ADVICE = (
    "Segment ids number the packed sentences from 0 (0 for the first, 1 for the second): "
    "check how the inputs were packed, or build the backbone with a larger `num_segments`."
)


class IdsLimit(NamedTuple):
    """Ids of one input must lie in `[0, size)`: the rows of an embedding table.

    Args:
        size: int. The rows of the table.
        what: str. The ids' name in the message (e.g. "`token_embedding` ids").
        advice: str. What to do, the message's last sentence.
    """

    size: int
    what: str
    advice: str = VOCABULARY_ADVICE


class LengthLimit(NamedTuple):
    """One input's last axis must be at most `max_sequence_length` long.

    Args:
        max_sequence_length: int. The rows of the position table.
        what: str. The table's (or the input's) name in the message.
    """

    max_sequence_length: int
    what: str


def ids_message(limit, low, high):
    """The message for ids from `low` to `high` outside `limit` (an `IdsLimit`)."""
    return (
        f"{limit.what} must lie in [0, {limit.size}) (the embedding table has {limit.size} "
        f"rows), but got values from {low} to {high}. {limit.advice}"
    )


def length_message(limit, first, last):
    """The message for positions `first` to `last` outside `limit` (a `LengthLimit`)."""
    return (
        f"`{limit.what}` got positions {first} to {last}, but its position table holds only "
        f"max_sequence_length={limit.max_sequence_length} positions. Truncate the inputs "
        "(`sequence_length` of the preprocessors) or build the model with a larger "
        "`max_sequence_length`."
    )


def ids_error(limit, low, high):
    """The `ValueError` for ids from `low` to `high` outside `limit`, or None inside it."""
    low, high = int(low), int(high)
    return ValueError(ids_message(limit, low, high)) if low < 0 or high >= limit.size else None
