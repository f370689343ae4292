"""The GPU check: one prepared script that measures hetray's GPU paths on a lent accelerator.

It runs hetray's core in-process (the run APIs' local backends: threads, not actors),
because the lent machine has CUDA, torch and numpy 2 but neither Ray nor DGL. Nothing it
imports may need them: ``tests/test_gpu_check.py`` imports this script with both blocked and
runs its CPU rehearsal (``--device cpu --tiny``).

Sections (``--sections``, all by default):

* ``heta``: RAF training on 2 in-process holders (synthetic mag, the ogbn-mag recipe of
  ``benchmarks/heta.py``) on the GPU and on the CPU, interleaved: median epoch time after the
  first epoch of each, ``heta.epoch_speedup_vs_cpu`` and both test accuracies; then a float64
  exactness cell (4 steps on both devices) giving ``heta.max_abs_param_diff``.
* ``mspipe``: TGN on CollegeMsg (``--dataset``; synthetic with ``--tiny``), sequential and
  MSPipe through the run API's in-process backend, as a GPU user runs it (sampler, features
  and memory-store shards as workers on the host, the trainer worker's model and Adam state
  on the GPU): ``mspipe.speedup`` (training events/s), ``mspipe.ideal_speedup`` (sequential
  ms per batch over MSPipe's slowest stage, as in ``benchmarks/mspipe.py``),
  ``mspipe.fraction_of_ideal`` and both test APs (``mspipe.ap_sequential``,
  ``mspipe.ap_mspipe``); then a third run, MSPipe with the node memory resident on the GPU
  inside the trainer (``memory.resident: device``, no shard workers):
  ``mspipe.resident.speedup`` over sequential and its AP (``mspipe.resident.ap``).
* ``pipeline``: a 2-stage 1F1B GPT pipeline with both stage workers in this process on one
  GPU (each on its own CUDA stream; activations hop through host memory as between actors)
  against the same pipeline on the CPU: ``pipeline.tokens_per_s_device`` / ``_cpu`` and
  their ratio, and in ``--precision`` (bf16 by default: ``pipeline.tokens_per_s_device_bf16``,
  autocast over fp32 parameters); and one fp32 step's gradients against the unsplit model on
  the same device (``pipeline.max_abs_grad_diff``).
* ``profile``: ``hetray profile``'s transformer-layer grid timed on the device (CUDA events,
  ``--precision``, bf16 by default on a GPU), the random forest's held-out MAPE
  (``profile.rf_mape_pct``) against the analytical model's, and the measurements written
  beside the JSON (``gpu_profile.json``) for ``hetray plan --measurements``.

Usage::

    python benchmarks/gpu_check.py                      # on the GPU, about 3 minutes
    python benchmarks/gpu_check.py --device cpu --tiny  # the CPU rehearsal, under a minute
    python benchmarks/gpu_check.py --sections profile --out /tmp/gpu.json
    python benchmarks/gpu_check.py --dataset tmp/data/CollegeMsg.txt   # data carried along
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from hetray.accel.precision import resolve_device
from hetray.accel.specs import DeviceChoice, Precision
from hetray.core.phases import phase
from hetray.graph import synthetic_mag
from hetray.graph.hetero import HeteroGraph
from hetray.heta.collective import LocalCollective
from hetray.heta.config import HolderConfig, Mode, ModelConfig, RunConfig, TrainConfig
from hetray.heta.holder import HolderCore
from hetray.heta.run import RunReport, run
from hetray.models.gpt_config import GPTConfig
from hetray.mspipe.config import (
    SYNTHETIC,
    DataConfig,
    MemoryPlacement,
    MemoryResidence,
    ModelChoice,
)
from hetray.mspipe.config import RunConfig as MSPipeRunConfig
from hetray.mspipe.config import TrainConfig as MSPipeTrainConfig
from hetray.mspipe.run import run as run_mspipe
from hetray.mspipe.staleness import PipelineConfig as MSPipeConfig
from hetray.mspipe.staleness import PipelineMode
from hetray.pipeline.data import synthetic_batch
from hetray.pipeline.reference import ReferenceTrainer
from hetray.pipeline.run import PipelineConfig, ResourceConfig, StageConfig
from hetray.pipeline.run import RunConfig as PipelineRunConfig
from hetray.pipeline.run import TrainConfig as PipelineTrainConfig
from hetray.pipeline.run import run as run_pipeline
from hetray.pipeline.run import start as start_pipeline
from hetray.pipeline.schedules import Schedule
from hetray.planner.measurements import save_measurements
from hetray.planner.profile import ProfileConfig, run_profile
from hetray.planner.rf_model import fit_with_holdout
from hetray.temporal.model_config import ModelKind
from hetray.temporal.synthetic import SyntheticConfig

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results" / "gpu.json"
COLLEGEMSG = REPO.parent / "shared" / "data" / "collegemsg" / "CollegeMsg.txt"
EXACT_STEPS = 4

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    """How big each section runs.

    Attributes:
        heta_edges: synthetic mag edges.
        heta_epochs: epochs per device (the first is dropped from the median).
        heta_repeats: interleaved runs per device.
        mspipe_epochs: training epochs of each MSPipe and sequential run.
        pipeline_model: (layers, hidden, heads, sequence length, vocabulary) of the GPT.
        pipeline_steps: training steps per device (the first is dropped from the median).
        profile_grid: (micro-batches, sequence lengths, hidden sizes) of the layer grid.
        profile_repeats: timed passes per grid point.
    """

    heta_edges: int
    heta_epochs: int
    heta_repeats: int
    mspipe_epochs: int
    pipeline_model: tuple[int, int, int, int, int]
    pipeline_steps: int
    profile_grid: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    profile_repeats: int


FULL = Sizes(heta_edges=2_000_000, heta_epochs=4, heta_repeats=2, mspipe_epochs=3,
             pipeline_model=(8, 1024, 16, 512, 8192), pipeline_steps=6,
             profile_grid=((1, 2, 4, 8), (128, 256, 512, 1024), (256, 512, 1024, 2048)),
             profile_repeats=10)
TINY = Sizes(heta_edges=10_000, heta_epochs=2, heta_repeats=1, mspipe_epochs=1,
             pipeline_model=(2, 16, 2, 8, 32), pipeline_steps=2,
             profile_grid=((1, 2), (16,), (32, 64)), profile_repeats=2)


def heta_train(device: DeviceChoice, precision: Precision, epochs: int) -> TrainConfig:
    """The ogbn-mag recipe of ``benchmarks/heta.py`` on ``device``."""
    return TrainConfig(model=ModelConfig(hidden_dim=64, fanouts=(25, 20)), batch_size=1024,
                       epochs=epochs, select_best=False, device=device, precision=precision)


def _median_epoch_s(reports: list[RunReport]) -> float:
    """Median epoch seconds after each run's first epoch (start-up and warm-up excluded)."""
    return statistics.median(e.epoch_time_s for r in reports for e in (r.epochs[1:] or r.epochs))


