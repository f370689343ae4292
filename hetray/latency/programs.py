"""Sample, lower, build and time tensor programs with TVM (MetaSchedule design space, LLVM).

A program is ``(task, seed)``: the seed picks one of the task's MetaSchedule design spaces
(``PostOrderApply`` with the default LLVM rules, built for :data:`DESIGN_TARGET` so every
device compiles the same program) and re-samples every random decision of its trace (TenSet's
"random programs per task", MetaSchedule's ``ReplayTrace``); the default LLVM postprocessors
then make it concrete. Timing (:class:`Timing`) is the least of many short
``time_evaluator`` repeats, each after a CPU cache flush (``cache_flush_cpu_non_first_arg``):
on a shared machine preemption only ever adds time, and a short repeat is the likeliest to
run undisturbed (a 10 ms repeat always spans several scheduler slices).

TVM is imported inside the functions (importing it costs seconds to minutes on a loaded box).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from hetray.latency.tasks import Task

os.environ.setdefault("TVM_FFI_DISABLE_TORCH_C_DLPACK", "1")  # else every import JIT-compiles

#: Target the design space is generated for (the program is the same on every device).
DESIGN_TARGET = {"kind": "llvm", "mcpu": "x86-64", "num-cores": 2}


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """How one program is timed (robust to load: the least of many short repeats).

    A first run (which also warms up) gives the time ``t`` of one run; each repeat then makes
    ``number = ceil(repeat_ms / t)`` runs after a cache flush, and there are
    ``clip(budget_ms / (number t), min_repeats, repeat)`` repeats.

    Attributes:
        repeat: most repeats; min_repeats: fewest; repeat_ms: target length of one repeat;
        budget_ms: target timing time of one program (slow programs get ``min_repeats``).
    """

    repeat: int = 30
    min_repeats: int = 3
    repeat_ms: float = 1.0
    budget_ms: float = 60.0

    def plan(self, run_s: float) -> tuple[int, int]:
        """``(number, repeats)`` for a program whose single run took ``run_s`` seconds."""
        run_s = max(run_s, 1e-9)
        number = max(1, math.ceil(self.repeat_ms / 1e3 / run_s))
        repeats = int(np.clip(round(self.budget_ms / 1e3 / (number * run_s)), self.min_repeats,
                              max(self.min_repeats, self.repeat)))
        return number, repeats


@lru_cache(maxsize=64)
def prim_func(task: Task) -> Any:
    """The task's TIR PrimFunc (``te.create_prim_func`` of its TVM testing workload)."""
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload

    return te.create_prim_func(getattr(te_workload, task.workload.value)(*task.args))


@lru_cache(maxsize=64)
def _context(task: Task) -> tuple[Any, list[Any], list[Any]]:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    ctx = ms.TuneContext(mod=prim_func(task), target=tvm.target.Target(DESIGN_TARGET),
                         space_generator="post-order-apply", task_name=task.name, num_threads=1)
    postprocs = ms.Postproc.create("llvm")
    for p in postprocs:
        p._initialize_with_tune_context(ctx)
    return ctx, [s.trace for s in ctx.generate_design_space()], postprocs


def sample_schedule(task: Task, seed: int) -> Any | None:
    """The program ``(task, seed)`` as a scheduled ``tvm.s_tir.Schedule``; None if invalid.

    Deterministic: the same ``(task, seed)`` gives the same program in every process.
    """
    from tvm.s_tir import Schedule
    from tvm.s_tir.schedule import Trace

    ctx, traces, postprocs = _context(task)
    trace = traces[seed % len(traces)]
    sch = Schedule(ctx.mod, seed=seed + 1, debug_mask="none")
    try:
        Trace(trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        ok = all(p.apply(sch) for p in postprocs)
    except Exception:
        return None
    return sch if ok else None


def lower_for_ast(sch: Any) -> Any:
    """Lower a schedule to a loop nest that keeps loop kinds and pragmas (before vectorize)."""
    import tvm
    from tvm import s_tir, tirx

    passes = [s_tir.transform.LowerInitBlock(),
              s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
              s_tir.transform.ConvertBlocksToOpaque(), s_tir.transform.CompactBufferAllocation(),
              s_tir.transform.LowerMatchBuffer(), s_tir.transform.LowerOpaqueBlock(),
              tirx.transform.FlattenBuffer(), tirx.transform.StmtSimplify()]
    return tvm.ir.transform.Sequential(passes)(sch.mod)["main"]


@lru_cache(maxsize=1)
def _feature_context() -> tuple[Any, Any]:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    # PerStoreFeature reads only the context's target (CPU vs GPU) when extract_workload=False
    return (ms.TuneContext(target=tvm.target.Target(DESIGN_TARGET), num_threads=1),
            ms.feature_extractor.PerStoreFeature(extract_workload=False))


def store_feature_rows(sch: Any) -> np.ndarray:
    """MetaSchedule's ``PerStoreFeature`` of a scheduled program: a 164-d row per stored buffer.

    Shape ``(B, 164)``, rows in the order of each buffer's first non-constant store (see
    :func:`hetray.latency.ast.zip_store_rows`).
    """
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    ctx, extractor = _feature_context()
    candidate = ms.MeasureCandidate(sch, ArgInfo.from_prim_func(sch.mod["main"]))
    return extractor.extract_from(ctx, [candidate])[0].numpy().astype(np.float32)


def flop_count(task: Task) -> float:
    """Floating-point operations of the task (TVM's estimate on the unscheduled function)."""
    import tvm

    return float(tvm.s_tir.analysis.estimate_tir_flops(tvm.IRModule({"main": prim_func(task)})))


def _inputs(func: Any, dev: Any, rng: np.random.Generator) -> list[Any]:
    import tvm

    out = []
    for param in func.params:
        buf = param
        shape = [int(x) for x in buf.shape]
        out.append(tvm.runtime.tensor(rng.random(shape, dtype=np.float32).astype(buf.dtype), dev))
    return out


def build_and_time(sch: Any, target: dict[str, object], timing: Timing,
                   seed: int = 0) -> tuple[float, float, float]:
    """Build ``sch`` for ``target`` and time it; ``(mean_s, std_s, min_s)`` over repeats."""
    import tvm

    exe = tvm.compile(sch.mod, target=tvm.target.Target(target))
    dev = tvm.cpu()
    func = exe.jit()
    args = _inputs(sch.mod["main"], dev, np.random.default_rng(seed))
    probe = func.time_evaluator("main", dev, number=1, repeat=1)(*args).mean
    number, repeats = timing.plan(float(probe))
    evaluator = func.time_evaluator("main", dev, number=number, repeat=repeats,
                                    f_preproc="cache_flush_cpu_non_first_arg")
    results = np.asarray(evaluator(*args).results, dtype=np.float64)
    return float(results.mean()), float(results.std()), float(results.min())
