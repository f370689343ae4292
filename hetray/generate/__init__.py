"""Generate: score-based graph generation, full-graph (GDSS semantics) vs SBGD block diffusion.

Papers: Su and Wu, "SBGD: Improving Graph Diffusion Generative Model via Stochastic Block
Diffusion", ICML 2025 (https://arxiv.org/abs/2508.14352), and Su and Wu, "A Non-Asymptotic
Convergent Analysis for Scored-Based Graph Generative Model via a System of Stochastic
Differential Equations", ICML 2025 (https://arxiv.org/abs/2508.14351). Neither paper's method
section was readable; the reconstructions are listed in ``docs/generate.md``.

The path from here to every adapter, one hop each:

- run API: :mod:`hetray.generate.run` (``GenerateConfig``, ``train``, ``sample``,
  ``evaluate``, ``BlockSampler``, ``LocalBackend``) and :mod:`hetray.generate.study_run`
  (``StudyConfig``, ``run_study``, ``local_map``)
- actor shell: ``actors/generate.py`` (``BlockSamplerGroup``, ``RayBackend``, ``ray_map``)
- CLI command: ``hetray generate train|sample|eval|study`` (``hetray/cli/generate.py``)
- Tune experiment: ``generate`` (``hetray/experiments/generate.py``,
  ``examples/grids/generate.yaml``)
- benchmark: ``benchmarks/generate.py`` -> ``benchmarks/results/generate.json``
- docs page: ``docs/generate.md``

Algorithm modules (torch / numpy / scipy / networkx; no Ray): ``sde`` (VP / VE SDEs),
``nets`` (score networks for ``X`` and ``A``), ``train`` (denoising score matching, resumable
trainer), ``sampler`` (PC sampler, quantisation), ``blocks`` (partitions, inter-block
density, assembly), ``model`` (``FullGraphModel``, ``SBGDModel``), ``data`` (synthetic
generators, Cora and Bitcoin), ``metrics`` (MMD, V.U.N., peak memory), ``gaussian`` and
``study`` (the convergence study's closed forms and cells).
"""
