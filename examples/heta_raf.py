"""Train R-GCN with relation-aggregation-first (Heta) on partition-holder actors.

Run locally (embedded Ray):          python examples/heta_raf.py
Tiny run (tests):                    python examples/heta_raf.py --edges 20000 --epochs 1
Submit to a cluster:                 ray job submit --address http://HEAD:8265 -- \
                                         python examples/heta_raf.py --address auto
Real data (path on every node):      ... --dataset /data/heco_acm --partitions 2
From a run config:                   hetray train heta --print-config > heta.yaml; ...
                                         python examples/heta_raf.py --config heta.yaml

It is ``hetray train heta`` in a script: a :class:`~hetray.heta.run.RunConfig`, then
:func:`~hetray.heta.run.run` on :class:`~hetray.actors.heta.RayBackend`.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from hetray.actors.heta import RayBackend

from hetray import runtime
from hetray.core.config import load_config
from hetray.core.ray_args import add_ray_arguments
from hetray.heta.config import ConvKind, Mode, ModelConfig, Progress, RunConfig, TrainConfig
from hetray.heta.driver import EpochReport
from hetray.heta.run import run


class EpochLines(Progress):
    """Print one line per epoch."""

    def on_epoch(self, report: EpochReport) -> None:
        """Loss and time of the epoch that ended."""
        print(f"epoch {report.epoch + 1}: loss {report.loss:.4f} time {report.epoch_time_s:.2f}s")


def config_from(args: argparse.Namespace) -> RunConfig:
    """The run: ``--config`` if given, else RAF with this example's small model."""
    if args.config is not None:
        return load_config(RunConfig, args.config)
    model = ModelConfig(conv=ConvKind(args.model), hidden_dim=32, fanouts=(10, 5))
    return RunConfig(dataset=args.dataset or f"synthetic-mag:{args.edges}", mode=Mode.RAF,
                     num_partitions=args.partitions, holder_cpus=args.num_cpus,
                     train=TrainConfig(model=model, batch_size=512, epochs=args.epochs))


def main() -> None:
    """Parse flags, connect, train, print and optionally save the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ray_arguments(parser)
    parser.add_argument("--config", type=Path, default=None, help="a heta RunConfig YAML/JSON")
    parser.add_argument("--dataset", default=None, help="default: synthetic-mag:EDGES")
    parser.add_argument("--edges", type=int, default=200_000)
    parser.add_argument("--model", choices=[c.value for c in ConvKind], default="rgcn")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--num-cpus", type=float, default=0.5, help="CPUs per holder")
    parser.add_argument("--out", type=Path, default=None, help="write results JSON here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    config = config_from(args)
    runtime.connect(args.address, ship_project=args.ship_project)
    result = run(config, RayBackend(), EpochLines())
    print(f"HETA_RAF_OK test_acc={result.test_acc:.4f} val_acc={result.val_acc:.4f}")
    if args.out is not None:
        args.out.write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
    runtime.disconnect()


if __name__ == "__main__":
    main()
