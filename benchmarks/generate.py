"""Full-graph score diffusion vs SBGD block diffusion: memory, quality, size generalisation, study.

Writes ``benchmarks/results/generate.json`` and ``docs/plots/generate_*.png``. Usage::

    python benchmarks/generate.py                      # about 10 min on 2 quiet cores
    python benchmarks/generate.py --quick --out /tmp/generate.json   # ~2.5 min smoke run

Sections:

* **quality** (``mmd.full``, ``mmd.sbgd``, ``size_generalisation.full`` / ``.sbgd``): both
  models train alike (600 DSM steps, batch 8) on SBM graphs (20-40 nodes per block, p_in 0.3,
  p_out 0.005) and sample one graph per held-out graph's size. ``mmd``: trained on 4-5-block
  graphs (N up to 200, the largest SBM setting of the issue), against held-out 4-5-block
  graphs; ``mmd_2_3_blocks``: the same on 2-3-block graphs; ``size_generalisation``: the
  2-3-block models against the held-out 4-5-block graphs (sizes never seen). Squared MMDs
  with the Gaussian-EMD kernel (:mod:`hetray.generate.metrics`); ``mmd_orbit*`` and
  ``size_generalisation_orbit``: GraphRNN's orbit MMD (:mod:`hetray.generate.orbits`).
  ``vun*``: validity (the reconstructed DiGress SBM test), uniqueness and novelty against the
  training graphs (:mod:`hetray.generate.validity`); ``vun_real`` scores the real held-out
  graphs the same way (how often the test passes real SBM graphs).
* **memory** (``memory_ratio``, ``memory_ratio_at_quality``, ``memory``): peak RSS of one
  training step and one sampling call, every case in its own fresh child process, both models
  alike (:mod:`generate_memory`). At each ``N`` the full model holds the whole ``N x N``
  graph; SBGD trains on the blocks of the same graph (batch = its blocks) and samples ``C``
  blocks at a time (one sampler worker's peak). ``memory_ratio_at_quality`` is the setting of
  ``mmd`` (batch 8 graphs vs 8 blocks; all test graphs sampled together vs one chunk),
  ``memory_ratio_at_quality_2_3_blocks`` that of ``mmd_2_3_blocks``: medians of 3
  interleaved repeats, plus the worst pair at the ``mmd`` setting (least full / most SBGD).
  ``memory_ratio`` is at the largest ``N`` (2 repeats); the full model's ``a + b N^2`` fit
  projects ``full_max_nodes`` (where it would exceed the memory available at the start), and
  SBGD then generates a graph of twice that size (``large_graph``) on 2 Ray block samplers.
* **memory_limit**: that graph's size sampled by both models under one hard limit, the
  memory this machine can give (:func:`memory_limit`).
* **study**: ``hetray generate study`` with one Ray task per cell; summary numbers for
  paradigm 1 (features given the graph) and, under ``study.structure``, paradigm 2
  (structure given the features).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch
from generate_memory import limit_demo, memory, spec

from hetray.generate.data import Dataset, DataSpec, make_dataset, split
from hetray.generate.metrics import mmd_all, peak_memory
from hetray.generate.model import FullGraphModel, SBGDModel
from hetray.generate.orbits import orbit_mmd
from hetray.generate.run import sample
from hetray.generate.study_run import StudyConfig, run_study
from hetray.generate.validity import sbm_valid, vun

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results" / "generate.json"
PLOTS = REPO / "docs" / "plots"
logger = logging.getLogger("benchmarks.generate")
# Ray, matplotlib and psutil are imported inside the sections: the memory section's spawned
# children import this module, and each should load only torch and hetray.generate.


def _scores(real: list, generated: list, train: list) -> dict[str, Any]:
    """MMDs (three histograms and orbits) and V.U.N. of ``generated`` against ``real``."""
    return {"mmd": mmd_all(real, generated), "orbit": orbit_mmd(real, generated),
            "vun": vun(generated, train, sbm_valid)}


def _trained(cls: type[FullGraphModel] | type[SBGDModel], train: list,
             quick: bool) -> tuple[FullGraphModel | SBGDModel, float]:
    """A model of ``cls`` trained on ``train`` with the benchmark's settings; its seconds."""
    model = cls(spec(60 if quick else 600, 30 if quick else 100))
    start = time.perf_counter()
    model.fit(train)
    return model, time.perf_counter() - start


