"""The pipeline benchmark's figure, drawn from the committed results.

``benchmarks/pipeline_plot.py`` recomputes the peak activation memory of the capped GPipe
run from the model in the JSON; that peak must fit the cap the benchmark used, and the
figure must be written.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from hetray.pipeline.schedules import Schedule

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "pipeline.json"


def _plot_module():
    spec = importlib.util.spec_from_file_location("pipeline_plot",
                                                  REPO / "benchmarks" / "pipeline_plot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_capped_gpipe_run_fits_the_cap_it_was_measured_under():
    result = json.loads(RESULTS.read_text(encoding="utf-8"))
    capped = result["memory_capped"]
    plot = _plot_module()
    fit = capped["gpipe"]["microbatches_per_pass"]
    peak = plot.capped_peak_bytes(result, Schedule.GPIPE, fit)
    assert peak <= capped["cap_bytes"]
    m = result["config"]["num_microbatches"]
    if fit < m:  # the next divisor of m up would not have fitted
        bigger = min(d for d in range(fit + 1, m + 1) if m % d == 0)
        assert plot.capped_peak_bytes(result, Schedule.GPIPE, bigger) > capped["cap_bytes"]


def test_the_figure_is_written(tmp_path):
    out = tmp_path / "pipeline.png"
    done = subprocess.run([sys.executable, "benchmarks/pipeline_plot.py", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.stat().st_size > 20_000
