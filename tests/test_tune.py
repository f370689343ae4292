"""Scaling experiments under a real Ray Tune: trainables, resume, report, grid errors.

Sweeps run at ``--smoke`` sizes on the session's local Ray (4 logical CPUs); the resume test
runs ``hetray tune`` as a separate driver process on that Ray so it can be killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.experiments.grid import load_grid, smoke_grid
from hetray.experiments.registry import EXPERIMENTS
from hetray.experiments.report import render_report
from tests.conftest import REPO
from tests.progress import assert_progress_before

GRIDS = REPO / "examples" / "grids"


def _one_trial_grid(name: str, **pinned: object):
    grid = smoke_grid(load_grid(GRIDS / f"{name}.yaml", EXPERIMENTS), EXPERIMENTS[name])
    params = {k: v[:1] for k, v in grid.params.items()}
    params.update({k: [v] for k, v in pinned.items()})
    return replace(grid, params=params)


def _sweep(name: str, out: Path, **pinned: object):
    from hetray.actors.tune import run_sweep

    return run_sweep(_one_trial_grid(name, **pinned), out, max_concurrent=1, verbose=0)


@pytest.fixture(scope="module")
def planner_sweep(ray_shared, tmp_path_factory):
    return _sweep("planner", tmp_path_factory.mktemp("sweeps"))


@pytest.fixture(scope="module")
def sweep_factory(ray_shared, tmp_path_factory):
    def run(name: str, **pinned: object):
        return _sweep(name, tmp_path_factory.mktemp(name), **pinned)

    return run


def _assert_reports_metrics(outcome, name: str) -> None:
    spec = EXPERIMENTS[name]
    assert outcome.num_errors == 0
    assert len(outcome.table) == 1
    history = pd.read_parquet(outcome.sweep_dir / "history.parquet")
    assert len(history) >= 1
    for metric in spec.metrics:
        assert history[metric].notna().all(), metric
    for metric in (*spec.metrics, *spec.final_metrics):
        assert pd.notna(outcome.table[metric].iloc[0]), metric


def test_planner_trainable_reports_its_metrics(planner_sweep):
    _assert_reports_metrics(planner_sweep, "planner")
    history = pd.read_parquet(planner_sweep.sweep_dir / "history.parquet")
    rounds = EXPERIMENTS["planner"].params["num_rounds"].smoke
    assert len(history) == rounds
    assert history["budget_evals_used"].is_monotonic_increasing
    assert (history["predicted_tokens_per_s"] > 0).all()


def test_planner_trainable_runs_root_parallel_workers_on_ray(planner_sweep, sweep_factory):
    outcome = sweep_factory("planner", workers=2)
    _assert_reports_metrics(outcome, "planner")
    one = pd.read_parquet(planner_sweep.sweep_dir / "history.parquet")
    two = pd.read_parquet(outcome.sweep_dir / "history.parquet")
    # two trees (seeds s, s + 1) on two search-worker actors: both trees' plans are counted
    assert (two["budget_evals_used"].to_numpy() > one["budget_evals_used"].to_numpy()).all()
    assert (two["predicted_tokens_per_s"].to_numpy()
            >= one["predicted_tokens_per_s"].to_numpy()).all()


def test_pipeline_trainable_measures_the_emulated_link(sweep_factory):
    outcome = sweep_factory("pipeline", schedule="1f1b", link_latency_ms=20.0)
    _assert_reports_metrics(outcome, "pipeline")
    row = outcome.table.iloc[0]
    assert row["tokens_per_s"] > 0
    assert row["mb_cross_cluster"] > 0
    assert row["link_s"] > 0.02  # 8 messages x 20 ms over 2 directed hops
    assert 0.0 <= row["hidden_link_fraction"] <= 1.0
    assert 0.0 <= row["bubble"] < 1.0


def _placement_groups() -> dict[str, dict]:
    import ray

    return ray.util.placement_group_table()


def test_heta_trainable_runs_holder_actors(sweep_factory):
    before = set(_placement_groups())
    outcome = sweep_factory("heta", num_partitions=2)
    _assert_reports_metrics(outcome, "heta")
    row = outcome.table.iloc[0]
    assert row["mb_sent"] > 0  # two holders exchanged partial aggregates
    assert 0.0 <= row["test_acc"] <= 1.0
    assert row["link_delay_s"] > 0
    # the holders ran in the trial's own bundles: the trial's group is the only new one
    new = [pg for key, pg in _placement_groups().items() if key not in before]
    assert [list(pg["bundles"].values()) for pg in new] == [
        [{"CPU": 1.0}, {"CPU": 0.25}, {"CPU": 0.25}]]
    assert new[0]["strategy"] == "SPREAD"


def test_only_grids_with_own_placement_groups_limit_concurrency():
    from hetray.actors.tune import default_max_concurrent

    heta = _one_trial_grid("heta", num_partitions=4)
    assert default_max_concurrent(heta, 4.0) is None  # Tune fits trials by their bundles
    theory = _one_trial_grid("theory", worker_cpus=1.0)
    assert default_max_concurrent(theory, 4.0) == 2  # 1 CPU + the worker's own 1 CPU


def test_mspipe_trainable_runs_stage_actors(sweep_factory):
    outcome = sweep_factory("mspipe", mode="mspipe", staleness=-1, num_shards=1)
    _assert_reports_metrics(outcome, "mspipe")
    row = outcome.table.iloc[0]
    assert row["events_per_s"] > 0
    assert 0.0 < row["test_ap"] <= 1.0


def test_report_writes_nonblank_pngs_and_lists_every_trial(planner_sweep, tmp_path):
    page = render_report(planner_sweep.sweep_dir, tmp_path / "report", None)
    text = page.read_text(encoding="utf-8")
    pngs = sorted((tmp_path / "report").glob("*.png"))
    assert [p.name for p in pngs] == sorted(p.filename for p in EXPERIMENTS["planner"].plots)
    for png in pngs:
        pixels = mpimg.imread(png)
        assert pixels.ndim == 3
        assert pixels.shape[0] > 100
        assert pixels[..., :3].std() > 0.05, f"{png.name} looks blank"
        assert f"]({png.name})" in text
    for trial_id in planner_sweep.table["trial_id"]:
        assert f"| {trial_id} |" in text


def test_bad_grid_gives_one_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("experiment: planner\nparams:\n  budget_evalz: [10]\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["tune", "planner", "--grid", str(bad)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert str(bad) in result.output
    assert "params.budget_evalz" in result.output
    assert "budget_evals" in result.output  # lists the valid parameters

    bad.write_text("experiment: planner\nparams:\n  model: [gpt-1.3b, gpt-9000]\n",
                   encoding="utf-8")
    result = CliRunner().invoke(cli, ["tune", "planner", "--grid", str(bad)])
    assert result.exit_code == 2
    assert "params.model" in result.output
    assert "'gpt-9000'" in result.output


RESUME_GRID = """experiment: planner
params:
  model: gpt-1.3b
  global_batch: 64
  num_rounds: 3
  budget_evals: [30, 400, 401]
