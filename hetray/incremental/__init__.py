"""Node-wise graph incremental learning under structural shift, with the SSRM regulariser.

Paper: Su, Zou, Zhang and Wu, "Towards Robust Graph Incremental Learning on Evolving Graphs",
ICML 2024 (https://arxiv.org/abs/2402.12987); the protocol and baselines follow CGLB
(Zhang, Song and Tao, NeurIPS 2022 D&B). SSRM itself is reconstructed (the public code
never runs it): see :mod:`hetray.incremental.ssrm` and ``docs/incremental.md``.

The path from here to every adapter, one hop each:

- run API: :mod:`hetray.incremental.run` (``RunConfig``, ``run``, ``run_many``,
  ``LocalBackend``, ``IncrementalDriver``); worker :mod:`hetray.incremental.worker`
- actor shell: ``actors/incremental.py`` (``hetray.actors.incremental.RayBackend``)
- CLI command: ``hetray incremental run`` (``hetray/cli/incremental.py``)
- Tune experiment: ``incremental`` (``hetray/experiments/incremental.py``,
  ``examples/grids/incremental.yaml``)
- benchmark: ``benchmarks/incremental.py`` -> ``benchmarks/results/incremental.json``
- docs page: ``docs/incremental.md``

Algorithm modules: ``graphs`` (the container; gnn-benchmark, HeCo ACM), ``synthetic``
(contextual SBM with a structural-shift knob), ``stream`` (tasks, splits, the graph at each
task), ``backbones`` (GCN / GraphSAGE / GAT), ``methods`` (fine-tune, joint, EWC, MAS,
ER-GNN), ``ssrm`` (MMD and the regulariser), ``targets`` (class-balanced task-IL losses),
``learner`` (training and evaluation), ``metrics`` (AP, AF) and ``report``.
"""

from hetray.core.lazy_exports import lazy_exports

_EXPORTS = {
    "IncrementalDriver": "hetray.incremental.run",
    "LocalBackend": "hetray.incremental.run",
    "RunConfig": "hetray.incremental.run",
    "RunReport": "hetray.incremental.report",
    "run": "hetray.incremental.run",
    "run_many": "hetray.incremental.run",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
