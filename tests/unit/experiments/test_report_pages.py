"""hetray report: HTML and Markdown pages, findings against targets, smoke stamps, axes."""

from __future__ import annotations

import json
import re

import matplotlib.colors as mcolors
import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from hetray.experiments import plot_style as ps
from hetray.experiments.benchmark_catalog import BENCHMARKS
from hetray.experiments.benchmark_views import Unit, fmt
from hetray.experiments.page import Heading, Table, Text, to_html, to_markdown
from hetray.experiments.plots import PlotOptions, sweep_figure
from hetray.experiments.registry import EXPERIMENTS
from hetray.experiments.report import (
    HTML_PAGE,
    SMOKE_NOTE,
    is_smoke,
    load_sweep,
    plot_options,
    render_report,
)
from tests.conftest import REPO

BENCH_DIR = REPO / "benchmarks" / "results"
RAW_KEY_CELL = re.compile(r"\|\s*[a-z_]+(\.[a-z0-9_-]+)+\s*\|")


def _sweep(path, experiment, rows, params=None):
    """A sweep directory as ``hetray tune`` writes it (sweep.json, results and history)."""
    path.mkdir(parents=True)
    record = {"experiment": experiment, "source": "grid.yaml", "params": params or {}}
    (path / "sweep.json").write_text(json.dumps(record), encoding="utf-8")
    history = pd.DataFrame(rows)
    history.to_parquet(path / "history.parquet")
    history.groupby("trial_id", sort=False).tail(1).to_parquet(path / "results.parquet")
    return path


def _heta_rows():
    """Vanilla's epochs take 3x RAF's at 4 holders, it sends 20x the bytes, same accuracy."""
    rows = []
    for k in (1, 2, 4):
        for mode in ("raf", "vanilla"):
            slow = 3.0 if mode == "vanilla" and k == 4 else 1.0
            rows += [{"trial_id": f"{mode}{k}", "config/mode": mode, "config/num_partitions": k,
                      "epoch": float(e), "epoch_time_s": (1.0 + 0.01 * e) * slow,
                      "mb_sent": (20.0 if mode == "vanilla" else 1.0) * (k - 1), "loss": 1.0,
                      "train_acc": 0.9, "test_acc": 0.8, "val_acc": 0.8, "link_delay_s": 0.0}
                     for e in range(3)]
    return rows


def _has_colour(pixels, colour, at_least=40):
    rgb = np.array(mcolors.to_rgb(colour))
    return int((np.abs(pixels[..., :3] - rgb) < 0.03).all(axis=-1).sum()) >= at_least


def test_report_writes_html_and_markdown_with_findings_from_a_sweep(tmp_path):
    _sweep(tmp_path / "sweeps" / "heta", "heta", _heta_rows())
    page = render_report(tmp_path / "sweeps", tmp_path / "out", None)
    md = page.read_text(encoding="utf-8")
    html = (tmp_path / "out" / HTML_PAGE).read_text(encoding="utf-8")
    assert ("- **holds**: Epoch time, vanilla / RAF: 3x (K = 4); target >= 2x (issue 5): "
            "holds for 1 of 1.") in md
    assert "- **holds**: Data sent per epoch, vanilla / RAF: 20x (K = 4)" in md
    assert "differs by at most 0 pt" in md
    for text in (md, html):
        assert "vanilla4" in text
        assert "raf1" in text
        assert "partition holders K" in text  # human names for the trial table's columns
        assert "data sent per epoch (MB)" in text
    header = next(line for line in md.splitlines() if line.startswith("| trial |"))
    assert "num_partitions" not in header  # ... never the raw column keys
    assert "epoch_time_s" not in header
    assert '<img src="heta_speedup_vs_partitions.png"' in html
    assert '<span class="holds">holds</span>' in html
    assert html.count("<table>") == 2  # the overview and the trials
    pixels = mpimg.imread(tmp_path / "out" / "heta_mb_vs_partitions.png")
    assert pixels[..., :3].std() > 0.05


def _headline_rows(md):
    """``{headline: [value, target, verdict]}`` from the pages' headline tables."""
    rows = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.match(r"holds|misses|missed|-$", cells[3]):
            rows[cells[0]] = cells[1:4]
    return rows


