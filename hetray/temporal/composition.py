"""How much of a model's error clustering the stream's composition explains.

Errors of a temporal GNN cluster in time (``hetray.temporal.volatility``). Part of that is
the stream, not the model: events between nodes the model has never or rarely seen are
much harder, and they arrive in bursts (a wave of new users). This module measures how
much of the dispersion index ``D`` those bursts account for. It is hetray's own
diagnostic, not part of the paper's VCS (whose definitions are not public either).

Definitions (``docs/vcs.md``, "What the clustering is made of"):

- **degree so far** of an event's endpoint: how many earlier events of the stream touched
  that node (an event's own source does not count for its destination);
- **composition class** of an event: the pair (``bin(src degree)``, ``bin(dst degree)``),
  ``bin(0) = 0`` (a new node), ``bin(d) = min(1 + floor(log2 d), B)``;
- **class rates**: per class, the error rate on one evaluation set (the validation pass),
  shrunk towards that set's overall rate ``p`` with ``a`` pseudo-events,
  ``(c_k + a p) / (n_k + a)``; they give each event ``e`` of another set (the test pass)
  its expected error probability ``q_e``;
- **conditional dispersion** over the same windows as ``D``: with ``c_w`` errors and
  ``n_w`` events in window ``w``, ``D_c = Var_w((c_w - sum_w q_e) / n_w) /
  mean_w(sum_w q_e (1 - q_e) / n_w^2)`` (``ddof = 1``, non-empty windows). With every
  ``q_e = p`` it is ``D`` exactly. About 1 when the errors are independent given the
  classes; ``(D - D_c) / (D - 1)`` is the share of the excess dispersion the composition
  explains.

The rates come from another pass than the one scored, so ``D_c`` cannot be lowered by
fitting the test errors themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetray.temporal.volatility import window_counts

#: Highest degree bin ``B`` (degrees of 32 and more share it).
DEGREE_BINS = 6
#: Pseudo-events ``a`` shrinking each class rate towards the overall rate.
PRIOR_EVENTS = 10.0


def degrees_so_far(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Earlier events touching each endpoint: int64 (E,) for ``src`` and ``dst`` (E,).

    Events are in stream order; a self-loop event touches its node once.
    """
    if not len(src):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    loop = src == dst
    nodes = np.stack([src, dst], axis=1).ravel()  # occurrences in stream order
    counted = np.ones(len(nodes))
    counted[1::2][loop] = 0.0  # a self-loop touches its node once
    order = np.argsort(nodes, kind="stable")
    sorted_nodes, weight = nodes[order], counted[order]
    first = np.flatnonzero(np.r_[True, sorted_nodes[1:] != sorted_nodes[:-1]])
    before = np.cumsum(weight) - weight  # counted occurrences before, over all nodes
    sizes = np.diff(np.r_[first, len(nodes)])
    earlier = np.empty(len(nodes), np.int64)
    earlier[order] = before - np.repeat(before[first], sizes)
    out_src, out_dst = earlier[0::2], earlier[1::2]
    out_dst[loop] = out_src[loop]
    return out_src, out_dst


def degree_bin(degree: np.ndarray, bins: int = DEGREE_BINS) -> np.ndarray:
    """``bin(d)`` int64 of degrees (any shape): 0 for a new node, else ``min(1 + log2 d, B)``."""
    safe = np.maximum(degree, 1)
    return np.where(degree == 0, 0, np.minimum(1 + np.floor(np.log2(safe)), bins)).astype(
        np.int64)


def composition_classes(src: np.ndarray, dst: np.ndarray,
                        bins: int = DEGREE_BINS) -> np.ndarray:
    """The composition class int64 (E,) of every event of a stream, in ``[0, (B + 1)^2)``."""
    deg_src, deg_dst = degrees_so_far(src, dst)
    return degree_bin(deg_src, bins) * (bins + 1) + degree_bin(deg_dst, bins)