def heta_section(device: DeviceChoice, precision: Precision, sizes: Sizes) -> dict[str, object]:
    """RAF holders on ``device`` vs on the CPU: epoch time, accuracy, float64 exactness."""
    hg = synthetic_mag(num_edges=sizes.heta_edges, seed=0)
    sides = {"cpu": heta_train(DeviceChoice.CPU, Precision.FP32, sizes.heta_epochs),
             "device": heta_train(device, precision, sizes.heta_epochs)}
    runs: dict[str, list[RunReport]] = {side: [] for side in sides}
    for _ in range(sizes.heta_repeats):  # interleaved, so drift hits both sides
        for side, train in sides.items():
            runs[side].append(run(RunConfig(dataset=hg.name, num_partitions=2, train=train),
                                  graph=hg))
    cpu_s, device_s = _median_epoch_s(runs["cpu"]), _median_epoch_s(runs["device"])
    return {"edges": sizes.heta_edges, "partitions": 2, "precision": precision.value,
            "epoch_time_cpu_s": cpu_s, "epoch_time_device_s": device_s,
            "epoch_speedup_vs_cpu": cpu_s / device_s,
            "test_acc_cpu": runs["cpu"][-1].test_acc,
            "test_acc_device": runs["device"][-1].test_acc,
            "max_abs_param_diff": heta_exactness(hg, device)}


def heta_exactness(hg: HeteroGraph, device: DeviceChoice) -> float:
    """Largest parameter difference after :data:`EXACT_STEPS` float64 steps, device vs CPU."""
    model = ModelConfig(hidden_dim=16, fanouts=(4, 3), seed=1, float64=True, dropout=0.3)
    params = [_holder_params(hg, TrainConfig(model=model, batch_size=64, lr=0.02, device=side))
              for side in (DeviceChoice.CPU, device)]
    return max(float((params[0][k] - params[1][k]).abs().max()) for k in params[0])


