"""A synthetic event stream with planted temporal dynamics.

Nodes belong to ``C`` communities, and membership drifts: every ``drift_every`` events a
random ``drift_share`` of the nodes moves to another community, and a new random set of
``active_share * C`` communities becomes active. Each event picks a source among the
members of active communities and, with probability ``p_in``, a destination from the
source's *current* community (else any node). The edge feature is a noisy code of that
community. A model that tracks membership and recency through its memory separates true
destinations from uniform random negatives (which are recently active with probability
about ``active_share`` and share the community with probability about ``1/C``); a static
model cannot follow the drift.

Example:
    >>> ev = synthetic_events(SyntheticConfig(num_nodes=50, num_events=200))
    >>> ev.num_events, ev.num_nodes, ev.edge_feat_dim
    (200, 50, 8)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetray.core.errors import ConfigError
from hetray.temporal.data import EventStream


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntheticConfig:
    """Size and dynamics of the synthetic stream.

    Attributes:
        num_nodes: number of nodes ``N``.
        num_events: number of events ``E``.
        num_communities: number of communities ``C``.
        p_in: probability that an event stays inside the source's community.
        drift_every: events between two membership drifts.
        drift_share: share of nodes that change community at each drift.
        active_share: share of communities active between two drifts.
        edge_feat_dim: edge feature dimension ``D_e`` (noisy community code).
        seed: random seed.
    """

    num_nodes: int = 200
    num_events: int = 8_000
    num_communities: int = 40
    p_in: float = 0.98
    drift_every: int = 2_000
    drift_share: float = 0.05
    active_share: float = 1.0
    edge_feat_dim: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_nodes < self.num_communities or self.num_communities < 1:
            raise ConfigError("SyntheticConfig", "num_nodes", self.num_nodes,
                              f">= num_communities ({self.num_communities}) >= 1")
        if not 0.0 <= self.p_in <= 1.0:
            raise ConfigError("SyntheticConfig", "p_in", self.p_in, "[0, 1]")
        if self.num_events < 1 or self.drift_every < 1:
            raise ConfigError("SyntheticConfig", "num_events/drift_every",
                              (self.num_events, self.drift_every), ">= 1")


def synthetic_events(config: SyntheticConfig) -> EventStream:
    """Generate the stream described by ``config`` (deterministic in ``config.seed``)."""
    rng = np.random.default_rng(config.seed)
    num_c = config.num_communities
    community = rng.integers(0, num_c, config.num_nodes)
    codes = rng.normal(size=(num_c, config.edge_feat_dim)).astype(np.float32)
    num_active = max(1, round(config.active_share * num_c))
    src = np.empty(config.num_events, np.int64)
    dst = np.empty(config.num_events, np.int64)
    feat = np.empty((config.num_events, config.edge_feat_dim), np.float32)
    for start in range(0, config.num_events, config.drift_every):
        stop = min(start + config.drift_every, config.num_events)
        members = [np.flatnonzero(community == c) for c in range(num_c)]
        active = np.flatnonzero(np.isin(community, rng.choice(num_c, num_active, replace=False)))
        src[start:stop] = rng.choice(active, stop - start)
        for e in range(start, stop):
            group = members[community[src[e]]]
            inside = rng.random() < config.p_in and len(group) > 1
            dst[e] = rng.choice(group) if inside else rng.integers(0, config.num_nodes)
        feat[start:stop] = codes[community[src[start:stop]]]
        movers = rng.random(config.num_nodes) < config.drift_share
        community[movers] = rng.integers(0, num_c, int(movers.sum()))
    feat += 0.3 * rng.normal(size=feat.shape).astype(np.float32)
    t = np.cumsum(rng.exponential(1.0, config.num_events))
    return EventStream.from_arrays(src=src, dst=dst, t=t, edge_feat=feat, source="synthetic",
                                   num_nodes=config.num_nodes)
