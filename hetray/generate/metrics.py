"""Generation metrics: MMD of degree / clustering / spectrum histograms, and peak memory.

Glossary: ``S`` graphs in a set, ``H`` histogram bins.

MMD follows GraphRNN / GDSS ``evaluation/{stats,mmd}.py``: every graph becomes a histogram,
normalised to a PMF, and ``MMD^2 = mean k(S1, S1) + mean k(S2, S2) - 2 mean k(S1, S2)`` over
all pairs (self-pairs included, so identical sets give exactly 0). The kernel is
**Gaussian-EMD** for all three statistics: ``k(p, q) = exp(-EMD(p, q)^2 / (2 sigma^2))``, the
1-D earth mover's distance with bin spacing ``1 / distance_scaling``, computed exactly as the
L1 distance of the CDFs (no ``pyemd`` needed):

============  ==================================================  =======  ================
statistic     histogram                                           sigma    distance_scaling
============  ==================================================  =======  ================
degree        counts of each degree 0..max                        1.0      1
clustering    100 bins of the local clustering coefficient on     0.1      100
              [0, 1]
spectrum      200 bins of normalised-Laplacian eigenvalues on     1.0      1
              (-1e-5, 2)
============  ==================================================  =======  ================

:func:`gaussian_tv` (``exp(-TV^2 / (2 sigma^2))``) is provided as the alternative GDSS also
ships. Orbit counts and the orbit MMD: :mod:`hetray.generate.orbits` (written here: the ORCA
C++ counter is on no maintained PyPI package; not part of :func:`mmd_all`, so its keys stay
``{degree, clustering, spectrum}``). Validity, uniqueness and novelty:
:mod:`hetray.generate.validity`.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import scipy.sparse as sp

__all__ = ["Memory", "Statistic", "gaussian_emd", "gaussian_tv", "histograms", "mmd",
           "mmd_all", "peak_memory"]

#: Sets with a graph above this many nodes get no spectrum MMD (NaN): a dense
#: eigendecomposition per graph.
MAX_SPECTRUM_NODES = 3000


class Statistic(StrEnum):
    """Which per-graph histogram."""

    DEGREE = "degree"
    CLUSTERING = "clustering"
    SPECTRUM = "spectrum"


def _degree(adj: sp.csr_matrix) -> np.ndarray:
    return np.bincount(np.asarray(adj.sum(1)).ravel().astype(np.int64)).astype(np.float64)


def _clustering(adj: sp.csr_matrix) -> np.ndarray:
    a = sp.csr_matrix(adj, dtype=np.float64)
    triangles = np.asarray((a @ a).multiply(a).sum(1)).ravel() / 2.0
    deg = np.asarray(a.sum(1)).ravel()
    pairs = deg * (deg - 1) / 2.0
    coef = np.divide(triangles, pairs, out=np.zeros_like(triangles), where=pairs > 0)
    return np.histogram(coef, bins=100, range=(0.0, 1.0))[0].astype(np.float64)


def _spectrum(adj: sp.csr_matrix) -> np.ndarray:
    a = adj.toarray().astype(np.float64)
    deg = a.sum(1)
    inv = np.divide(1.0, np.sqrt(deg), out=np.zeros_like(deg), where=deg > 0)
    lap = np.diag((deg > 0).astype(np.float64)) - inv[:, None] * a * inv[None, :]
    eig = np.linalg.eigvalsh(lap)
    return np.histogram(eig, bins=200, range=(-1e-5, 2.0))[0].astype(np.float64)


_HISTOGRAMS: dict[Statistic, tuple[Callable[[sp.csr_matrix], np.ndarray], float, float]] = {
    Statistic.DEGREE: (_degree, 1.0, 1.0),
    Statistic.CLUSTERING: (_clustering, 0.1, 100.0),
    Statistic.SPECTRUM: (_spectrum, 1.0, 1.0),
}


def histograms(graphs: list[sp.csr_matrix], stat: Statistic) -> np.ndarray:
    """``(S, H)`` PMFs of ``stat``, zero-padded to a common length."""
    raw = [_HISTOGRAMS[stat][0](g) for g in graphs]
    width = max(len(h) for h in raw)
    out = np.zeros((len(raw), width))
    for i, h in enumerate(raw):
        out[i, :len(h)] = h / max(h.sum(), 1e-12)
    return out


def _pad(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    width = max(p.shape[1], q.shape[1])
    return (np.pad(p, ((0, 0), (0, width - p.shape[1]))),
            np.pad(q, ((0, 0), (0, width - q.shape[1]))))


def gaussian_emd(p: np.ndarray, q: np.ndarray, sigma: float = 1.0,
                 distance_scaling: float = 1.0) -> np.ndarray:
    """``(S1, S2)`` Gaussian-EMD kernel between PMF rows of ``p (S1, H)`` and ``q (S2, H')``."""
    p, q = _pad(p, q)
    emd = np.abs(np.cumsum(p, 1)[:, None, :] - np.cumsum(q, 1)[None, :, :]).sum(-1)
    return np.exp(-(emd / distance_scaling) ** 2 / (2.0 * sigma ** 2))


def gaussian_tv(p: np.ndarray, q: np.ndarray, sigma: float = 1.0) -> np.ndarray:
    """``(S1, S2)`` Gaussian total-variation kernel (GDSS ``gaussian_tv``)."""
    p, q = _pad(p, q)
    tv = np.abs(p[:, None, :] - q[None, :, :]).sum(-1) / 2.0
    return np.exp(-tv ** 2 / (2.0 * sigma ** 2))


def mmd(ref: list[sp.csr_matrix], pred: list[sp.csr_matrix], stat: Statistic) -> float:
    """Squared MMD of ``stat`` between two sets of graphs (Gaussian-EMD kernel).

    NaN (not computed) for the spectrum when a graph has more than
    :data:`MAX_SPECTRUM_NODES` nodes.
    """
    largest = max(g.shape[0] for g in (*ref, *pred))
    if stat is Statistic.SPECTRUM and largest > MAX_SPECTRUM_NODES:
        return math.nan
    _, sigma, scale = _HISTOGRAMS[stat]
    p, q = histograms(ref, stat), histograms(pred, stat)
    k = (gaussian_emd(p, p, sigma, scale).mean() + gaussian_emd(q, q, sigma, scale).mean()
         - 2.0 * gaussian_emd(p, q, sigma, scale).mean())
    return float(max(k, 0.0))


def mmd_all(ref: list[sp.csr_matrix], pred: list[sp.csr_matrix]) -> dict[str, float]:
    """``{degree, clustering, spectrum}`` squared MMDs."""
    return {s.value: mmd(ref, pred, s) for s in Statistic}


@dataclass(slots=True)
class Memory:
    """A measured phase: ``peak_bytes`` above the start, ``wall_s``, and what was measured.

    ``source``: ``rss_hwm`` (the kernel's RSS high-water mark, reset at the start),
    ``rss_poll`` (RSS polled every ``interval_s``, where the mark cannot be reset) or
    ``cuda_max_memory_allocated``.
    """

    peak_bytes: float = 0.0
    wall_s: float = 0.0
    source: str = "rss_hwm"


def _status(field: str) -> int:
    """``VmRSS`` / ``VmHWM`` of this process in bytes (``/proc/self/status``)."""
    with open("/proc/self/status", encoding="ascii") as f:
        line = next(x for x in f if x.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def _reset_high_water_mark() -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _cuda_peak(device: str, out: Memory) -> Iterator[Memory]:
    import torch

    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    yield out
    out.peak_bytes = float(torch.cuda.max_memory_allocated(device) - base)


@contextlib.contextmanager
def _polled_peak(out: Memory, interval_s: float) -> Iterator[Memory]:
    base, peak, stop = _status("VmRSS"), [_status("VmRSS")], threading.Event()

    def poll() -> None:
        while not stop.wait(interval_s):
            peak[0] = max(peak[0], _status("VmRSS"))

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join()
        out.peak_bytes = float(max(peak[0], _status("VmRSS")) - base)


@contextlib.contextmanager
def peak_memory(device: str = "cpu", interval_s: float = 0.002) -> Iterator[Memory]:
    """Measure a phase's peak memory above its start, and its wall time.

    CPU: the RSS high-water mark (exact; freed-but-resident heap pages a phase reuses are not
    new RSS, so measure in a fresh process, with ``MALLOC_MMAP_THRESHOLD_`` small, when small
    allocations matter: ``benchmarks/generate.py`` does). CUDA: the allocator's peak.
    """
    start = time.perf_counter()
    if device.startswith("cuda"):
        out = Memory(source="cuda_max_memory_allocated")
        probe = _cuda_peak(device, out)
    elif _reset_high_water_mark():
        out = Memory(source="rss_hwm")
        probe = _hwm_peak(out)
    else:
        out = Memory(source="rss_poll")
        probe = _polled_peak(out, interval_s)
    with probe:
        try:
            yield out
        finally:
            out.wall_s = time.perf_counter() - start


@contextlib.contextmanager
def _hwm_peak(out: Memory) -> Iterator[Memory]:
    base = _status("VmRSS")
    try:
        yield out
    finally:
        out.peak_bytes = float(_status("VmHWM") - base)
