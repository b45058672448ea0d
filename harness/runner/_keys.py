"""The message key of each send in a keyed run (``keys: round-robin | random``): one definition, which the
sending worker follows (``_send.KeyedSend``) and the raw records are labelled by (``_records``).

A key is one of ``Topology.key_names`` (``k0`` .. ``k<count - 1>``), chosen per message by its sequence
number: in turn, each producer starting at its own index, or at random from a table of ``PICKS`` draws seeded
by the producer's index (so a repetition, and the raw records, have the same keys as the sender)."""

from __future__ import annotations

import numpy as np

PICKS = 1 << 16  # random draws per producer, used in turn by sequence number


def random_picks(distribution: str, count: int, producer: int) -> np.ndarray | None:
    """The key indices a producer draws at random, by ``seq % PICKS``; None for round-robin."""
    if distribution != "random":
        return None
    return np.random.default_rng(producer).integers(0, count, PICKS)


def key_indices(distribution: str, count: int, producer: int, seq: np.ndarray) -> np.ndarray:
    """The index of the key sent with each of ``seq`` by producer ``producer``."""
    picks = random_picks(distribution, count, producer)
    seq = np.asarray(seq, dtype=np.int64)
    if picks is None:
        return (seq + producer) % count
    return picks[seq & (PICKS - 1)]
