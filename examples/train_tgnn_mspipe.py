"""Train a memory-based temporal GNN with MSPipe on memory-store actors, next to the baseline.

Run locally (embedded Ray):   python examples/train_tgnn_mspipe.py
On CollegeMsg:                python examples/train_tgnn_mspipe.py \
                                  --dataset ../shared/data/collegemsg/CollegeMsg.txt
Submit to a cluster:          ray job submit --address http://HEAD:8265 --working-dir . -- \
                                  python examples/train_tgnn_mspipe.py --address auto
"""

from __future__ import annotations

import argparse
import logging

from hetray import runtime
from hetray.cli.tgnn import run
from hetray.mspipe.fit import TrainConfig
from hetray.temporal.loaders import load_events
from hetray.temporal.models import ModelKind
from hetray.mspipe.staleness import PipelineMode
from hetray.temporal.synthetic import SyntheticConfig, synthetic_events


def main() -> None:
    """Train with the sequential baseline and with MSPipe; print both."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None, help="None, auto, host:port or ray://...")
    parser.add_argument("--dataset", default="synthetic", help="'synthetic' or an event file")
    parser.add_argument("--events", type=int, default=8000, help="synthetic stream size")
    parser.add_argument("--model", default="tgn", choices=[k.value for k in ModelKind])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--memory-dim", type=int, default=100)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    runtime.connect(args.address)
    events = synthetic_events(SyntheticConfig(num_events=args.events)) \
        if args.dataset == "synthetic" else load_events(args.dataset)
    train_cfg = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr)
    results = {}
    for mode in (PipelineMode.SEQUENTIAL, PipelineMode.MSPIPE):
        results[mode] = run(events, kind=ModelKind(args.model), mode=mode, staleness=-1,
                            train_cfg=train_cfg, memory_dim=args.memory_dim, num_shards=2,
                            checkpoint_dir="", show_progress=False)
        out = results[mode]
        print(f"{mode.value:>10}: test AP {out['test']['ap']:.4f} AUC {out['test']['auc']:.4f}, "
              f"{out['train_events_per_s']:.0f} events/s, staleness "
              f"{out['staleness_histogram']}")
    seq, pipe = results[PipelineMode.SEQUENTIAL], results[PipelineMode.MSPIPE]
    print(f"TGNN_MSPIPE_OK ap={pipe['test']['ap']:.4f} ap_sequential={seq['test']['ap']:.4f} "
          f"speedup={pipe['train_events_per_s'] / seq['train_events_per_s']:.2f}")


if __name__ == "__main__":
    main()
