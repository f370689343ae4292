"""Link-prediction metrics: AP and ROC AUC over a whole set, or per batch (TGN / DyGLib).

Scikit-learn is imported when a metric is computed, so reading a report needs only numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkMetrics:
    """Average precision and ROC AUC (fractions in [0, 1]) over ``num_events`` positives."""

    ap: float
    auc: float
    num_events: int


def link_metrics(pos: np.ndarray, neg: np.ndarray) -> LinkMetrics:
    """AP and AUC of positives ``pos`` (P,) against negatives ``neg`` (P,).

    Example:
        >>> import numpy as np
        >>> link_metrics(np.array([0.9, 0.8]), np.array([0.1, 0.2])).ap
        1.0
    """
    if len(pos) == 0:
        return LinkMetrics(ap=float("nan"), auc=float("nan"), num_events=0)
    from sklearn.metrics import average_precision_score, roc_auc_score

    scores = np.concatenate([pos, neg])
    labels = np.concatenate([np.ones(len(pos)), np.zeros(len(neg))])
    return LinkMetrics(ap=float(average_precision_score(labels, scores)),
                       auc=float(roc_auc_score(labels, scores)), num_events=len(pos))


def batch_link_metrics(pos: np.ndarray, neg: np.ndarray, batch_size: int) -> LinkMetrics:
    """TGN / DyGLib: AP and AUC of each batch of ``batch_size`` events, averaged over batches.

    Args:
        pos: float (P,) positive scores in event order.
        neg: float (P,) the scores of their negatives.
        batch_size: ``B``; the last batch may be shorter (TGN counts it too).

    Example:
        >>> import numpy as np
        >>> m = batch_link_metrics(np.array([0.9, 0.2]), np.array([0.1, 0.3]), batch_size=1)
        >>> m.ap, m.auc  # batch 1 ranks right (1.0), batch 2 wrong (AP 0.5, AUC 0.0)
        (0.75, 0.5)
    """
    if len(pos) == 0:
        return link_metrics(pos, neg)
    per = [link_metrics(pos[i:i + batch_size], neg[i:i + batch_size])
           for i in range(0, len(pos), batch_size)]
    return LinkMetrics(ap=float(np.mean([m.ap for m in per])),
                       auc=float(np.mean([m.auc for m in per])), num_events=len(pos))
