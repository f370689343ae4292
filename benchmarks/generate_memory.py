"""Memory sections of ``benchmarks/generate.py``: peak RSS per case, and the real memory limit.

Every measurement runs in a **fresh child process** (a ``forkserver`` child that has imported
torch and hetray.generate but touched no model: ``maxtasksperchild=1``, one case per child),
for both models alike, with ``MALLOC_MMAP_THRESHOLD_=65536`` so that every allocation of 64 KiB
or more is its own mapping, returned to the OS when freed. In the child: build the data and the
model, run the phase once (torch's lazy first-call allocations), then measure the second run
with :func:`hetray.generate.metrics.peak_memory`: the kernel's RSS high-water mark
(``VmHWM``), reset through ``/proc/self/clear_refs`` at the start, minus ``VmRSS`` at the start.
Cases are interleaved (full, SBGD, full, ...) over the repeats; medians, with min and max.

:func:`limit_demo` runs one sampling call per child under a hard address-space limit
(``RLIMIT_AS`` = the child's address space at the start + a budget), so the child can never
take more than the budget: an allocation beyond it fails with ``MemoryError`` (torch raises
``RuntimeError: ... can't allocate memory``, reported as such) instead of touching memory.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import resource
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from hetray.generate.data import Dataset, DataSpec, as_graph, make_dataset, split
from hetray.generate.metrics import peak_memory
from hetray.generate.model import FullGraphModel, ModelSpec, SBGDModel
from hetray.generate.run import sample
from hetray.generate.sampler import SamplerSpec
from hetray.generate.train import TrainSpec

PRELOAD = ["torch", "numpy", "scipy.sparse", "networkx", "hetray.generate.model",
           "hetray.generate.run", "hetray.generate.metrics"]


def spec(steps: int, sampler_steps: int) -> ModelSpec:
    """The benchmark's model settings (batch 8, no corrector)."""
    return ModelSpec(train=TrainSpec(steps=steps, batch_size=8),
                     sampler=SamplerSpec(steps=sampler_steps, corrector_steps=0))


def sbm_graph(num_nodes: int, seed: int) -> Any:
    """One SBM graph of ``num_nodes`` nodes in communities of 30 (p_in 0.3, p_out 0.005)."""
    import networkx as nx

    sizes = [30] * (num_nodes // 30) + ([num_nodes % 30] if num_nodes % 30 else [])
    probs = (np.full((len(sizes),) * 2, 0.005) + np.eye(len(sizes)) * 0.295).tolist()
    return as_graph(nx.to_scipy_sparse_array(nx.stochastic_block_model(sizes, probs, seed=seed)))


def _status(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        return int(next(x for x in f if x.startswith(field + ":")).split()[1]) * 1024


#: The quality section's two settings: name -> SBM blocks and generator seed.
QUALITY = {"quality": ((4, 5), 1), "quality_2_3_blocks": ((2, 3), 0)}


def _model_and_data(kind: str, setting: str) -> tuple[Any, Any, list[int]]:
    """``(model, training tensors, sizes to sample)`` of a case.

    ``setting``: a key of :data:`QUALITY` (exactly that quality setting: batch 8, all its
    test sizes) or a node count (one SBM graph of that size, batch = all of it).
    """
    model = SBGDModel(spec(1, 1)) if kind == "sbgd" else FullGraphModel(spec(1, 1))
    if setting in QUALITY:
        blocks, seed = QUALITY[setting]
        train, test = split(make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=60,
                                                  blocks=blocks, seed=seed)))
        return model, model.tensors(train), [g.shape[0] for g in test]
    data = model.tensors([sbm_graph(int(setting), 0)])
    model.trainer.spec = TrainSpec(steps=1, batch_size=len(data))
    return model, data, [int(setting)]


def measure_child(kind: str, phase: str, setting: str) -> dict[str, float]:
    """(In a fresh child) peak RSS of one training step or one sampling call.

    SBGD samples one chunk of ``C`` blocks (one sampler worker's peak); the full model samples
    every requested graph together, as the quality section does.
    """
    torch.set_num_threads(1)
    model, data, sizes = _model_and_data(kind, setting)
    if phase == "train":
        model.trainer.step(data.take(torch.tensor([0])))  # warm-up
        with peak_memory() as mem:
            model.trainer.step(data)
    elif kind == "sbgd":
        model.sample_chunk([8], 0, 0)
        with peak_memory() as mem:
            model.sample_chunk(model.plan(sizes[0], 0)[:model.spec.chunk], 0, 0)
    else:
        model.sample([8], 0)
        with peak_memory() as mem:
            model.sample(sizes, 0)
    return {"peak_bytes": mem.peak_bytes, "source": mem.source}