def quality(quick: bool) -> dict[str, Any]:
    """Both models, trained alike: MMDs at 4-5 and 2-3 blocks, and from 2-3 to 4-5 blocks.

    ``mmd`` (the quality at the setting of ``memory_ratio_at_quality``): trained on 4-5-block
    graphs, against held-out 4-5-block graphs. ``mmd_2_3_blocks``: trained on 2-3-block graphs,
    against held-out 2-3-block graphs. ``size_generalisation``: the 2-3-block models against
    the held-out 4-5-block graphs (sizes they never saw).
    """
    from hetray.experiments.generate import write_sample_figure

    n = 20 if quick else 60
    small = split(make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=n, blocks=(2, 3))))
    large = split(make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=n, blocks=(4, 5),
                                        seed=1)))
    out: dict[str, Any] = {"vun_real": {"test_2_3_blocks": vun(small[1], small[0], sbm_valid),
                                        "test_4_5_blocks": vun(large[1], large[0], sbm_valid)},
                           "num_train": len(small[0]), "num_test": len(small[1])}
    held_out, held_out_small, unseen, samples = {}, {}, {}, {}
    sizes = [g.shape[0] for g in large[1]]
    for name, cls in (("sbgd", SBGDModel), ("full", FullGraphModel)):
        model, train_s = _trained(cls, large[0], quick)
        held_out[name] = {**_scores(large[1], sample(model, sizes, seed=11), large[0]),
                          "train_s": train_s}
        model, train_s = _trained(cls, small[0], quick)
        seen = sample(model, [g.shape[0] for g in small[1]], seed=11)
        held_out_small[name] = {**_scores(small[1], seen, small[0]), "train_s": train_s}
        samples[name] = sample(model, sizes, seed=12)
        unseen[name] = _scores(large[1], samples[name], small[0])
        logger.info("%s: mmd %s, unseen sizes %s", name, held_out[name]["mmd"],
                    unseen[name]["mmd"])
    keys = {"mmd": "mmd", "mmd_orbit": "orbit", "vun": "vun", "train_s": "train_s"}
    for key, field in keys.items():
        out[key] = {m: c[field] for m, c in held_out.items()}
        out[key + "_2_3_blocks"] = {m: c[field] for m, c in held_out_small.items()}
    for key, field in (("size_generalisation", "mmd"), ("size_generalisation_orbit", "orbit"),
                       ("vun_unseen_sizes", "vun")):
        out[key] = {m: c[field] for m, c in unseen.items()}
    write_sample_figure({"real (4-5 blocks)": large[1], "SBGD": samples["sbgd"],
                         "full-graph": samples["full"]}, PLOTS / "generate_samples.png")
    return out


