"""The GPU check runs on a stack without DGL or Ray: its CPU rehearsal, with both blocked.

The lent GPU machine has torch, numpy 2 and scikit-learn but neither DGL nor Ray, so
``benchmarks/gpu_check.py`` and every hetray module it loads must import and run without
them. A child process makes ``import dgl`` and ``import ray`` fail (a ``None`` entry in
``sys.modules``), runs the check's CPU rehearsal and reports what it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys
sys.modules["dgl"] = None   # ``import dgl`` raises ImportError, as where DGL is absent
sys.modules["ray"] = None
sys.path.insert(0, "benchmarks")
import gpu_check
result = gpu_check.main(["--device", "cpu", "--tiny", "--out", sys.argv[1]])
loaded = sorted({m.split(".")[0] for m, mod in sys.modules.items() if mod is not None})
print("LOADED " + json.dumps(loaded))
"""


def test_the_gpu_check_rehearses_on_cpu_without_dgl_or_ray(tmp_path):
    out = tmp_path / "gpu.json"
    done = subprocess.run([sys.executable, "-c", CHILD, str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.rsplit("LOADED ", 1)[1])
    assert "dgl" not in loaded
    assert "ray" not in loaded
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["device_kind"] == "cpu"
    heta = result["heta"]
    assert heta["max_abs_param_diff"] == 0.0  # the same device twice: bit for bit
    assert heta["epoch_time_device_s"] > 0
    assert heta["epoch_speedup_vs_cpu"] > 0
    assert 0.0 < heta["test_acc_device"] <= 1.0
    mspipe = result["mspipe"]
    assert mspipe["ap_mspipe"] == mspipe["ap_sequential"]  # staleness bounded, same CPU maths
    assert mspipe["resident"]["ap"] == mspipe["ap_sequential"]  # the table's ops are copies
    assert mspipe["resident"]["speedup"] > 0
    assert mspipe["speedup"] > 0
    assert mspipe["ideal_speedup"] > 0
    pipeline = result["pipeline"]
    assert pipeline["max_abs_grad_diff"] < 1e-5  # two stages vs the unsplit model, fp32
    assert pipeline["tokens_per_s_device"] > 0
    profile = result["profile"]
    assert profile["num_points"] == 4
    assert profile["device_model"] == "CPU"
    assert profile["rf_mape_pct"] >= 0.0
    assert (tmp_path / "gpu_profile.json").is_file()