"""


def _terminated(sweep_dir: Path) -> list[str]:
    states = sorted(sweep_dir.glob("experiment_state-*.json"))
    if not states:
        return []
    try:
        data = json.loads(states[-1].read_text(encoding="utf-8"))
    except json.JSONDecodeError:  # caught mid-write
        return []
    trials = [json.loads(t[0]) for t in data["trial_data"]]
    return [t["trial_id"] for t in trials if t["status"] == "TERMINATED"]


def _hetray(*args: str) -> list[str]:
    return [sys.executable, "-m", "hetray.cli", *args]


@pytest.mark.slow  # about a minute on 2 cores; test_a_killed_planner_trial_resumes_... stays in
def test_resume_continues_an_interrupted_sweep(ray_shared, tmp_path):
    import ray

    address = ray.get_runtime_context().gcs_address  # the sweeps join the session's Ray
    grid = tmp_path / "grid.yaml"
    grid.write_text(RESUME_GRID, encoding="utf-8")
    out, sweep_dir = tmp_path / "out", tmp_path / "out" / "planner"
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "0"}
    first = subprocess.Popen(_hetray("tune", "planner", "--grid", str(grid), "--out", str(out),
                                     "--max-concurrent", "1", "--verbose", "0",
                                     "--address", address),
                             env=env, cwd=REPO, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 150
        while not _terminated(sweep_dir) and first.poll() is None:
            assert time.monotonic() < deadline, "first trial did not finish in time"
            time.sleep(0.2)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    done = _terminated(sweep_dir)
    assert len(done) == 1
    assert not (sweep_dir / "results.parquet").exists()
    done_dir = next(sweep_dir.glob(f"*{done[0]}*"))
    lines_before = (done_dir / "result.json").read_text(encoding="utf-8")

    resumed = subprocess.run(_hetray("tune", "planner", "--out", str(out), "--resume",
                                     "--address", address),
                             env=env, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    table = pd.read_parquet(sweep_dir / "results.parquet")
    assert sorted(table["config/budget_evals"]) == [30, 400, 401]
    assert (table["training_iteration"] == 3).all()
    assert (done_dir / "result.json").read_text(encoding="utf-8") == lines_before


def test_a_sweep_from_the_cli_shows_tune_progress_before_its_table(ray_shared, tmp_path):
    """``hetray tune`` prints Tune's trial status while it runs, then the result table."""
    grid = tmp_path / "one.yaml"
    grid.write_text("experiment: planner\nparams: {model: gpt-1.3b, budget_evals: 16, "
                    "num_rounds: 2}\nresources: {cpus: 1}\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["tune", "planner", "--grid", str(grid), "--out",
                                      str(tmp_path / "sweeps")])
    assert result.exit_code == 0, result.output
    assert_progress_before(result.output, "Trial status:", "wrote ")


