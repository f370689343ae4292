"""Train a small GPT with pipeline parallelism on Ray stage actors across two "clusters".

Two stage actors (one per site) train a GPT with the chosen schedule; the hop between the
sites is an emulated 20 ms, 1 Gbit/s cross-cluster link, so the schedule's overlap shows on
one machine. The run config comes from the planner's default plan for the two sites
(:mod:`hetray.planner.handoff`) and runs through the pipeline's run API
(:func:`hetray.pipeline.run.run` on ``hetray.actors.pipeline.RayBackend``), the same call
``hetray train pipeline`` makes. Per-step times can be written in the planner's measurement
format.

Run locally (embedded Ray):   python examples/pipeline_gpt.py
Submit to a cluster:          ray job submit --address http://HEAD:8265 --working-dir . -- \
                                  python examples/pipeline_gpt.py --address auto
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from hetray.actors.pipeline import RayBackend

from hetray import runtime
from hetray.core.ray_args import add_ray_arguments
from hetray.models.gpt_config import GPT_PRESETS, gpt_preset
from hetray.pipeline.report import StepReport
from hetray.pipeline.run import RunConfig, TrainConfig, run
from hetray.pipeline.schedules import Schedule
from hetray.planner.handoff import default_plan, local_spec, pipeline_config, step_records
from hetray.planner.measurements import save_measurements


def _print_step(report: StepReport) -> None:
    print(f"step {report.step}: loss {report.loss:.4f}, {report.step_s:.3f} s, "
          f"{report.tokens_per_s:,.0f} tokens/s, "
          f"busy {', '.join(f'{b:.0%}' for b in report.busy_fraction)}")


def main() -> None:
    """Train, print per-step lines and a final ``PIPELINE_GPT_OK`` line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ray_arguments(parser)
    parser.add_argument("--model", default="gpt-tiny", choices=sorted(GPT_PRESETS))
    parser.add_argument("--schedule", default=Schedule.VIRTUAL_1F1B.value,
                        choices=[s.value for s in Schedule])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--microbatch-size", type=int, default=4)
    parser.add_argument("--measurements-out", type=Path, default=None,
                        help="write per-step measurements here (.json or .parquet)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    runtime.connect(args.address, ship_project=args.ship_project)
    spec = local_spec()
    base = RunConfig(model=gpt_preset(args.model), train=TrainConfig(steps=args.steps))
    plan = default_plan(spec, base.model.num_layers, schedule=Schedule(args.schedule),
                        num_microbatches=args.microbatches,
                        microbatch_size=args.microbatch_size)
    config = pipeline_config(plan, spec, base)
    report = run(config, RayBackend(), _print_step)
    out = report.to_dict()
    if args.measurements_out is not None:
        steady = out["step_s"][1:] or out["step_s"]
        save_measurements(args.measurements_out, step_records(plan, spec, config, steady))
        print(f"wrote {len(steady)} step measurements to {args.measurements_out}")
    print(f"PIPELINE_GPT_OK loss={out['loss'][-1]:.4f} first_loss={out['loss'][0]:.4f} "
          f"tokens_per_s={out['tokens_per_s']:.0f} schedule={out['schedule']}")
    runtime.disconnect()


if __name__ == "__main__":
    main()
