"""Train a small GPT with pipeline parallelism on Ray stage actors across two "clusters".

Two stage actors (one per site) train a GPT with the chosen schedule; the hop between the
sites is an emulated 20 ms, 1 Gbit/s cross-cluster link, so the schedule's overlap shows on
one machine. Per-step times are written in the planner's measurement format.

Run locally (embedded Ray):   python examples/train_llm_pipeline.py
Submit to a cluster:          ray job submit --address http://HEAD:8265 --working-dir . -- \
                                  python examples/train_llm_pipeline.py --address auto
"""

from __future__ import annotations

import argparse
import logging
import statistics
from pathlib import Path

from hetray import runtime
from hetray.cli.llm import LlmRun, default_plan, local_spec, model_spec, step_records, train
from hetray.models.gpt import GPT_PRESETS, gpt_preset
from hetray.pipeline.schedules import Schedule
from hetray.planner.measurements import save_measurements


def main() -> None:
    """Train, print per-step lines and a final ``LLM_PIPELINE_OK`` line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None, help="None, auto, host:port or ray://...")
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

    runtime.connect(args.address)
    config, spec = gpt_preset(args.model), local_spec()
    plan = default_plan(spec, config.num_layers, schedule=Schedule(args.schedule),
                        num_microbatches=args.microbatches,
                        microbatch_size=args.microbatch_size)
    run = LlmRun(model_name=args.model, config=config, plan=plan, spec=spec, steps=args.steps)
    reports = train(run, lambda r: print(
        f"step {r.step}: loss {r.loss:.4f}, {r.step_s:.3f} s, {r.tokens_per_s:,.0f} tokens/s, "
        f"busy {', '.join(f'{b:.0%}' for b in r.busy_fraction)}"))
    steady = reports[1:] or reports
    if args.measurements_out is not None:
        records = step_records(plan, spec, model_spec(args.model, config),
                               [r.step_s for r in steady])
        save_measurements(args.measurements_out, records)
        print(f"wrote {len(records)} step measurements to {args.measurements_out}")
    print(f"LLM_PIPELINE_OK loss={reports[-1].loss:.4f} first_loss={reports[0].loss:.4f} "
          f"tokens_per_s={statistics.median(r.tokens_per_s for r in steady):.0f} "
          f"schedule={plan.schedule.value}")


if __name__ == "__main__":
    main()
