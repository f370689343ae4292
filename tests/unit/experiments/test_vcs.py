"""The ``vcs`` Tune trial in-process: real training, its report, and the report's plots."""

from __future__ import annotations

import json
import math

import matplotlib.image as mpimg
import pandas as pd
import pytest

from hetray.core.errors import ConfigError
from hetray.experiments.registry import EXPERIMENTS
from hetray.experiments.report import render_report
from hetray.experiments.vcs import SPEC, run_vcs_trial

SMALL = {"model": "jodie", "vca_lambda": 0.5, "num_events": 800, "num_nodes": 40,
         "memory_dim": 8, "epochs": 1, "num_seeds": 2, "batch_size": 100, "window_events": 20}


@pytest.mark.usefixtures("one_torch_thread")
def test_trial_reports_dispersion_and_ap_per_seed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows: list[dict[str, float]] = []
    run_vcs_trial(SMALL, rows.append)
    assert [r["seed_index"] for r in rows] == [0.0, 1.0]
    for row in rows:
        assert set(SPEC.metrics) <= set(row)
        assert 0 < row["test_ap"] <= 1
        assert row["dispersion"] > 0
        assert 0 < row["dispersion_p"] <= 1
        assert math.isfinite(row["val_dispersion"])
    assert EXPERIMENTS["vcs"] is SPEC
    with pytest.raises(ConfigError, match="vca_windows"):
        run_vcs_trial({**SMALL, "vca_windows": 1}, rows.append)


def test_report_draws_dispersion_and_ap_against_lambda(tmp_path):
    rows = [{"trial_id": f"t{m}{w}", "config/model": m, "config/vca_lambda": w,
             "seed_index": float(s), "test_ap": 0.8 - 0.02 * w + 0.01 * s,
             "val_ap": 0.8, "dispersion": 2.0 - 0.5 * w + 0.1 * s, "dispersion_p": 0.001,
             "val_dispersion": 2.0, "ljung_box": 40.0, "ljung_box_p": 0.001, "clusters": 3.0,
             "error_rate": 0.15}
            for m in ("tgn", "jodie") for w in (0.0, 0.1, 0.5, 1.0) for s in range(3)]
    sweep = tmp_path / "vcs"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"experiment": "vcs", "source": "x.yaml"}),
                                      encoding="utf-8")
    history = pd.DataFrame(rows)
    history.to_parquet(sweep / "history.parquet")
    history.groupby("trial_id").last().reset_index().to_parquet(sweep / "results.parquet")
    render_report(tmp_path, tmp_path / "report", None)
    for plot in SPEC.plots:
        assert mpimg.imread(tmp_path / "report" / plot.filename)[..., :3].std() > 0.05
