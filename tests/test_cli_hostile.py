"""Hostile config files through the real CLI: each ends in one line naming the file, exit 2.

The cases are the ones a review found to hang, exhaust memory, or end in a traceback: YAML
alias bombs, counts of 10**12, duplicate keys, non-finite numbers, plans whose layers
overlap or leave gaps, whose dp exceeds their devices, with strings for numbers or zero
micro-batches, and truncated files. Python allocations during each case are bounded with
tracemalloc (an alias bomb or a 10**12-node allocation would blow far past the bound).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from hetray.cli.main import cli
from hetray.experiments.registry import experiment_spec
from hetray.graph import synthetic_mag, write_parquet
from hetray.pipeline.schedules import Schedule
from hetray.planner.handoff import default_plan, local_spec
from hetray.planner.plan import plan_to_json
from tests.conftest import REPO
from tests.payload import Payload

SPEC = (REPO / "cluster_configs/specs/two-cluster-16.yaml").read_text(encoding="utf-8")
#: Most bytes Python may allocate while one case runs.
MAX_ALLOCATED_BYTES = 500 * 2**20
#: 9 levels of 9 references: 9**9 (387 million) list items once expanded.
ALIAS_BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True))


def _plan(**changes: object) -> str:
    """A valid 2-stage plan for gpt-tiny (4 layers) with top-level ``changes``."""
    plan = default_plan(local_spec(), 4, schedule=Schedule.ONE_F_ONE_B, num_microbatches=2,
                        microbatch_size=2)
    data = json.loads(plan_to_json(plan))
    stages = changes.pop("stages", None)
    if callable(stages):
        stages(data["stages"])
    return json.dumps({**data, **changes})


def _overlap(stages: list[dict]) -> None:
    stages[1]["layer_start"] = 1


def _gap(stages: list[dict]) -> None:
    stages[1]["layer_start"] = 3


def _dp(stages: list[dict]) -> None:
    stages[0]["dp"] = 64


def _plan_command(path: Path) -> list[str]:
    return ["train", "pipeline", "--plan", str(path), "--model", "gpt-tiny", "--steps", "1"]


def _plan_command_with_spec(path: Path) -> list[str]:
    return [*_plan_command(path), "--cluster",
            str(REPO / "cluster_configs/specs/two-cluster-16.yaml")]


def _spec_command(path: Path) -> list[str]:
    return ["plan", "--cluster", str(path), "--budget-s", "3"]


def _tune_command(experiment: str) -> Callable[[Path], list[str]]:
    return lambda path: ["tune", experiment, "--grid", str(path), "--out",
                         str(path.parent / "sweeps")]


def _measurements_command(path: Path) -> list[str]:
    return ["plan", "--measurements", str(path), "--budget-s", "1"]


CASES = {
    "spec-alias-bomb": ("spec.yaml", ALIAS_BOMB + "schema_version: *i\n", _spec_command),
    "grid-alias-bomb": ("grid.yaml", ALIAS_BOMB + "experiment: planner\nparams: {seed: *i}\n",
                        _tune_command("planner")),
    "spec-10e12-nodes": ("spec.yaml", SPEC.replace("num_nodes: 2", "num_nodes: 1000000000000",
                                                   1), _spec_command),
    "spec-duplicate-key": ("spec.yaml", SPEC.replace("name: two-cluster-16", "name: a\nname: b"),
                           _spec_command),
    "spec-infinite-latency": ("spec.yaml", SPEC.replace("latency_s: 1.0e-3", "latency_s: .inf"),
                              _spec_command),
    "grid-10e12-evals": ("grid.yaml", "experiment: planner\nparams: {budget_evals: 1000000000000}",
                         _tune_command("planner")),
    "grid-10e9-epochs": ("grid.yaml", "experiment: mspipe\nparams: {epochs: 1000000000}",
                         _tune_command("mspipe")),
    "grid-nan-link": ("grid.yaml", "experiment: pipeline\nparams: {link_gbps: [.nan, 1.0]}",
                      _tune_command("pipeline")),
    "grid-nan-string": ("grid.yaml", "experiment: pipeline\nparams: {link_gbps: ['nan']}",
                        _tune_command("pipeline")),
    "plan-10e9-microbatches": ("plan.json", _plan(num_microbatches=10**9), _plan_command),
    "plan-10e9-microbatches-spec": ("plan.json", _plan(num_microbatches=10**9),
                                    _plan_command_with_spec),
    "plan-overlapping-layers": ("plan.json", _plan(stages=_overlap), _plan_command),
    "plan-gap-in-layers": ("plan.json", _plan(stages=_gap), _plan_command),
    "plan-dp-over-devices": ("plan.json", _plan(stages=_dp), _plan_command),
    "plan-batch-as-string": ("plan.json", _plan(global_batch="4"), _plan_command),
    "plan-zero-microbatches": ("plan.json", _plan(num_microbatches=0), _plan_command),
    "plan-truncated": ("plan.json", _plan()[:90], _plan_command),
    "measurements-truncated": ("m.json", '{"records": [{"device_model": "CPU", "lay',
                               _measurements_command),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_file_ends_in_one_line_naming_it(name, tmp_path):
    file_name, text, command = CASES[name]
    path = tmp_path / file_name
    path.write_text(text, encoding="utf-8")
    args = command(path)
    if args[0] == "tune":  # its modules load outside the measurement: the input's cost counts
        experiment_spec(args[1])
    tracemalloc.start()
    try:
        result = CliRunner().invoke(cli, args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {path}"), lines[0]
    assert len(lines[0]) < 600
    assert peak < MAX_ALLOCATED_BYTES


#: Set to run every case as a real ``hetray`` process, bounding its wall time and peak RSS.
SUBPROCESS_ENV = "HETRAY_HOSTILE_SUBPROCESS"
MAX_WALL_S = 5.0
MAX_RSS_BYTES = 500 * 2**20
#: GNU time, which measures a child's own peak RSS (:func:`run_capturing`).
GNU_TIME = shutil.which("time", path="/usr/bin:/bin")


@pytest.mark.skipif(not os.environ.get(SUBPROCESS_ENV),
                    reason=f"set {SUBPROCESS_ENV}=1 to run each case as a hetray process")
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_file_as_a_process_within_5_s_and_500_mb(name, tmp_path):
    file_name, text, command = CASES[name]
    path = tmp_path / file_name
    path.write_text(text, encoding="utf-8")
    wall_s, rss, code, stderr = run_measured([sys.executable, "-m", "hetray.cli",
                                              *command(path)])
    print(f"{name}: rc {code}, {wall_s:.2f} s, {rss / 2**20:.0f} MB")
    assert code == 2, stderr
    assert wall_s < MAX_WALL_S
    assert rss < MAX_RSS_BYTES


def run_measured(argv: list[str]) -> tuple[float, int, int, str]:
    """Run ``argv``; its wall seconds, peak RSS bytes (``wait4``), exit code and stderr."""
    wall_s, rss, code, _, stderr = run_capturing(argv)
    return wall_s, rss, code, stderr


def run_capturing(argv: list[str]) -> tuple[float, int, int, str, str]:
    """Run ``argv``; wall seconds, peak RSS bytes, exit code, stdout, stderr.

    The peak RSS is GNU time's (``/usr/bin/time -f %M``) when it is installed: a child forked
    from this large pytest process would otherwise count this process's pages too (Linux
    folds the pre-``exec`` peak into ``ru_maxrss``); else ``wait4``'s, an upper bound.
    """
    began = time.perf_counter()
    with (tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err,
          tempfile.NamedTemporaryFile("r") as peak):
        timed = [GNU_TIME, "-q", "-f", "%M", "-o", peak.name, *argv] if GNU_TIME else argv
        process = subprocess.Popen(timed, stdout=out, stderr=err, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        rss = int(peak.read().split()[-1]) * 1024 if GNU_TIME else usage.ru_maxrss * 1024
        out.seek(0)
        err.seek(0)
        stdout, stderr = (f.read().decode(errors="replace") for f in (out, err))
    return time.perf_counter() - began, rss, process.returncode, stdout, stderr


def _tgl_payload(root: Path) -> Path:
    (root / "edges.csv").write_text(",src,dst,time,ext_roll\n0,0,1,1,0\n1,1,2,2,0\n")
    torch.save({"feat": Payload(root / "PWNED")}, root / "edge_features.pt")
    return root / "edges.csv"


def _bitcoin_bad_row(root: Path) -> Path:
    rows = [f"{i},{i + 1},1,{1000 + i}" for i in range(60)]
    rows[50] = "50,51,x,1050"
    (root / "soc-sign-bitcoinotc.csv").write_text("\n".join(rows) + "\n")
    return root / "soc-sign-bitcoinotc.csv"


def _parquet_huge_ids(root: Path) -> Path:
    pq.write_table(pa.table({"src": [0, 10**12], "dst": [1, 2], "t": [1.0, 2.0]}),
                   root / "events.parquet")
    return root / "events.parquet"


def _parquet_truncated(root: Path) -> Path:
    pq.write_table(pa.table({"src": [0, 1], "dst": [1, 2], "t": [1.0, 2.0]}),
                   root / "events.parquet")
    data = (root / "events.parquet").read_bytes()
    (root / "events.parquet").write_bytes(data[: len(data) // 2])
    return root / "events.parquet"


def _hetero_nan_feature(root: Path) -> Path:
    graph = synthetic_mag(num_edges=10_000, seed=1)
    write_parquet(graph, root)
    path = root / "nodes" / "paper.parquet"
    feat = graph.features["paper"].clone()
    feat[7, 3] = float("nan")
    table = pq.read_table(path)
    column = pa.FixedSizeListArray.from_arrays(pa.array(feat.reshape(-1).numpy()), feat.shape[1])
    pq.write_table(table.set_column(table.column_names.index("feat"), "feat", column), path)
    return root


def _hetero_truncated_schema(root: Path) -> Path:
    write_parquet(synthetic_mag(num_edges=10_000, seed=1), root)
    text = (root / "schema.json").read_text()
    (root / "schema.json").write_text(text[: len(text) // 2])
    return root


#: Data files through ``hetray train``: (make the file in a folder -> the --dataset value,
#: the command, the modules that must not have loaded when the file is refused).
DATA_CASES: dict[str, tuple[Callable[[Path], Path], list[str], tuple[str, ...]]] = {
    "tgl-pickle-payload": (_tgl_payload, ["mspipe", "--pipeline", "sequential"],
                           ("torch", "dgl", "ray", "sklearn")),
    "bitcoin-bad-row": (_bitcoin_bad_row, ["mspipe", "--pipeline", "sequential"],
                        ("torch", "dgl", "ray", "sklearn")),
    "events-ids-10e12": (_parquet_huge_ids, ["mspipe"], ("torch", "dgl", "ray", "sklearn")),
    "events-truncated-parquet": (_parquet_truncated, ["mspipe"],
                                 ("torch", "dgl", "ray", "sklearn")),
    # Heta's loaders build torch tensors (torch loads); DGL and Ray only after the checks.
    "hetero-nan-feature": (_hetero_nan_feature, ["heta"], ("dgl", "ray", "sklearn")),
    "hetero-truncated-schema": (_hetero_truncated_schema, ["heta"], ("dgl", "ray", "sklearn")),
}
#: Runs ``hetray`` in a child process, then prints which heavy modules it had loaded.
_CLI_THEN_MODULES = (
    "import sys\nfrom hetray.cli.main import cli\ntry:\n    cli(sys.argv[1:])\n"
    "except SystemExit as exit_:\n    code = exit_.code\n"
    "print(sorted(m for m in ('torch', 'dgl', 'ray', 'sklearn') if m in sys.modules))\n"
    "sys.exit(code)\n")


#: The data cases ``make test`` runs (each is a child process, 3-5 s); the rest run with
#: ``$HETRAY_HOSTILE_SUBPROCESS`` set, as do the time and memory bounds.
DEFAULT_DATA_CASES = ("tgl-pickle-payload", "hetero-nan-feature")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[] if name in DEFAULT_DATA_CASES or os.environ.get(SUBPROCESS_ENV)
                 else [pytest.mark.skip(reason=f"set {SUBPROCESS_ENV}=1 to run every case")])
    for name in sorted(DATA_CASES)])
def test_a_bad_data_file_is_refused_before_heavy_modules_load(name, tmp_path):
    """One line naming the file, exit 2, nothing executed, and (opt-in) within 5 s and 500 MB."""
    make, command, absent = DATA_CASES[name]
    dataset = make(tmp_path)
    wall_s, rss, code, stdout, stderr = run_capturing(
        [sys.executable, "-c", _CLI_THEN_MODULES, "train", *command, "--address", "local",
         "--dataset", str(dataset), "--epochs", "1"])
    lines = [line for line in stderr.splitlines() if line.strip()]
    print(f"{name}: rc {code}, {wall_s:.2f} s, {rss / 2**20:.0f} MB")
    assert code == 2, stderr
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"error: {tmp_path}"), stderr
    assert not (tmp_path / "PWNED").exists()
    loaded = set(json.loads(stdout.strip().splitlines()[-1].replace("'", '"')))
    assert not loaded & set(absent), loaded
    if os.environ.get(SUBPROCESS_ENV):
        assert wall_s < MAX_WALL_S
        assert rss < MAX_RSS_BYTES
