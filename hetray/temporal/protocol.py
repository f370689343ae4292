"""Link-prediction evaluation protocols: hetray's own and TGN / DyGLib's, selectable.

Glossary: ``E`` events, ``N`` node ids, ``B`` events per batch, ``Q`` candidate negatives.

Both protocols cut at the 0.70 and 0.85 quantiles of the event times (``val_time``,
``test_time``; validation ``val_time < t <= test_time``, test ``t > test_time``), remove
every event touching a held-out node from training, reset memory at each epoch start and
carry it through validation into the test events. They differ in the rest:

====================  ================================  ======================================
                      ``hetray`` (the default)          ``tgn`` (TGN and DyGLib, as published)
====================  ================================  ======================================
AP and AUC            over all events of the set        per batch of ``B`` events, averaged
                                                        over the batches (the last one short)
negatives             uniform over ``[0, N)``           uniform over the distinct destinations
                                                        of the pass's data: the training events
                                                        when training, all events for
                                                        validation and test, the inductive test
                                                        events for the inductive test
evaluation draws      a new draw after every epoch      the same draw after every epoch (TGN
                      (keyed ``(seed, pass, batch)``)   resets a seeded ``RandomState``: 0 for
                                                        validation, 2 test, 3 inductive test)
held-out nodes        10 % of the nodes seen after      10 % of *all* nodes, sampled from those
                      ``val_time`` (numpy, seed 2020)   seen after ``val_time`` (Python's
                                                        ``random``, seed 2020)
inductive test set    test events touching a held-out   test events touching any node absent
                      node, scored inside the test      from the training events, streamed on
                      pass                              their own from the memory after
                                                        validation
====================  ================================  ======================================

The ``tgn`` column follows ``twitter-research/tgn`` (``utils/data_processing.py: get_data``,
``evaluation/evaluation.py: eval_edge_prediction``, ``utils/utils.py: RandEdgeSampler``,
``train_self_supervised.py``); DyGLib (``yule-BUAA/DyGLib``) evaluates the same way. Their
training negatives come from an unseeded global generator; hetray's are keyed per batch, so
a rerun draws the same ones.

Example:
    >>> import numpy as np
    >>> [batch.tolist() for batch in tgn_negatives(3, np.array([7, 8]), [2, 1], seed=0)]
    [[7, 8], [8]]
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from hetray.core.errors import TemporalDataError
from hetray.temporal.data import NEW_NODE_SHARE, EventStream, TemporalSplit, chronological_split

logger = logging.getLogger(__name__)

#: Python ``random`` seed of TGN's held-out node draw.
TGN_SPLIT_SEED = 2020


class EvalProtocol(StrEnum):
    """How link prediction is evaluated (see the module doc)."""

    HETRAY = "hetray"
    TGN = "tgn"


class NegativeSet(StrEnum):
    """The events whose distinct destinations a pass draws negatives from (``tgn``)."""

    TRAIN = "train"
    ALL = "all"
    TEST_INDUCTIVE = "test_inductive"


#: Seeds of TGN's evaluation samplers (``train_self_supervised.py``), by pass.
TGN_EVAL_SEEDS = {"validation": 0, "test": 2, "test_inductive": 3}


def tgn_split(events: EventStream, seed: int = TGN_SPLIT_SEED) -> TemporalSplit:
    """TGN's ``get_data``: the cut times, its held-out nodes and its inductive test set.

    ``int(0.1 * (distinct nodes))`` nodes are drawn with ``random.seed(seed)`` from the
    nodes seen after ``val_time`` (in the order of the same Python set TGN builds, so the
    draw is TGN's for the same ids); events touching one leave training; the inductive test
    set is the test events with an endpoint absent from the remaining training events.

    Raises:
        TemporalDataError: a split would be empty (names the cut times).

    Example:
        >>> ev = EventStream.from_arrays(src=np.arange(100) % 9, dst=np.arange(100) % 7 + 9,
        ...                              t=np.arange(100.0), source="demo")
        >>> s = tgn_split(ev)
        >>> len(s.new_nodes), bool(np.isin(s.test_inductive, s.test).all())
        (1, True)
    """
    reference = chronological_split(events)  # the cut times, and the emptiness check
    val_time = reference.val_time
    later = events.t > val_time
    seen_later = set(events.src[later].tolist()).union(set(events.dst[later].tolist()))
    num_nodes = len(set(events.src.tolist()) | set(events.dst.tolist()))
    drawn = random.Random(seed).sample(tuple(seen_later), int(NEW_NODE_SHARE * num_nodes))
    new_nodes = np.sort(np.asarray(drawn, np.int64))
    touches = np.isin(events.src, new_nodes) | np.isin(events.dst, new_nodes)
    train = np.flatnonzero((events.t <= val_time) & ~touches)
    if not len(train):
        raise TemporalDataError(events.source, 0, {"train": 0, "held_out": len(new_nodes)},
                                f"every event up to val_time {val_time!r} touches a "
                                "held-out node, so nothing is left to train on")
    unseen = np.setdiff1d(np.union1d(events.src, events.dst),
                          np.union1d(events.src[train], events.dst[train]))
    test = reference.test
    inductive = test[np.isin(events.src[test], unseen) | np.isin(events.dst[test], unseen)]
    return TemporalSplit(train=train, val=reference.val, test=test, test_inductive=inductive,
                         new_nodes=new_nodes, val_time=reference.val_time,
                         test_time=reference.test_time)


#: The split of each protocol.
SPLITS = {EvalProtocol.HETRAY: chronological_split, EvalProtocol.TGN: tgn_split}


def split_for(events: EventStream, protocol: EvalProtocol) -> TemporalSplit:
    """The chronological split ``protocol`` evaluates on."""
    return SPLITS[protocol](events)


@dataclass(frozen=True, slots=True)
class NegativePool:
    """Candidates of one kind of pass: ``sources`` and ``destinations``, int64 distinct.

    TGN's sampler draws a source index before each destination index, so the number of
    distinct sources shapes its random sequence even though only destinations are used.
    """

    sources: np.ndarray
    destinations: np.ndarray


def negative_pools(events: EventStream, split: TemporalSplit) -> dict[NegativeSet, NegativePool]:
    """The distinct sources and destinations of the training, all and inductive test events."""
    chosen = {NegativeSet.TRAIN: split.train, NegativeSet.ALL: slice(None),
              NegativeSet.TEST_INDUCTIVE: split.test_inductive}
    return {kind: NegativePool(np.unique(events.src[rows]), np.unique(events.dst[rows]))
            for kind, rows in chosen.items()}


def tgn_negatives(num_sources: int, destinations: np.ndarray, sizes: list[int],
                  seed: int) -> list[np.ndarray]:
    """TGN's seeded ``RandEdgeSampler`` draws for consecutive batches of ``sizes``.

    Args:
        num_sources: distinct sources of the sampler's data (drawn first, then discarded).
        destinations: int64 (Q,) its distinct destinations, sorted.
        sizes: events of each batch, in order.
        seed: the sampler's ``RandomState`` seed (reset before every evaluation pass).

    Returns:
        One int64 (size,) array of negative destinations per batch.
    """
    state = np.random.RandomState(seed)
    out = []
    for size in sizes:
        state.randint(0, num_sources, size)
        out.append(destinations[state.randint(0, len(destinations), size)].astype(np.int64))
    return out
