"""Train a memory-based temporal GNN with MSPipe on memory-store actors, next to the baseline.

Both runs go through the MSPipe run API (``hetray.mspipe.run.run``): the sequential baseline
in this process, MSPipe with its sampler, fetcher and memory-store shards as Ray actors.

Run locally (embedded Ray):   python examples/mspipe_tgn.py
On CollegeMsg:                python examples/mspipe_tgn.py \
                                  --dataset ../shared/data/collegemsg/CollegeMsg.txt
Submit to a cluster:          ray job submit --address http://HEAD:8265 --working-dir . -- \
                                  python examples/mspipe_tgn.py --address auto
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace

from hetray.actors.mspipe import RayBackend

from hetray import runtime
from hetray.core.ray_args import add_ray_arguments
from hetray.mspipe.config import DataConfig, ModelChoice, RunConfig, StoreConfig, TrainConfig
from hetray.mspipe.run import run
from hetray.mspipe.staleness import PipelineConfig, PipelineMode
from hetray.temporal.models import ModelKind
from hetray.temporal.synthetic import SyntheticConfig


def main() -> None:
    """Train with the sequential baseline and with MSPipe; print both."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ray_arguments(parser)
    parser.add_argument("--dataset", default="synthetic", help="'synthetic' or an event file")
    parser.add_argument("--events", type=int, default=8000, help="synthetic stream size")
    parser.add_argument("--model", default="tgn", choices=[k.value for k in ModelKind])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--memory-dim", type=int, default=100)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    runtime.connect(args.address, ship_project=args.ship_project)
    config = RunConfig(
        data=DataConfig(dataset=args.dataset,
                        synthetic=SyntheticConfig(num_events=args.events)),
        model=ModelChoice(kind=ModelKind(args.model), memory_dim=args.memory_dim),
        train=TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr),
        store=StoreConfig(num_shards=2))
    reports = {}
    for mode in (PipelineMode.SEQUENTIAL, PipelineMode.MSPIPE):
        reports[mode] = run(replace(config, pipeline=PipelineConfig(mode=mode)), RayBackend())
        out = reports[mode]
        print(f"{mode.value:>10}: test AP {out.test.ap:.4f} AUC {out.test.auc:.4f}, "
              f"{out.train_events_per_s:.0f} events/s, staleness {out.staleness}")
    seq, pipe = reports[PipelineMode.SEQUENTIAL], reports[PipelineMode.MSPIPE]
    print(f"MSPIPE_TGN_OK ap={pipe.test.ap:.4f} ap_sequential={seq.test.ap:.4f} "
          f"speedup={pipe.train_events_per_s / seq.train_events_per_s:.2f}")


if __name__ == "__main__":
    main()
