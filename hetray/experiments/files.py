"""File names inside a sweep directory ``<out>/<experiment>/`` (besides Tune's own).

``sweep.json`` records the grid and settings the sweep started with, ``results.parquet``
holds one row per trial (``config/<param>`` columns and the trial's last metrics) and
``history.parquet`` every report of every trial.
"""

SWEEP_FILE = "sweep.json"
RESULTS_FILE = "results.parquet"
HISTORY_FILE = "history.parquet"