# --- checkpoints: a killed trial resumes after its last report ---------------------------

#: Four planner rounds of 200 .. 800 MCTS evaluations (about 0.3 s .. 1.2 s each here): the
#: trial is killed as soon as its first report shows in its ``result.json`` (by then it has
#: often made its second: the kill lands after round 1, 2 or 3).
KILLED_PLANNER = {"budget_evals": 800, "num_rounds": 4, "global_batch": 64, "seed": 3}
#: Metrics that are functions of the config and seed (``search_s`` is a wall time).
PLANNER_EXACT = ("budget_evals_used", "predicted_tokens_per_s", "baseline_tokens_per_s",
                 "gap_to_baseline_pct")


def _result_lines(sweep_dir: Path) -> list[dict]:
    lines = []
    for path in sweep_dir.glob("*/result.json"):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # caught mid-write
                lines.append(json.loads(line))
    return lines


def _kill_after_first_report(sweep_dir: Path, killed: list[int], deadline_s: float) -> None:
    """SIGKILL the trial's process (the ``pid`` of its first result) as soon as it reports."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        lines = _result_lines(sweep_dir)
        if lines:
            killed.append(int(lines[0]["pid"]))
            os.kill(killed[0], signal.SIGKILL)
            return
        time.sleep(0.02)


def _killed_mid_way(name: str, out: Path, pinned: dict, iterations: int) -> tuple[list, dict]:
    """One trial of ``name`` whose process is killed after its first report, then retried.

    Returns its ``result.json`` rows by iteration and the trial's config. Asserts that the
    kill landed mid-way and that the retry repeated no iteration and restarted none at 1.
    """
    from hetray.actors.tune import run_sweep

    grid = _one_trial_grid(name, **pinned)
    killed: list[int] = []
    watcher = threading.Thread(target=_kill_after_first_report,
                               args=(out / name, killed, 120.0), daemon=True)
    watcher.start()
    outcome = run_sweep(grid, out, max_concurrent=1, verbose=0, max_failures=1)
    watcher.join()
    assert killed, "the trial never reported"
    assert outcome.num_errors == 0
    lines = sorted(_result_lines(outcome.sweep_dir), key=lambda r: r["training_iteration"])
    seen = [r["training_iteration"] for r in lines]
    assert len(seen) - len(set(seen)) == 0, f"repeated iterations: {seen}"
    assert seen == list(range(1, iterations + 1))  # none restarted at 1
    pids = [r["pid"] for r in lines]
    before = pids.count(killed[0])  # iterations the killed process reported
    assert 1 <= before < iterations, f"the kill did not land mid-way (pids {pids})"
    assert pids[:before] == [killed[0]] * before
    assert len(set(pids[before:])) == 1  # the rest ran in one new process
    assert any(outcome.sweep_dir.glob("*/checkpoint_*")), "no trial checkpoint was kept"
    history = pd.read_parquet(outcome.sweep_dir / "history.parquet")
    assert sorted(history["training_iteration"]) == seen
    return lines, {k: v[0] for k, v in grid.params.items()}


def test_a_killed_planner_trial_resumes_from_its_checkpoint(ray_shared, tmp_path):
    """Kill the trial's process mid-way: it resumes after its last report, repeats nothing.

    Tune retries the trial (``FailureConfig``) from its latest checkpoint; the resumed
    process continues with the next round, and every round's metrics equal an uninterrupted
    in-process run's.
    """
    from hetray.experiments.planner import run_planner_trial

    lines, config = _killed_mid_way("planner", tmp_path, KILLED_PLANNER, 4)
    reference: list[dict] = []
    run_planner_trial(config, reference.append, None)
    for key in PLANNER_EXACT:
        assert [r[key] for r in lines] == [r[key] for r in reference], key


#: Six steps over a 40 ms link (a few tenths of a second each): killed after its first.
KILLED_PIPELINE = {"steps": 6, "num_layers": 2, "hidden": 16, "seq_len": 8,
                   "link_latency_ms": 40.0, "schedule": "1f1b", "num_microbatches": 8}


@pytest.mark.slow
def test_a_killed_pipeline_trial_continues_its_loss_curve(ray_shared, tmp_path):
    """The pipeline trial, killed mid-way, resumes both pipelines' states: same losses."""
    from hetray.experiments.pipeline import run_pipeline_trial

    lines, config = _killed_mid_way("pipeline", tmp_path, KILLED_PIPELINE, 6)
    reference: list[dict] = []
    run_pipeline_trial(config, reference.append, None)
    assert [r["loss"] for r in lines] == [r["loss"] for r in reference]