def _holder_params(hg: HeteroGraph, train: TrainConfig) -> dict[str, torch.Tensor]:
    """Parameters (on the host) of one RAF holder with every subtree after the first steps."""
    core = HolderCore(hg, HolderConfig(mode=Mode.RAF, train=train, num_partitions=1), 0)
    coll = LocalCollective()  # one holder with every subtree
    for step, seeds in enumerate(train.batches(hg.train_idx, 0)[:EXACT_STEPS]):
        core.train_step(seeds, step, coll)
    return {k: v.cpu() for k, v in core.parameters().items()}


def mspipe_section(device: DeviceChoice, dataset: str, sizes: Sizes) -> dict[str, object]:
    """Sequential vs MSPipe TGN with the trainer on ``device``: speed-up, its ideal, APs.

    A third run keeps the node memory on ``device`` inside the trainer (one store, no shards).
    """
    data = (DataConfig(dataset=SYNTHETIC, synthetic=SyntheticConfig(num_events=3000,
                                                                    num_nodes=200))
            if dataset == SYNTHETIC else DataConfig(dataset=dataset))
    base = MSPipeRunConfig(data=data, model=ModelChoice(kind=ModelKind.TGN),
                           train=MSPipeTrainConfig(epochs=sizes.mspipe_epochs, batch_size=600,
                                                   device=device))
    seq = run_mspipe(replace(base, pipeline=MSPipeConfig(mode=PipelineMode.SEQUENTIAL)))
    pipe = run_mspipe(base)
    resident = run_mspipe(replace(base, memory=MemoryPlacement(resident=MemoryResidence.DEVICE),
                                  store=replace(base.store, num_shards=1)))
    seq_ms = 1000 * seq.train_wall_s / max(seq.num_train_batches, 1)
    stages = pipe.stage_ms_per_batch
    slowest = max(stages["sample"], stages["feature"], stages["fetch"] + stages["write"],
                  stages["train"])
    speedup = pipe.train_events_per_s / seq.train_events_per_s
    return {"dataset": dataset, "epochs": sizes.mspipe_epochs, "speedup": speedup,
            "ideal_speedup": seq_ms / slowest, "fraction_of_ideal": speedup * slowest / seq_ms,
            "events_per_s_sequential": seq.train_events_per_s,
            "events_per_s_mspipe": pipe.train_events_per_s,
            "ap_sequential": seq.test.ap, "ap_mspipe": pipe.test.ap,
            "mspipe_stage_ms_per_batch": stages,
            "resident": {"speedup": resident.train_events_per_s / seq.train_events_per_s,
                         "events_per_s": resident.train_events_per_s, "ap": resident.test.ap,
                         "stage_ms_per_batch": resident.stage_ms_per_batch}}


