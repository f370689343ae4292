"""``hetray finance``: pairs end to end in process, the graph command, a bad file's exit code."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.temporal.formats import LoadOptions, read_events
from hetray.temporal.loaders import EventFormat
from tests.progress import assert_progress_before
from tests.unit.finance.synthetic import synthetic_prices


def _csv(tmp_path):
    prices = synthetic_prices(end="2020-07-15")
    lines = ["Date," + ",".join(prices.tickers)]
    lines += [f"{d}," + ",".join(f"{v:.6f}" for v in row)
              for d, row in zip(prices.dates, prices.values, strict=True)]
    path = tmp_path / "prices.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_pairs_compares_methods_and_writes_parquet_and_the_chart(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [
        "finance", "pairs", "--prices", str(_csv(tmp_path)),
        "--method", "distance,cointegration", "--formation-months", "2",
        "--trading-months", "1", "--top", "3", "--local", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert_progress_before(result.output, "formation windows", "wrote ")
    assert "distance" in result.output
    assert "cointegration" in result.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert set(report["backtest"]) == {"distance", "cointegration"}
    assert set(report["backtest_0bps"]) == {"distance", "cointegration"}
    assert report["num_windows"] == 4
    for name in ("trades.parquet", "monthly.parquet", "equity.png"):
        assert (out / name).stat().st_size > 0


def test_graph_writes_an_event_stream_hetray_reads(tmp_path):
    path = tmp_path / "events.parquet"
    result = CliRunner().invoke(cli, ["finance", "graph", "--prices", str(_csv(tmp_path)),
                                      "--window", "10", "--top-k", "2", "--out", str(path)])
    assert result.exit_code == 0, result.output
    events = read_events(path, LoadOptions(format=EventFormat.PARQUET)).events
    assert events.num_nodes == 6
    assert events.edge_feat_dim == 9
    assert np.all(np.diff(events.t) >= 0)
    meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    assert np.array(meta["node_features"]).shape == (6, 1 + 2)  # "unknown" sector, vol, return


def test_a_bad_price_is_a_usage_error_naming_the_file(tmp_path):
    path = _csv(tmp_path)
    text = path.read_text(encoding="utf-8").splitlines()
    text[5] = text[5].split(",")[0] + ",-3" + text[5][text[5].index(",", 11):]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["finance", "pairs", "--prices", str(path), "--local"])
    assert result.exit_code == 2
    assert str(path) in result.output
    assert "-3" in result.output