def test_trial_state_round_trip_and_hostile_state_files(tmp_path):
    import torch

    from hetray.core.errors import ConfigError
    from hetray.experiments.session import (
        STATE_FILE,
        TENSORS_FILE,
        TrialState,
        read_state,
        write_state,
    )

    state = TrialState(iteration=2, values={"round": 2}, tensors={"w": torch.arange(3.0)})
    write_state(state, tmp_path)
    back = read_state(tmp_path)
    assert (back.iteration, back.values) == (2, {"round": 2})
    assert torch.equal(back.tensors["w"], torch.arange(3.0))

    (tmp_path / STATE_FILE).write_text('{"iteration": "two"', encoding="utf-8")
    with pytest.raises(ConfigError, match=STATE_FILE):
        read_state(tmp_path)
    (tmp_path / STATE_FILE).write_text('{"iteration": 1, "values": {}}', encoding="utf-8")
    torch.save({"code": os.system}, tmp_path / TENSORS_FILE)  # names code: never loaded
    with pytest.raises(ConfigError, match=TENSORS_FILE):
        read_state(tmp_path)


def test_a_stopped_pipeline_trial_continues_the_same_loss_curve():
    """In-process: stopped after report 2, restored from its state, the losses continue."""
    from hetray.experiments.pipeline import run_pipeline_trial
    from hetray.experiments.session import MemorySession, TrialStopped

    config = {"steps": 3, "num_layers": 2, "hidden": 16, "seq_len": 8,
              "link_latency_ms": 1.0, "schedule": "1f1b"}
    whole = MemorySession()
    run_pipeline_trial(config, whole, None)
    stopped = MemorySession(stop_after=2)
    with pytest.raises(TrialStopped):
        run_pipeline_trial(config, stopped, None)
    assert stopped.saved is not None
    assert stopped.saved.iteration == 2
    resumed = MemorySession(saved=stopped.saved)
    run_pipeline_trial(config, resumed, None)
    assert len(resumed.rows) == 1  # only step 3 ran again
    assert [r["loss"] for r in stopped.rows + resumed.rows] == [r["loss"] for r in whole.rows]
