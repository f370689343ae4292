"""KMeans task selection for few-shot fine-tuning (``sample4finetune.py``, method ``kmeans``).

1. ``X`` = every program of every task on the target device (normalised + PE features,
   flattened; no latency needed).
2. ``KMeans(n_clusters=K, random_state=0)``.
3. ``D(c, t)`` = mean over task ``t``'s programs of ``||center_c - x||``.
4. Visit clusters by descending size; each picks the not-yet-chosen task with the least ``D``.

:func:`random_tasks` is the comparison: ``K`` tasks uniformly at random.
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans


def kmeans_tasks(x: np.ndarray, tasks: np.ndarray, k: int, seed: int = 0) -> list[str]:
    """``K`` distinct tasks chosen by KMeans over program features.

    Args:
        x: program features, shape ``(R, D)`` (flattened encoded leaves).
        tasks: task name per row, shape ``(R,)``.
        k: tasks to choose (at most the number of distinct tasks).
        seed: KMeans ``random_state`` (CDMPP uses 0).
    """
    names = np.unique(tasks)
    k = min(k, len(names))
    km = KMeans(n_clusters=k, random_state=seed, n_init=10).fit(x)
    dist = np.linalg.norm(x[:, None, :] - km.cluster_centers_[None, :, :], axis=-1)  # (R, K)
    d_ct = np.stack([dist[tasks == t].mean(axis=0) for t in names], axis=1)  # (K, T)
    sizes = np.bincount(km.labels_, minlength=k)
    chosen: list[str] = []
    for c in np.argsort(-sizes, kind="stable"):
        for t in np.argsort(d_ct[c], kind="stable"):
            if names[t] not in chosen:
                chosen.append(str(names[t]))
                break
    return chosen


def random_tasks(tasks: np.ndarray, k: int, seed: int) -> list[str]:
    """``K`` distinct tasks drawn uniformly (``seed`` fixes the draw)."""
    names = np.unique(tasks)
    rng = np.random.default_rng(seed)
    return [str(t) for t in rng.choice(names, min(k, len(names)), replace=False)]
