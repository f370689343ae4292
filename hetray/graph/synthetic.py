"""A synthetic ogbn-mag-like graph with planted labels.

Schema (node and relation proportions follow ogbn-mag; every relation has a ``rev_`` twin)::

    author --writes--> paper --cites--> paper --has_topic--> field_of_study
    author --affiliated_with--> institution

Degrees are power-law: every node draws a Pareto popularity and endpoints are drawn in
proportion to it. Every node carries a hidden class; an edge keeps its endpoints in the same
class with probability ``homophily``, so relation structure carries the label signal, while
paper features (the only features, ``D`` dims) carry a weak one.

Example:
    >>> hg = synthetic_mag(num_edges=20_000, seed=0)
    >>> sorted(hg.graph.ntypes)
    ['author', 'field_of_study', 'institution', 'paper']
    >>> 18_000 < hg.graph.num_edges() <= 20_000
    True
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from hetray.core.errors import ConfigError
from hetray.core.limits import check_limit
from hetray.graph.hetero import HeteroGraph, build_heterograph

logger = logging.getLogger(__name__)

# Nodes per (forward) edge and forward edge shares, from ogbn-mag's counts.
_NODES_PER_EDGE = {"paper": 0.0349, "author": 0.0537, "institution": 0.000414,
                   "field_of_study": 0.00284}
_EDGE_SHARE = {("paper", "cites", "paper"): 0.2566, ("author", "writes", "paper"): 0.3385,
               ("author", "affiliated_with", "institution"): 0.0495,
               ("paper", "has_topic", "field_of_study"): 0.3555}


def _endpoints(rng: np.random.Generator, classes: np.ndarray, weight: np.ndarray,
               want: np.ndarray) -> np.ndarray:
    """For each wanted class, draw a node of that class with probability ∝ its weight."""
    out = np.empty(len(want), dtype=np.int64)
    for c in np.unique(want):
        members = np.flatnonzero(classes == c)
        slots = np.flatnonzero(want == c)
        p = weight[members] / weight[members].sum()
        out[slots] = members[rng.choice(len(members), size=len(slots), p=p)]
    return out


def _relation(rng: np.random.Generator, num_edges: int, src: tuple[np.ndarray, np.ndarray],
              dst: tuple[np.ndarray, np.ndarray], homophily: float, num_classes: int,
              ) -> tuple[np.ndarray, np.ndarray]:
    src_cls, src_w = src
    dst_cls, dst_w = dst
    s = rng.choice(len(src_cls), size=num_edges, p=src_w / src_w.sum())
    keep = rng.random(num_edges) < homophily
    want = np.where(keep, src_cls[s], rng.integers(0, num_classes, num_edges))
    return s, _endpoints(rng, dst_cls, dst_w, want)


def _check_sizes(num_edges: int, num_classes: int, feature_dim: int) -> None:
    if not 10_000 <= num_edges <= 10_000_000:
        raise ConfigError("synthetic_mag", "num_edges", num_edges, "10_000 .. 10_000_000")
    if num_classes < 2:
        raise ConfigError("synthetic_mag", "num_classes", num_classes, ">= 2")
    check_limit("feature_dim", feature_dim, "synthetic_mag", "feature_dim")
    check_limit("feature_dim", num_classes, "synthetic_mag", "num_classes")


def synthetic_mag(
    *, num_edges: int, seed: int, num_classes: int = 8, feature_dim: int = 64,
    homophily: float = 0.7, feature_signal: float = 0.35,
) -> HeteroGraph:
    """Generate the graph.

    Args:
        num_edges: total edges including reverse relations, 10^4 .. 10^7.
        seed: RNG seed; same seed, same graph.
        num_classes: ``C`` planted classes of papers.
        feature_dim: ``D`` of paper features (float32).
        homophily: probability that an edge stays inside its class.
        feature_signal: scale of the class centroid in paper features (noise has scale 1).

    Returns:
        The graph; splits are a random 60/20/20 of papers.

    Raises:
        ConfigError: ``num_edges`` outside 10^4 .. 10^7, ``num_classes < 2``, or
            ``feature_dim`` / ``num_classes`` past the ``feature_dim`` limit.
    """
    _check_sizes(num_edges, num_classes, feature_dim)
    rng = np.random.default_rng(seed)
    forward = num_edges // 2
    counts = {t: max(num_classes * 2, int(f * forward)) for t, f in _NODES_PER_EDGE.items()}
    nodes = {t: (rng.permutation(np.arange(n) % num_classes), rng.pareto(1.5, n) + 1.0)
             for t, n in counts.items()}
    edges = {}
    for rel, share in _EDGE_SHARE.items():
        size = max(1, int(share / sum(_EDGE_SHARE.values()) * forward))
        s, d = _relation(rng, size, nodes[rel[0]], nodes[rel[2]],
                         homophily, num_classes)
        s_t, d_t = torch.from_numpy(s), torch.from_numpy(d)
        edges[rel] = (s_t, d_t)
        edges[(rel[2], f"rev_{rel[1]}", rel[0])] = (d_t, s_t)
    labels = nodes["paper"][0].astype(np.int64)
    centroids = rng.standard_normal((num_classes, feature_dim))
    feat = centroids[labels] * feature_signal + rng.standard_normal((counts["paper"], feature_dim))
    order = torch.from_numpy(rng.permutation(counts["paper"]))
    n_train, n_val = int(0.6 * len(order)), int(0.2 * len(order))
    logger.info("synthetic mag: %d edges, nodes %s", 2 * forward, counts)
    return HeteroGraph(
        name=f"synthetic-mag:{num_edges}", graph=build_heterograph("synthetic_mag", edges, counts),
        features={"paper": torch.from_numpy(feat.astype(np.float32))}, target_type="paper",
        labels=torch.from_numpy(labels), num_classes=num_classes,
        train_idx=order[:n_train], val_idx=order[n_train:n_train + n_val],
        test_idx=order[n_train + n_val:],
    )