def test_report_renders_the_committed_benchmarks_as_headlines_and_grouped_tables(tmp_path):
    page = render_report(tmp_path, tmp_path / "out", BENCH_DIR)  # no sweeps: benchmarks only
    md = page.read_text(encoding="utf-8")
    assert "No finished sweep under" in md
    data = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in BENCH_DIR.glob("*.json")}
    assert {"heta", "mspipe", "pipeline", "planner"} <= set(data)
    rows = _headline_rows(md)
    for stem, entry in BENCHMARKS.items():
        for headline in entry.headlines:
            value, holds = headline.value(data[stem]), headline.holds(data[stem])
            assert value is not None, headline.name
            shown, _target, verdict = rows[headline.name]
            assert shown == fmt(value, headline.unit)
            expected = {True: "holds", False: "misses", None: "-"}[holds]
            if holds is False and headline.target.expected:
                expected = "missed (expected, not required)"
            assert verdict == expected, headline.name
    for stem, entry in BENCHMARKS.items():  # the overview counts what the tables say
        held = sum(bool(h.holds(data[stem])) for h in entry.headlines)
        if entry.headlines:
            assert f"| Benchmark {entry.title.split(':')[0]} | {held} |" in md
    heta = data["heta"]["synthetic"]
    ratio = heta["bytes_vanilla"] / heta["bytes_raf"]
    assert rows["bytes sent per epoch, vanilla / RAF"][0] == f"{ratio:.3g}x"
    assert (f"| bytes sent per epoch | {fmt(heta['bytes_raf'], Unit.BYTES)} | "
            f"{fmt(heta['bytes_vanilla'], Unit.BYTES)} | {ratio:.3g}x |") in md
    assert "*Per schedule: median step times and the link*" in md
    assert RAW_KEY_CELL.search(md) is None  # no "synthetic.bytes_ratio"-style rows
    for name in ("benchmark_heta.png", "benchmark_pipeline.png", "benchmark_planner.png",
                 "benchmark_mspipe.png", "benchmark_mspipe_staleness.png"):
        assert mpimg.imread(tmp_path / "out" / name)[..., :3].std() > 0.05, name
    html = (tmp_path / "out" / HTML_PAGE).read_text(encoding="utf-8")
    assert html.count("<caption>Headline numbers</caption>") == 4


def _planner_rows():
    return [{"trial_id": "t0", "config/model": "gpt-1.3b", "budget_evals_used": float(b),
             "gap_to_baseline_pct": g, "search_s": 0.01 * b, "predicted_tokens_per_s": 2.0,
             "baseline_tokens_per_s": 1.9} for b, g in ((8, 1.0), (16, 4.5))]


