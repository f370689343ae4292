"""Full-graph score diffusion vs SBGD block diffusion: memory, quality, size generalisation, study.

Writes ``benchmarks/results/generate.json`` and ``docs/plots/generate_*.png``. Usage::

    python benchmarks/generate.py                      # ~10-14 min on 2 shared cores
    python benchmarks/generate.py --quick --out /tmp/generate.json   # ~2 min smoke run

Sections:

* **quality** (``mmd.full``, ``mmd.sbgd``, ``size_generalisation.full`` / ``.sbgd``): both
  models train on the same 2-3-block SBM graphs (20-40 nodes per block, p_in 0.3, p_out 0.005)
  and sample one graph per held-out graph's size; ``mmd`` is against held-out 2-3-block
  graphs, ``size_generalisation`` against fresh 4-5-block graphs (never seen sizes). Squared
  MMDs with the Gaussian-EMD kernel (:mod:`hetray.generate.metrics`).
* **memory** (``memory_ratio``, ``memory_ratio_at_quality``, ``memory``): peak RSS (the
  kernel's high-water mark, :func:`hetray.generate.metrics.peak_memory`) of one training
  step and one sampling step, after a warm-up call, in a fresh spawned process per repeat
  with ``MALLOC_MMAP_THRESHOLD_=65536`` (freed memory goes back to the OS, so cases measured
  in turn do not hide each other). At each ``N`` the full model holds the whole ``N x N``
  graph; SBGD trains on the blocks of the same graph (batch = its blocks) and samples ``C``
  blocks at a time (one sampler worker's peak). ``memory_ratio_at_quality`` is the quality
  section's own setting (batch 8 graphs vs 8 blocks; all test graphs sampled together vs one
  chunk). Medians of 2 repeats. ``memory_ratio`` is at the largest ``N``; the full model's
  ``a + b N^2`` fit projects ``full_max_nodes`` (where it would exceed the memory available
  at the start), and SBGD then generates a graph of twice that size (``large_graph``) on 2
  Ray block samplers.
* **study**: ``hetray generate study`` with one Ray task per cell; summary numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hetray.generate.data import Dataset, DataSpec, as_graph, make_dataset, split
from hetray.generate.metrics import mmd_all, peak_memory
from hetray.generate.model import FullGraphModel, ModelSpec, SBGDModel
from hetray.generate.run import sample
from hetray.generate.sampler import SamplerSpec
from hetray.generate.study_run import StudyConfig, run_study
from hetray.generate.train import TrainSpec

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results" / "generate.json"
PLOTS = REPO / "docs" / "plots"
logger = logging.getLogger("benchmarks.generate")
# Ray, matplotlib and psutil are imported inside the sections: the memory section's spawned
# children import this module, and each should load only torch and hetray.generate.


def _spec(steps: int, sampler_steps: int) -> ModelSpec:
    return ModelSpec(train=TrainSpec(steps=steps, batch_size=8),
                     sampler=SamplerSpec(steps=sampler_steps, corrector_steps=0))


def quality(quick: bool) -> dict[str, Any]:
    """Train both models on 2-3-block SBM; MMDs in distribution and on 4-5-block graphs."""
    from hetray.experiments.generate import write_sample_figure

    graphs = make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=20 if quick else 60,
                                   blocks=(2, 3)))
    train, test = split(graphs)
    unseen = make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=6 if quick else 12,
                                   blocks=(4, 5), seed=1))
    spec = _spec(60 if quick else 600, 30 if quick else 100)
    out: dict[str, Any] = {"mmd": {}, "size_generalisation": {}, "train_s": {}, "sample_s": {},
                           "num_train": len(train), "num_test": len(test),
                           "num_unseen": len(unseen)}
    samples = {}
    for name, cls in (("sbgd", SBGDModel), ("full", FullGraphModel)):
        model = cls(spec)
        start = time.perf_counter()
        model.fit(train)
        out["train_s"][name] = time.perf_counter() - start
        start = time.perf_counter()
        seen = sample(model, [g.shape[0] for g in test], seed=11)
        new = sample(model, [g.shape[0] for g in unseen], seed=12)
        out["sample_s"][name] = time.perf_counter() - start
        out["mmd"][name] = mmd_all(test, seen)
        out["size_generalisation"][name] = mmd_all(unseen, new)
        samples[name] = new
        logger.info("%s: mmd %s, unseen %s", name, out["mmd"][name],
                    out["size_generalisation"][name])
    write_sample_figure({"real (4-5 blocks)": unseen, "SBGD": samples["sbgd"],
                         "full-graph": samples["full"]}, PLOTS / "generate_samples.png")
    return out


def _sbm_graph(num_nodes: int, seed: int) -> Any:
    """One SBM graph of ``num_nodes`` nodes in communities of 30 (p_in 0.3, p_out 0.005)."""
    import networkx as nx

    sizes = [30] * (num_nodes // 30) + ([num_nodes % 30] if num_nodes % 30 else [])
    probs = (np.full((len(sizes),) * 2, 0.005) + np.eye(len(sizes)) * 0.295).tolist()
    return as_graph(nx.to_scipy_sparse_array(nx.stochastic_block_model(sizes, probs, seed=seed)))


def _quality_child(kind: str, phase: str) -> dict[str, float]:
    """Peak RSS of one step exactly as the quality section runs it (batch 8; all test sizes)."""
    train, test = split(make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=60,
                                              blocks=(2, 3))))
    model = SBGDModel(_spec(1, 1)) if kind == "sbgd" else FullGraphModel(_spec(1, 1))
    data = model.tensors(train)
    sizes = [g.shape[0] for g in test]
    if phase == "train":
        model.trainer.step(data.take(torch.tensor([0])))
        with peak_memory() as mem:
            model.trainer.step(data)
    elif kind == "sbgd":  # one chunk per sampler worker at a time
        model.sample_chunk([8], 0, 0)
        with peak_memory() as mem:
            model.sample_chunk(model.plan(sizes[0], 0)[:model.spec.chunk], 0, 0)
    else:  # the full model samples the test graphs together, as in the quality section
        model.sample([8], 0)
        with peak_memory() as mem:
            model.sample(sizes, 0)
    return {"peak_bytes": mem.peak_bytes, "wall_s": mem.wall_s}


def measure_child(kind: str, phase: str, num_nodes: int) -> dict[str, float]:
    """(In a fresh process) peak RSS of one training or sampling step at ``num_nodes``.

    ``num_nodes`` 0: the quality section's setting (:func:`_quality_child`).
    """
    torch.set_num_threads(1)
    if num_nodes == 0:
        return _quality_child(kind, phase)
    graph = _sbm_graph(num_nodes, 0)
    spec = _spec(1, 1)
    model = SBGDModel(spec) if kind == "sbgd" else FullGraphModel(spec)
    data = model.tensors([graph])
    model.trainer.spec = TrainSpec(steps=1, batch_size=len(data))
    warm = data.take(torch.tensor([0]))
    if phase == "train":
        model.trainer.step(warm)  # torch's lazy first-call allocations, outside the phase
        with peak_memory() as mem:
            model.trainer.step(data)
    elif kind == "sbgd":
        model.sample_chunk([8], 0, 0)
        with peak_memory() as mem:
            model.sample_chunk(model.plan(num_nodes, 0)[:spec.chunk], 0, 0)
    else:
        model.sample([8], 0)
        with peak_memory() as mem:
            model.sample([num_nodes], 0)
    return {"peak_bytes": mem.peak_bytes, "wall_s": mem.wall_s}


def measure_all(sizes: tuple[int, ...]) -> list[tuple[tuple[str, str, int], dict[str, float]]]:
    """(In a fresh process) :func:`measure_child` for every size, phase and model, in turn.

    Sequential phases do not hide each other's peaks: with ``MALLOC_MMAP_THRESHOLD_`` at
    64 KiB every sizeable allocation is returned to the OS when freed.
    """
    cases = [(kind, phase, n) for n in sizes for phase in ("train", "sample")
             for kind in ("full", "sbgd")]
    return [(case, measure_child(*case)) for case in cases]


def memory(quick: bool) -> dict[str, Any]:
    """Peak memory of both models per phase and ``N`` (fresh process each, interleaved)."""
    import psutil

    sizes = (128, 256) if quick else (256, 512, 1024)
    repeats = 1 if quick else 2
    # Every allocation of 64 KiB or more is its own mmap, returned to the OS when freed, so a
    # child's RSS high-water mark is its phase's own peak (not hidden by reused heap pages).
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"
    ctx = mp.get_context("spawn")
    rows: dict[str, dict[str, dict[str, list[float]]]] = {}
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        for _ in range(repeats):  # a fresh process per repeat measures every case in turn
            for (kind, phase, n), got in pool.apply(measure_all, ((0, *sizes),)):
                rows.setdefault(phase, {}).setdefault(kind, {}).setdefault(
                    str(n) if n else "quality", []).append(got["peak_bytes"])
    med = {p: {k: {n: statistics.median(v) for n, v in by.items()} for k, by in kinds.items()}
           for p, kinds in rows.items()}
    top = str(sizes[-1])
    ratio = {p: med[p]["full"][top] / max(med[p]["sbgd"][top], 1.0) for p in med}
    at_quality = {p: med[p]["full"]["quality"] / max(med[p]["sbgd"]["quality"], 1.0)
                  for p in med}
    available = psutil.virtual_memory().available
    fits = {p: _fit_quadratic(sizes, [med[p]["full"][str(n)] for n in sizes]) for p in med}
    full_max = {p: int(math.sqrt(max(available - a, 0.0) / b)) for p, (a, b) in fits.items()}
    return {"peak_bytes": med, "memory_ratio": ratio, "at_num_nodes": sizes[-1],
            "memory_ratio_at_quality": at_quality,
            "available_bytes": available,
            "full_fit_bytes": {p: {"a": a, "b_per_node_squared": b} for p, (a, b) in fits.items()},
            "full_max_nodes": full_max, "repeats": repeats}


def _fit_quadratic(sizes: tuple[int, ...], peaks: list[float]) -> tuple[float, float]:
    """Least squares ``peak = a + b N^2`` (``b`` at least 1 byte)."""
    design = np.stack([np.ones(len(sizes)), np.array(sizes, dtype=float) ** 2], axis=1)
    a, b = np.linalg.lstsq(design, np.array(peaks), rcond=None)[0]
    return float(a), float(max(b, 1.0))


def large_graph(max_nodes: int, quick: bool) -> dict[str, Any]:
    """SBGD generates a graph of ``2 max_nodes`` nodes on 2 Ray block samplers."""
    from hetray.actors.generate import RayBackend

    graphs = make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=8, blocks=(2, 3)))
    model = SBGDModel(_spec(40 if quick else 100, 20 if quick else 50))
    model.fit(graphs)
    target = min(2 * max_nodes, 4000 if quick else 200_000)
    with peak_memory() as mem:
        graph = sample(model, [target], seed=0, backend=RayBackend(), num_workers=2)[0]
    return {"num_nodes": graph.shape[0], "num_edges": int(graph.nnz // 2),
            "driver_peak_bytes": mem.peak_bytes, "wall_s": mem.wall_s,
            "symmetric": bool(abs(graph - graph.T).sum() == 0),
            "self_loops": int(graph.diagonal().sum())}


def study(quick: bool) -> dict[str, Any]:
    """The convergence study, one Ray task per cell."""
    from hetray.actors.generate import ray_map

    from hetray.experiments.generate import write_study_figures

    config = (StudyConfig(sizes=(16, 32, 64), learned_sizes=(16,), joint_sizes=(16,))
              if quick else StudyConfig())
    report = run_study(config, lambda f, cells, s: ray_map(f, cells, s, num_cpus=1.0))
    figures = write_study_figures(report, PLOTS)
    s = report.summary
    return {"summary": {k: s[k] for k in ("error_rises_with_n", "power_law_over_regular",
                                          "error_falls_with_k", "best_t", "best_t_interior",
                                          "learned_power_law_over_regular", "num_cells")},
            "error_vs_n": s["error_vs_n"], "error_vs_k": s["error_vs_k"],
            "error_vs_t": s["error_vs_t"],
            "learned_error_vs_n": s["learned_error_vs_n"],
            "joint_error_vs_n": s["joint_error_vs_n"],
            "figures": [str(p.relative_to(REPO)) for p in figures]}


def main() -> None:
    """Run every section; print the headline ratios; write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--out", type=Path, default=OUT, help="result JSON path")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    start, load_start = time.perf_counter(), os.getloadavg()
    result: dict[str, Any] = {"quick": args.quick, "load_avg_at_start": load_start}
    result.update(quality(args.quick))
    mem = memory(args.quick)
    result["memory_ratio"], result["memory"] = mem["memory_ratio"], mem
    result["memory_ratio_at_quality"] = mem["memory_ratio_at_quality"]
    from hetray import runtime

    runtime.connect(None)
    result["large_graph"] = large_graph(min(mem["full_max_nodes"].values()), args.quick)
    result["study"] = study(args.quick)
    result["load_avg_at_end"], result["wall_s"] = os.getloadavg(), time.perf_counter() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float), encoding="utf-8")
    print(f"memory_ratio (full / SBGD) at N = {mem['at_num_nodes']}: "
          + ", ".join(f"{p} {v:.1f}x" for p, v in mem["memory_ratio"].items())
          + "; in the quality section's setting: "
          + ", ".join(f"{p} {v:.1f}x" for p, v in mem["memory_ratio_at_quality"].items()))
    for key in ("mmd", "size_generalisation"):
        print(key, json.dumps(result[key]))
    print(f"SBGD generated {result['large_graph']['num_nodes']} nodes (full model projected "
          f"max {mem['full_max_nodes']}); wrote {args.out} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
