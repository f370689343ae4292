"""Train R-GCN with relation-aggregation-first (Heta) on partition-holder actors.

Run locally (embedded Ray):          python examples/train_hgnn_raf.py
Tiny run (tests):                    python examples/train_hgnn_raf.py --edges 20000 --epochs 1
Submit to a cluster:                 ray job submit --address http://HEAD:8265 -- \
                                         python examples/train_hgnn_raf.py --address auto
Real data (path on every node):      ... --dataset /data/heco_acm --partitions 2
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

from hetray.actors.hgnn_driver import train_distributed

from hetray import runtime
from hetray.graph import load_dataset
from hetray.heta.holder import HolderConfig, Mode
from hetray.heta.models import ConvKind, ModelConfig
from hetray.heta.raf import TrainConfig


def main() -> None:
    """Parse flags, connect, train, print and optionally save the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None, help="None, auto, host:port or ray://host:port")
    parser.add_argument("--dataset", default=None, help="default: synthetic-mag:EDGES")
    parser.add_argument("--edges", type=int, default=200_000)
    parser.add_argument("--model", choices=[c.value for c in ConvKind], default="rgcn")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--num-cpus", type=float, default=0.5, help="CPUs per holder")
    parser.add_argument("--out", type=Path, default=None, help="write results JSON here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    runtime.connect(args.address)
    hg = load_dataset(args.dataset or f"synthetic-mag:{args.edges}")
    config = HolderConfig(
        mode=Mode.RAF, num_partitions=args.partitions,
        train=TrainConfig(model=ModelConfig(conv=ConvKind(args.model), hidden_dim=32,
                                            fanouts=(10, 5)),
                          batch_size=512, epochs=args.epochs))
    with tempfile.TemporaryDirectory() as ckpt:
        result = train_distributed(hg, config, checkpoint_dir=Path(ckpt), num_cpus=args.num_cpus,
                                   on_epoch=lambda r: print(f"epoch {r.epoch}: loss {r.loss:.4f}"
                                                            f" time {r.epoch_time_s:.2f}s"))
    print(f"HGNN_RAF_OK test_acc={result.test_acc:.4f} val_acc={result.val_acc:.4f}")
    if args.out is not None:
        args.out.write_text(json.dumps(result.to_json(), indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
