"""CPU per pipeline message: a Ray actor call against the socket transport, same two actors.

Writes ``benchmarks/results/peer_transport.json``. Run: ``python benchmarks/peer_transport.py``
(embedded local Ray; about a minute). Two threaded actors each hold a
:class:`~hetray.pipeline.socket_transport.SocketTransport`; one sends the other ``N`` messages
of a ``(4, 64, 64)`` float32 activation (64 KiB), one every 3.5 ms (a pipeline chunk's pace):

* ``ray``: ``peer.deliver.remote(key, to_wire(rows), (), stamp)``, the receiver putting the rows
  into its mailbox, finished calls drained with ``ray.wait`` as the Ray transport does;
* ``socket``: ``transport.send(dst, key, rows)``, the same mailbox at the other end.

The CPU time of both processes (psutil) over the ``N`` messages, per message; an idle
stretch of the same length (``idle``: the same loop sending nothing) is the baseline.
Repeats interleave the sides; medians. Keys: ``<side>.sender_ms`` and ``<side>.receiver_ms``
(per message slot, ``side`` in idle / ray / socket), ``ray_over_socket`` (the two sides' CPU
per message beyond idle).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import psutil
import ray
import torch

from hetray import runtime
from hetray.cluster.spec import LinkClass
from hetray.pipeline.array_wire import WireArray, to_tensor, to_wire
from hetray.pipeline.reshard import Endpoint
from hetray.pipeline.socket_transport import SocketTransport, new_secret
from hetray.pipeline.transport import MessageKey, MessageKind, SlotKey, Stamp

OUT = Path(__file__).resolve().parent / "results" / "peer_transport.json"
SIDES = ("idle", "ray", "socket")


def _link_of(src: Endpoint, dst: Endpoint) -> LinkClass:
    return LinkClass.INTER_NODE


@ray.remote(max_concurrency=8)
class Peer:
    """One side: a socket transport, and a Ray ``deliver`` into the same mailbox."""

    def __init__(self, rank: int) -> None:
        self.endpoint = Endpoint(rank, 0)
        self.transport = SocketTransport(self.endpoint, _link_of, {}, 60.0)

    def pid(self) -> int:
        """This process's id (its CPU time is read from outside)."""
        return os.getpid()

    def listen(self, secret: bytes) -> tuple[str, int]:
        """Listen on the loopback for peers holding ``secret``."""
        return self.transport.listen(secret, "127.0.0.1")

    def connect(self, addresses: dict[Endpoint, tuple[str, int]]) -> None:
        """Open the streams to the other peer."""
        self.transport.connect(addresses)

    def deliver(self, key: MessageKey, payload: WireArray, stamp: Stamp) -> None:
        """The Ray side: what ``RayPipelineStage.deliver`` does with a message."""
        self.transport.deliver(key, to_tensor(payload), (), stamp)

    def send_many(self, peer: Any, dst: Endpoint, side: str, count: int, gap_s: float,
                  first: int) -> None:
        """Send ``count`` messages to ``peer`` one way (``side``; ``idle`` sends none)."""
        rows = torch.randn(4, 64, 64)
        pending: list[ray.ObjectRef] = []
        for i in range(count):
            key = MessageKey(SlotKey(step=0, kind=MessageKind.ACT, microbatch=first + i,
                                     virtual_stage=1), 0, 4)
            if side == "ray":
                pending.append(peer.deliver.remote(key, to_wire(rows.clone()),
                                                   Stamp(LinkClass.INTER_NODE, time.time())))
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
                ray.get(done)
            elif side == "socket":
                self.transport.send(dst, key, rows)
            time.sleep(gap_s)
        ray.get(pending)


def main() -> None:
    """Interleave the sides, print per-message CPU and the ratio, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300, help="messages per repeat")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats")
    parser.add_argument("--gap-ms", type=float, default=3.5, help="time between messages")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    runtime.connect(None)
    sender, receiver = Peer.remote(0), Peer.remote(1)
    secret = new_secret()
    addresses = dict(zip((Endpoint(0, 0), Endpoint(1, 0)),
                         ray.get([p.listen.remote(secret) for p in (sender, receiver)]),
                         strict=True))
    ray.get([p.connect.remote(addresses) for p in (sender, receiver)])
    procs = [psutil.Process(pid) for pid in ray.get([sender.pid.remote(), receiver.pid.remote()])]
    samples: dict[str, list[tuple[float, float]]] = {side: [] for side in SIDES}
    for repeat in range(args.repeats):
        for side in SIDES:
            before = [sum(p.cpu_times()[:2]) for p in procs]
            ray.get(sender.send_many.remote(receiver, Endpoint(1, 0), side, args.messages,
                                            args.gap_ms / 1e3, repeat * 10**6))
            time.sleep(0.2)  # the last messages land
            used = [sum(p.cpu_times()[:2]) - b for p, b in zip(procs, before, strict=True)]
            samples[side].append((1e3 * used[0] / args.messages, 1e3 * used[1] / args.messages))
    result: dict[str, Any] = {
        side: {"sender_ms": statistics.median(s for s, _ in rows),
               "receiver_ms": statistics.median(r for _, r in rows), "repeats": rows}
        for side, rows in samples.items()}
    busy = {side: result[side]["sender_ms"] + result[side]["receiver_ms"]
            - result["idle"]["sender_ms"] - result["idle"]["receiver_ms"] for side in SIDES}
    result["ray_over_socket"] = busy["ray"] / max(busy["socket"], 1e-9)
    result["config"] = {"messages": args.messages, "repeats": args.repeats,
                        "gap_ms": args.gap_ms, "load_avg": os.getloadavg()}
    for side in SIDES:
        print(f"{side:<7} sender {result[side]['sender_ms']:.3f} ms, receiver "
              f"{result[side]['receiver_ms']:.3f} ms per message")
    print(f"Ray actor call over socket transport, CPU per message beyond idle: "
          f"{result['ray_over_socket']:.1f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