def large_graph(max_nodes: int, quick: bool) -> dict[str, Any]:
    """SBGD generates a graph of ``2 max_nodes`` nodes on 2 Ray block samplers."""
    from hetray.actors.generate import RayBackend

    graphs = make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=8, blocks=(2, 3)))
    model = SBGDModel(spec(40 if quick else 100, 20 if quick else 50))
    model.fit(graphs)
    target = min(2 * max_nodes, 4000 if quick else 200_000)
    with peak_memory() as mem:
        graph = sample(model, [target], seed=0, backend=RayBackend(), num_workers=2)[0]
    return {"num_nodes": graph.shape[0], "num_edges": int(graph.nnz // 2),
            "driver_peak_bytes": mem.peak_bytes, "wall_s": mem.wall_s,
            "symmetric": bool(abs(graph - graph.T).sum() == 0),
            "self_loops": int(graph.diagonal().sum())}


def memory_limit(num_nodes: int, quick: bool) -> dict[str, Any]:
    """Both models sample under one hard memory limit: the memory this machine can give.

    The budget is the memory available now minus a reserve of 6 GiB left to the other users
    of the machine (1 GiB in a quick run); every case is a fresh child whose address space is
    capped at its size at the start plus the budget (:func:`generate_memory.limit_demo`), so
    no case can take more than the budget. Cases: the full model at a small ``N`` (a control:
    it fits), the full model at ``num_nodes``, SBGD at ``num_nodes``.
    """
    import psutil

    vm, reserve = psutil.virtual_memory(), 6 * 2**30
    budget = 2**30 if quick else max(vm.available - reserve, 2**30)
    rows = limit_demo([("full", 256 if quick else 1024, budget), ("full", num_nodes, budget),
                       ("sbgd", num_nodes, budget)])
    return {"total_bytes": vm.total, "available_bytes": vm.available, "reserve_bytes": reserve,
            "budget_bytes": budget, "cases": rows, "full_small_fits": rows[0]["ok"],
            "full_fails": not rows[1]["ok"], "sbgd_succeeds": rows[2]["ok"]}


def study(quick: bool) -> dict[str, Any]:
    """The convergence study, one Ray task per cell."""
    from hetray.actors.generate import ray_map

    from hetray.experiments.generate import write_study_figures

    config = (StudyConfig(sizes=(16, 32, 64), learned_sizes=(16,), joint_sizes=(16,),
                          structure_sizes=(16, 32), structure_nodes=16,
                          structure_learned_sizes=(16,)) if quick else StudyConfig())
    report = run_study(config, lambda f, cells, s: ray_map(f, cells, s, num_cpus=1.0))
    figures = write_study_figures(report, PLOTS)
    s = report.summary
    keys = ("error_rises_with_n", "power_law_over_regular", "gap_shrinks_with_normalisation",
            "error_falls_with_k", "best_t", "best_t_interior", "learned_power_law_over_regular")
    curves = ("error_vs_n", "error_vs_k", "error_vs_t", "learned_error_vs_n")
    return {"summary": {**{k: s[k] for k in keys}, "num_cells": s["num_cells"]},
            **{k: s[k] for k in curves}, "joint_error_vs_n": s["joint_error_vs_n"],
            "structure": {"summary": {k: s["structure"][k] for k in keys},
                          **{k: s["structure"][k] for k in curves}},
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
    result["memory_limit"] = memory_limit(result["large_graph"]["num_nodes"], args.quick)
    result["study"] = study(args.quick)
    result["load_avg_at_end"], result["wall_s"] = os.getloadavg(), time.perf_counter() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float), encoding="utf-8")
    print(f"memory_ratio (full / SBGD) at N = {mem['at_num_nodes']}: "
          + ", ".join(f"{p} {v:.1f}x" for p, v in mem["memory_ratio"].items())
          + "; at the quality settings (4-5 / 2-3 blocks): "
          + ", ".join(f"{p} {v:.1f}x / {mem['memory_ratio_at_quality_2_3_blocks'][p]:.1f}x"
                      for p, v in mem["memory_ratio_at_quality"].items()))
    for key in ("mmd", "mmd_2_3_blocks", "size_generalisation", "mmd_orbit",
                "mmd_orbit_2_3_blocks", "size_generalisation_orbit", "vun", "vun_2_3_blocks",
                "vun_unseen_sizes", "vun_real"):
        print(key, json.dumps(result[key]))
    limit = result["memory_limit"]
    print(f"under a {limit['budget_bytes'] / 2**30:.1f} GiB limit: full model at "
          f"{limit['cases'][1]['num_nodes']} nodes ok={limit['cases'][1]['ok']}, SBGD "
          f"ok={limit['cases'][2]['ok']} (full at {limit['cases'][0]['num_nodes']}: "
          f"ok={limit['cases'][0]['ok']})")
    print(f"SBGD generated {result['large_graph']['num_nodes']} nodes (full model projected "
          f"max {mem['full_max_nodes']}); wrote {args.out} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