def test_a_smoke_sweep_is_stamped_on_the_page_and_on_every_plot(tmp_path):
    spec = EXPERIMENTS["planner"]
    smoke = {k: [p.smoke] for k, p in spec.params.items() if p.smoke is not None}
    assert is_smoke({"params": smoke}, spec)
    assert not is_smoke({"params": {**smoke, "budget_evals": [240]}}, spec)
    assert is_smoke({"smoke": True, "params": {}}, spec)
    _sweep(tmp_path / "smoke" / "planner", "planner", _planner_rows(), smoke)
    _sweep(tmp_path / "full" / "planner", "planner", _planner_rows(), {"budget_evals": [240]})
    md = render_report(tmp_path / "smoke", tmp_path / "s", None).read_text(encoding="utf-8")
    assert f"**{SMOKE_NOTE}**" in md
    assert "[smoke run: not judged]" in md
    assert "**holds**" not in md
    assert '<span class="smoke">' in (tmp_path / "s" / HTML_PAGE).read_text(encoding="utf-8")
    full_md = render_report(tmp_path / "full", tmp_path / "f", None).read_text(encoding="utf-8")
    assert SMOKE_NOTE not in full_md
    assert "**holds**" in full_md
    for name in ("planner_gap_vs_budget.png", "planner_search_s_vs_budget.png"):
        stamped, plain = (mpimg.imread(tmp_path / d / name) for d in ("s", "f"))
        assert _has_colour(stamped[: stamped.shape[0] // 20], ps.FAIL_COLOUR), name
        assert not _has_colour(plain[: plain.shape[0] // 20], ps.FAIL_COLOUR), name


def test_staleness_is_a_categorical_axis_with_auto_in_its_own_slot(tmp_path):
    rows = [{"trial_id": f"{m}{k}", "config/mode": m, "config/staleness": k, "epoch": float(e),
             "events_per_s": 1000.0 + 100 * k + 10 * e, "loss": 1.0, "val_ap": 0.7,
             "test_ap": 0.7, "mean_staleness": 0.0}
            for m in ("mspipe", "sequential") for k in (-1, 0, 1, 2) for e in range(2)]
    sweep = load_sweep(_sweep(tmp_path / "mspipe", "mspipe", rows))
    plot = next(p for p in sweep.spec.plots if p.x == "staleness")
    options = plot_options(sweep, plot)
    assert options.categorical_x
    fig, _top = sweep_figure(sweep.history, plot, options)
    assert len(fig.axes) == 4  # small multiples: (events/s, AP) x (mspipe, sequential)
    bottom = fig.axes[2]  # the AP row under MSPipe's events/s panel (x labels sit there)
    assert [t.get_text() for t in bottom.get_xticklabels()] == ["auto", "0", "1", "2"]
    assert bottom.get_xlabel() == "staleness bound k (versions)"
    ax = fig.axes[0]
    assert ax.lines
    for line in ax.lines:
        assert line.get_linestyle() == "None"  # categories are never joined by a line
        assert min(line.get_xdata()) > -0.5  # "auto" has a slot of its own, not x = -1
    plt.close(fig)


def test_log_axis_only_across_a_decade_with_plain_ticks_and_the_zero_line():
    spec = next(p for p in EXPERIMENTS["planner"].plots if p.y == "gap_to_baseline_pct")
    budgets = [8, 16, 40, 80, 160, 240]
    frame = pd.DataFrame({"trial_id": "t", "model": "gpt-1.3b", "budget_evals_used": budgets,
                          "gap_to_baseline_pct": [-3.0, -1.0, 0.5, 2.0, 4.0, 5.0]})
    fig, _top = sweep_figure(frame, spec, PlotOptions())
    ax = fig.axes[0]
    fig.canvas.draw()
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()] == [str(b) for b in
                                                                            budgets]
    assert any(list(line.get_ydata()) == [0, 0] for line in ax.lines)  # the zero line
    assert ax.get_ylabel() == "MCTS gain over the baseline plan (%)"
    plt.close(fig)
    fig, _top = sweep_figure(frame[frame["budget_evals_used"] >= 40], spec, PlotOptions())
    assert fig.axes[0].get_xscale() == "linear"  # 40-240 is under a decade
    plt.close(fig)


def test_many_overlapping_series_become_small_multiples():
    spec = next(p for p in EXPERIMENTS["pipeline"].plots if p.y == "hidden_link_fraction")
    frame = pd.DataFrame([{"trial_id": f"{s}{lat}", "schedule": s, "link_latency_ms": lat,
                           "hidden_link_fraction": 1.0, "bubble": 0.2}
                          for s in ("gpipe", "1f1b", "interleaved", "virtual-1f1b")
                          for lat in (0.0, 5.0, 20.0)])
    fig, _top = sweep_figure(frame, spec, PlotOptions())
    assert len(fig.axes) == 8  # (hidden, bubble) x four schedules, not one crowded panel
    assert {ax.get_title() for ax in fig.axes[:4]} == {
        "schedule: gpipe", "schedule: 1f1b", "schedule: interleaved", "schedule: virtual-1f1b"}
    plt.close(fig)


def test_page_escapes_html_and_keeps_code_spans():
    blocks = [Heading(1, "a <b>"), Text("run `hetray report x` <script>"),
              Table(("k", "v"), (("a|b", "<i>"),))]
    html = to_html(blocks, "t")
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "<code>hetray report x</code>" in html
    assert "| a/b | <i> |" in to_markdown(blocks)


def test_hetray_report_command_writes_both_pages(tmp_path):
    from click.testing import CliRunner

    from hetray.cli.main import cli

    _sweep(tmp_path / "sweeps" / "planner", "planner", _planner_rows(), {"budget_evals": [240]})
    result = CliRunner().invoke(cli, ["report", str(tmp_path / "sweeps"), "--out",
                                      str(tmp_path / "out"), "--benchmarks", str(BENCH_DIR)])
    assert result.exit_code == 0, result.output
    assert f"wrote {tmp_path / 'out' / HTML_PAGE} and {tmp_path / 'out' / 'report.md'}" in (
        result.output)
    html = (tmp_path / "out" / HTML_PAGE).read_text(encoding="utf-8")
    assert "Sweep planner" in html
    assert "Planner: MCTS against exhaustive search" in html
