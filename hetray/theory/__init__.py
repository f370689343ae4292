"""Theory: excess risk of SGD vs ridge in linear GNNs, regular vs power-law graphs, with bounds.

Paper: Su and Wu, "On the Interplay between Graph Structure and Learning Algorithms in Graph
Neural Networks", ICML 2025 (https://arxiv.org/abs/2508.14338). The paper's method section was
not readable; the model and the bound constants are reconstructions from the standard bounds
its theorems instantiate (``docs/theory.md``, research note ``graphml.md`` section 3).

The path from here to every adapter, one hop each:

- run API: :mod:`hetray.theory.run` (``RunConfig``, ``run``, ``RunReport``, ``LocalBackend``,
  ``CellWorker``, ``TheoryDriver``)
- actor shell: ``actors/theory.py`` (``hetray.actors.theory.RayBackend``)
- CLI command: ``hetray theory`` (``hetray/cli/theory.py``)
- Tune experiment: ``theory`` (``hetray/experiments/theory.py``, ``examples/grids/theory.yaml``)
- benchmark: ``benchmarks/theory.py`` -> ``benchmarks/results/theory.json``
- docs page: ``docs/theory.md``

Algorithm modules (numpy / scipy only): ``graphs`` (regular, Erdos-Renyi, Barabasi-Albert,
Chung-Lu at matched mean degree; lazy-adjacency and resolvent graph matrices), ``model``
(graph-signal and node-feature readings, the covariance ``M`` and its spectrum, ``theta*``),
``algorithms`` (tail-averaged SGD, ridge, exact excess risk), ``bounds`` (the SGD and ridge
bias/variance bounds on the spectrum), ``cells`` (one sweep point, both sides) and
``analysis`` (rank and winner agreement, slopes, depth ratios, spectrum statistics).
"""