def _pool_map(fn: Callable[..., Any], cases: list[tuple[Any, ...]]) -> list[Any]:
    """``fn(*case)`` for every case, each in its own fresh forkserver child."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        return [pool.apply(fn, case) for case in cases]


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def memory(quick: bool) -> dict[str, Any]:
    """Peak memory of both models per phase and ``N``: fresh child per case, interleaved."""
    import psutil

    sizes = (128, 256) if quick else (256, 512, 1024)
    quality_repeats, size_repeats = (1, 1) if quick else (3, 2)
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"  # read by every child's glibc at start
    settings = [*QUALITY, *map(str, sizes)]
    cases = [(kind, phase, name) for r in range(max(quality_repeats, size_repeats))
             for name in settings if r < (quality_repeats if name in QUALITY else size_repeats)
             for phase in ("train", "sample") for kind in ("full", "sbgd")]
    rows: dict[str, dict[str, dict[str, list[float]]]] = {}
    for (kind, phase, name), got in zip(cases, _pool_map(measure_child, cases), strict=True):
        rows.setdefault(phase, {}).setdefault(kind, {}).setdefault(name, []).append(
            got["peak_bytes"])
    spread = {p: {k: {n: _spread(v) for n, v in by.items()} for k, by in kinds.items()}
              for p, kinds in rows.items()}
    med = {p: {k: {n: s["median"] for n, s in by.items()} for k, by in kinds.items()}
           for p, kinds in spread.items()}
    top = str(sizes[-1])
    ratio = {p: med[p]["full"][top] / max(med[p]["sbgd"][top], 1.0) for p in med}
    at_quality = {name: {p: med[p]["full"][name] / max(med[p]["sbgd"][name], 1.0) for p in med}
                  for name in QUALITY}
    worst = {p: min(rows[p]["full"]["quality"]) / max(rows[p]["sbgd"]["quality"])
             for p in rows}
    available = psutil.virtual_memory().available
    fits = {p: _fit_quadratic(sizes, [med[p]["full"][str(n)] for n in sizes]) for p in med}
    full_max = {p: int(math.sqrt(max(available - a, 0.0) / b)) for p, (a, b) in fits.items()}
    return {"peak_bytes": med, "peak_bytes_spread": spread, "memory_ratio": ratio,
            "at_num_nodes": sizes[-1], "memory_ratio_at_quality": at_quality["quality"],
            "memory_ratio_at_quality_2_3_blocks": at_quality["quality_2_3_blocks"],
            "memory_ratio_at_quality_worst_pair": worst, "available_bytes": available,
            "full_fit_bytes": {p: {"a": a, "b_per_node_squared": b} for p, (a, b) in fits.items()},
            "full_max_nodes": full_max,
            "repeats": {"quality": quality_repeats, "sizes": size_repeats},
            "method": "fresh forkserver child per case; VmHWM after clear_refs minus VmRSS"}


def _fit_quadratic(sizes: tuple[int, ...], peaks: list[float]) -> tuple[float, float]:
    """Least squares ``peak = a + b N^2`` (``b`` at least 1 byte)."""
    design = np.stack([np.ones(len(sizes)), np.array(sizes, dtype=float) ** 2], axis=1)
    a, b = np.linalg.lstsq(design, np.array(peaks), rcond=None)[0]
    return float(a), float(max(b, 1.0))


def limited_child(kind: str, num_nodes: int, budget: int) -> dict[str, Any]:
    """(In a fresh child) sample one ``num_nodes`` graph with at most ``budget`` more bytes."""
    torch.set_num_threads(1)
    graphs = make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=8, blocks=(2, 3)))
    model = SBGDModel(spec(2, 20)) if kind == "sbgd" else FullGraphModel(spec(2, 20))
    model.fit(graphs)
    start = _status("VmSize")
    resource.setrlimit(resource.RLIMIT_AS, (start + budget, start + budget))
    out: dict[str, Any] = {"kind": kind, "num_nodes": num_nodes, "budget_bytes": budget,
                           "address_space_limit_bytes": start + budget}
    try:
        graph = sample(model, [num_nodes], seed=0, num_workers=1)[0]
        out.update(ok=True, num_edges=int(graph.nnz // 2))
    except (MemoryError, RuntimeError) as err:  # torch: "can't allocate memory"
        out.update(ok=False, error=f"{type(err).__name__}: {str(err)[:160]}")
    out["peak_rss_bytes"] = float(_status("VmHWM"))
    return out


def limit_demo(cases: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """:func:`limited_child` for every ``(kind, num_nodes, budget)``, a fresh child each."""
    return _pool_map(limited_child, cases)
