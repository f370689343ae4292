"""MTRGL pair trading: temporal relation graphs from prices, TGN link prediction, backtests.

Paper: Su, Wu, Li, "MTRGL: Effective Temporal Correlation Discerning through Multi-modal
Temporal Relational Graph Learning", ICASSP 2024, https://arxiv.org/abs/2401.14199 (its
method section is not public: hetray ships a reconstruction, ``docs/finance.md``). Guide:
``docs/finance.md``.

The path from here to every adapter, one hop each:

- run API: :mod:`hetray.finance.run` (``RunConfig`` -> ``run(config, backend=None)`` ->
  ``PairsReport``; in-process without Ray);
- actor shell: ``actors/finance.py`` (``hetray.actors.finance.RayBackend``: formation
  windows as Ray tasks, the TGN memory on MSPipe's memory-store actors);
- CLI: ``hetray finance pairs`` and ``hetray finance graph`` (``hetray/cli/finance.py``);
- benchmark: ``benchmarks/mtrgl.py`` (writes ``benchmarks/results/mtrgl.json``);
- docs: ``docs/finance.md``.

Modules: :mod:`~hetray.finance.prices` (price tables and their rules),
:mod:`~hetray.finance.graph` (rolling correlations -> events),
:mod:`~hetray.finance.labels` (future-correlation labels, historical negatives, persistence),
:mod:`~hetray.finance.config` and :mod:`~hetray.finance.link` (the online TGN day loop on
MSPipe's model, train step and memory store),
:mod:`~hetray.finance.selection` (distance, cointegration and MTRGL pair selection),
:mod:`~hetray.finance.backtest` (trading rules, returns and metrics),
:mod:`~hetray.finance.formation` (monthly windows, one pure job each),
:mod:`~hetray.finance.report` and :mod:`~hetray.finance.plots` (results, the equity chart).
"""