def pipeline_config(sizes: Sizes, device: DeviceChoice,
                    precision: Precision = Precision.FP32) -> PipelineRunConfig:
    """Two stages of half the layers each, 8 micro-batches of 2 sequences, 1F1B, Adam."""
    layers, hidden, heads, seq_len, vocab = sizes.pipeline_model
    model = GPTConfig(num_layers=layers, hidden=hidden, heads=heads, seq_len=seq_len,
                      vocab=vocab, ffn=4 * hidden)
    stages = tuple(StageConfig(layers=layers // 2, shares=(2,)) for _ in range(2))
    return PipelineRunConfig(
        model=model, pipeline=PipelineConfig(schedule=Schedule.ONE_F_ONE_B, num_microbatches=8,
                                             num_chunks=1, stages=stages, links=()),
        train=PipelineTrainConfig(steps=sizes.pipeline_steps, keep_state=False,
                                  precision=precision),
        resources=ResourceConfig(device=device))


def pipeline_section(device: DeviceChoice, precision: Precision,
                     sizes: Sizes) -> dict[str, object]:
    """Tokens/s of the 2-stage pipeline on the CPU and on ``device`` (fp32 and ``precision``).

    Also one fp32 step's gradients against the unsplit model on ``device``.
    """
    runs = [("cpu", DeviceChoice.CPU, Precision.FP32), ("device", device, Precision.FP32)]
    if precision is not Precision.FP32:
        runs.append((f"device_{precision.value}", device, precision))
    rates = {side: run_pipeline(pipeline_config(sizes, choice, p)).tokens_per_s
             for side, choice, p in runs}
    config = pipeline_config(sizes, device)
    tokens, targets = synthetic_batch(config.model, config.global_batch, 0, config.train.seed)
    with start_pipeline(config) as driver:
        driver.step(tokens, targets)
        grads = driver.named_gradients()
    torch_device = resolve_device(device, "--device")
    reference = ReferenceTrainer(config.model, seed=config.train.seed,
                                 optimizer=config.train.optimizer)
    reference.model.to(torch_device)
    expected = reference.step(tokens.to(torch_device), targets.to(torch_device)).grads
    diff = max(float((grads[name] - expected[name].cpu()).abs().max()) for name in expected)
    return {"model": dict(zip(("layers", "hidden", "heads", "seq_len", "vocab"),
                              sizes.pipeline_model, strict=True)),
            **{f"tokens_per_s_{side}": rate for side, rate in rates.items()},
            "speedup_vs_cpu": rates["device"] / rates["cpu"], "max_abs_grad_diff": diff}


def profile_section(device: DeviceChoice, precision: Precision, sizes: Sizes,
                    out: Path) -> dict[str, object]:
    """The layer grid on ``device``; the forest's held-out MAPE; measurements beside ``out``."""
    micro, seqs, hidden = sizes.profile_grid
    records = run_profile(ProfileConfig(microbatch_sizes=micro, seq_lens=seqs,
                                        hidden_sizes=hidden, repeats=sizes.profile_repeats,
                                        warmup=2, device=device, precision=precision))
    _, fit = fit_with_holdout(records)
    measurements = out.with_name(f"{out.stem}_profile.json")
    save_measurements(measurements, records)
    return {"device_model": records[0].device_model, "precision": precision.value,
            "num_points": len(records), "num_holdout": fit.num_holdout,
            "rf_mape_pct": fit.mape_rf, "analytical_mape_pct": fit.mape_analytical,
            "measurements": measurements.name}


def device_summary(device: DeviceChoice) -> dict[str, object]:
    """What ran the check: the device's name and the software stack."""
    torch_device = resolve_device(device, "--device")
    name = (torch.cuda.get_device_name(torch_device) if torch_device.type == "cuda"
            else platform.processor() or "cpu")
    return {"device": name, "device_kind": torch_device.type, "torch": torch.__version__,
            "numpy": np.__version__, "python": platform.python_version(),
            "cuda": torch.version.cuda}


SECTIONS: dict[str, Callable[[argparse.Namespace, Sizes], dict[str, object]]] = {
    "mspipe": lambda a, s: mspipe_section(a.device, SYNTHETIC if a.tiny else a.dataset, s),
    "heta": lambda a, s: heta_section(a.device, a.precision, s),
    "pipeline": lambda a, s: pipeline_section(a.device, a.precision, s),
    "profile": lambda a, s: profile_section(a.device, a.precision, s, a.out),
}


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("Usage::")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=DeviceChoice, default=DeviceChoice.CUDA,
                        help="cuda (the check), cpu (a rehearsal) or auto (default: cuda).")
    parser.add_argument("--precision", type=Precision, default=None,
                        help="bf16, fp16 or fp32 (default: bf16 on a GPU, fp32 on the CPU).")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {', '.join(SECTIONS)}.")
    parser.add_argument("--tiny", action="store_true",
                        help="smoke sizes (seconds; MSPipe on a synthetic stream).")
    parser.add_argument("--dataset", default=str(COLLEGEMSG),
                        help="CollegeMsg.txt for the mspipe section (default: "
                             "../shared/data/collegemsg/CollegeMsg.txt beside the repo).")
    parser.add_argument("--out", type=Path, default=OUT, help=f"JSON to write ({OUT.name}).")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.sections.split(",")) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown {unknown}; choose from {sorted(SECTIONS)}")
    if args.precision is None:
        gpu = args.device is not DeviceChoice.CPU and torch.cuda.is_available()
        args.precision = Precision.BF16 if gpu else Precision.FP32
    return args


def main(argv: list[str] | None = None) -> dict[str, object]:
    """Run the chosen sections and write the JSON; returns what it wrote."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = _args(argv)
    sizes = TINY if args.tiny else FULL
    start = time.perf_counter()
    result: dict[str, object] = {**device_summary(args.device), "tiny": args.tiny}
    for name in args.sections.split(","):
        with phase(name):
            result[name] = SECTIONS[name](args, sizes)
    result["wall_s"] = time.perf_counter() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, allow_nan=True), encoding="utf-8")
    print(json.dumps(result, indent=2, allow_nan=True))
    return result


if __name__ == "__main__":
    main()