def class_rates(classes: np.ndarray, errors: np.ndarray, num_classes: int,
                prior_events: float = PRIOR_EVENTS) -> np.ndarray:
    """Shrunk error rate float64 (num_classes,) per class from ``classes``, ``errors`` (n,)."""
    p = float(errors.mean())
    count = np.bincount(classes, minlength=num_classes).astype(float)
    wrong = np.bincount(classes, weights=errors, minlength=num_classes)
    return (wrong + prior_events * p) / (count + prior_events)


def conditional_dispersion(errors: np.ndarray, expected: np.ndarray,
                           bounds: np.ndarray) -> float:
    """``D_c`` of ``errors`` (n,) given per-event ``expected`` probabilities (n,).

    ``bounds`` int64 (W + 1,) cut the events into windows (``WindowSpec.bounds``).
    NaN with fewer than two non-empty windows or no expected variance.
    """
    per_window = window_counts(np.stack([errors, expected, expected * (1.0 - expected)]),
                               bounds)
    sizes = np.diff(bounds).astype(float)
    keep = sizes > 0
    if keep.sum() < 2:
        return float("nan")
    wrong, mean, var = per_window[:, keep] / sizes[keep]
    scale = float(np.mean(var / sizes[keep]))
    return float(np.var(wrong - mean, ddof=1) / scale) if scale > 0 else float("nan")


@dataclass(frozen=True, slots=True)
class CompositionWindows:
    """Per window, float64 (W,), NaN where empty: error rate, expected rate, new-node share."""

    rate: np.ndarray
    expected: np.ndarray
    new_share: np.ndarray


def _windows(errors: np.ndarray, expected: np.ndarray, new: np.ndarray,
             bounds: np.ndarray) -> CompositionWindows:
    sums = window_counts(np.stack([errors, expected, new.astype(float)]), bounds)
    sizes = np.diff(bounds).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate, mean, share = np.where(sizes > 0, sums / sizes, np.nan)
    return CompositionWindows(rate=rate, expected=mean, new_share=share)


@dataclass(frozen=True, slots=True)
class CompositionReport:
    """``D`` and ``D_c`` of one scored pass, and the share of ``D - 1`` the classes explain.

    ``explained_share`` is NaN when ``D <= 1`` (no excess to explain); ``windows`` holds
    what the figure of ``hetray eval vcs --events`` draws.
    """

    dispersion: float
    conditional_dispersion: float
    explained_share: float
    new_node_share: float
    error_rate_new: float
    error_rate_seen: float
    windows: CompositionWindows

    def to_dict(self) -> dict[str, float | None]:
        """The numbers (not the windows) as a JSON-ready dict (None for NaN)."""
        values = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "windows"}
        return {k: v if np.isfinite(v) else None for k, v in values.items()}


def composition_report(classes: np.ndarray, errors: np.ndarray, fit_classes: np.ndarray,
                       fit_errors: np.ndarray, bounds: np.ndarray,
                       bins: int = DEGREE_BINS) -> CompositionReport:
    """Compare ``D`` with ``D_c`` for a scored pass.

    Args:
        classes: the scored pass's composition classes, int64 (n,), in event order.
        errors: its hard errors, float64 (n,).
        fit_classes: another pass's classes, int64 (m,), which set the class rates.
        fit_errors: that pass's hard errors, float64 (m,).
        bounds: the windows of ``D``, int64 (W + 1,) into the scored pass.
        bins: the ``B`` the classes were made with.
    """
    num_classes = (bins + 1) ** 2
    rates = class_rates(fit_classes, fit_errors, num_classes)
    flat = np.full(len(errors), errors.mean())
    expected = rates[classes]
    plain = conditional_dispersion(errors, flat, bounds)
    given = conditional_dispersion(errors, expected, bounds)
    new = (classes // (bins + 1) == 0) | (classes % (bins + 1) == 0)
    share = (plain - given) / (plain - 1.0) if plain > 1.0 else float("nan")
    return CompositionReport(
        dispersion=plain, conditional_dispersion=given, explained_share=float(share),
        new_node_share=float(new.mean()),
        error_rate_new=float(errors[new].mean()) if new.any() else float("nan"),
        error_rate_seen=float(errors[~new].mean()) if (~new).any() else float("nan"),
        windows=_windows(errors, expected, new, bounds))
