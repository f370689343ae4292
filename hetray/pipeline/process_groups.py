"""torch.distributed groups of a pipeline's workers when they are separate processes (actors).

Symbols: ``W`` workers of the pipeline (:meth:`~hetray.pipeline.layout.PipelineLayout.
workers`), ``N`` elements of one flat buffer.

One world per generation of workers, worker ``i`` = world rank ``i``::

    worker 0:   rendezvous(host) -> (host, free port)        (the driver asks, then tells all)
    every one:  join(address)    init_process_group(gloo | nccl, tcp://host:port, W, i)
                                 new_group(g.workers) for every g of layout.process_groups(),
                                 in that order (torch wants every world member in every call)
    step:       DistributedReducer(kind).allreduce(flat)  -> dist.all_reduce on its group

The groups (:class:`~hetray.pipeline.layout.GroupKind`): ``DP`` sums a rank's gradients over
its replicas (one group per tensor-parallel rank), ``TP`` sums the partial products of one
replica's tensor-parallel workers. A worker in both holds two groups of one world. With
``channels=True`` the world also carries the pipeline's messages: after the layout's groups
come ``L (L - 1)`` two-member groups, one per ordered pair of the ``L`` replicas' tensor
rank 0 workers (:class:`~hetray.pipeline.collective_transport.Channel`, in
:attr:`WorkerGroups.sends` / :attr:`WorkerGroups.recvs`).

Why not ``ray.util.collective``: Ray 2.60's gloo backend (``TorchGLOOGroup``) initialises the
process-wide default group from the first group a process joins and builds each later group
over ranks ``0 .. n-1`` of that world, so a worker in a ``DP`` and a ``TP`` group at once
would sum with the wrong peers. The in-process backend uses
:class:`~hetray.pipeline.training.BarrierSumReducer` instead of this module.

Example:
    >>> from hetray.pipeline.layout import make_layout
    >>> layout = make_layout(stage_layers=(1,), shares=((1, 1),), num_microbatches=1)
    >>> groups = WorkerGroups(layout, index=1, backend="gloo", timeout_s=10.0)
    >>> groups.needed, groups.reducer(GroupKind.TP) is None
    (True, True)
"""

from __future__ import annotations

import datetime
import logging
import socket

import torch
import torch.distributed as dist

from hetray.pipeline.collective_transport import Channel
from hetray.pipeline.layout import GroupKind, PipelineLayout
from hetray.pipeline.reshard import Endpoint

logger = logging.getLogger(__name__)

#: How long a channel's listener waits for the next message: as long as a run may sit
#: between steps (a peer that dies closes its connections instead, which ends the wait).
CHANNEL_TIMEOUT = datetime.timedelta(days=7)


def free_port(host: str) -> int:
    """A TCP port on ``host`` that was free a moment ago (for the rendezvous)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class DistributedReducer:
    """A :class:`~hetray.pipeline.training.GradReducer` over one group of :class:`WorkerGroups`.

    Args:
        groups: the worker's groups (joined before the first call).
        kind: which of its groups sums.
    """

    def __init__(self, groups: WorkerGroups, kind: GroupKind) -> None:
        self.groups, self.kind = groups, kind

    def allreduce(self, flat: torch.Tensor, replica: int) -> torch.Tensor:
        """``flat``: float ``(N,)``; the ``(N,)`` sum over the group (a new tensor).

        Every member gets the same bits: gloo and nccl reduce each element in one order and
        broadcast it.
        """
        del replica  # the group rank was fixed when the world was joined
        out = flat.detach().clone()
        dist.all_reduce(out, group=self.groups.group(self.kind))
        return out


class WorkerGroups:
    """The collective groups worker ``index`` of ``layout`` belongs to (module docstring).

    Args:
        layout: the pipeline layout (its :meth:`process_groups`).
        index: this worker's position in :meth:`PipelineLayout.workers`.
        backend: ``"gloo"`` (CPU tensors) or ``"nccl"``.
        timeout_s: how long a collective waits for the other members.
        channels: also make the message channels between replicas (module docstring).
    """

    def __init__(self, layout: PipelineLayout, index: int, backend: str,
                 timeout_s: float, *, channels: bool = False) -> None:
        self.index, self.backend, self.timeout_s = index, backend, timeout_s
        workers = layout.workers()
        self.world_size = len(workers)
        self.specs = layout.process_groups()
        self.mine = {g.kind: g for g in self.specs if index in g.workers}
        self.leaders = ([(i, w.endpoint) for i, w in enumerate(workers) if w.leads]
                        if channels else [])
        #: Channels this worker sends on / listens to, by the peer replica (after join).
        self.sends: dict[Endpoint, Channel] = {}
        self.recvs: dict[Endpoint, Channel] = {}
        self._groups: dict[GroupKind, dist.ProcessGroup] = {}
        self._joined = False

    @property
    def needed(self) -> bool:
        """Whether the pipeline has any group or channel (else no world is made)."""
        return bool(self.specs) or len(self.leaders) > 1

    def reducer(self, kind: GroupKind) -> DistributedReducer | None:
        """The reducer of this worker's ``kind`` group; None when it is in none."""
        return DistributedReducer(self, kind) if kind in self.mine else None

    def group(self, kind: GroupKind) -> dist.ProcessGroup:
        """This worker's ``kind`` group.

        Raises:
            RuntimeError: :meth:`join` has not run.
        """
        if kind not in self._groups:
            raise RuntimeError(f"worker {self.index}: no {kind.value} group joined yet")
        return self._groups[kind]

    def join(self, address: tuple[str, int]) -> None:
        """Join the world at ``address`` and make every group; all workers call it at once."""
        host, port = address
        dist.init_process_group(self.backend, init_method=f"tcp://{host}:{port}",
                                world_size=self.world_size, rank=self.index,
                                timeout=datetime.timedelta(seconds=self.timeout_s))
        self._joined = True
        for spec in self.specs:
            group = dist.new_group(list(spec.workers), backend=self.backend)
            if self.mine.get(spec.kind) == spec:
                self._groups[spec.kind] = group
        for src, src_end in self.leaders:
            for dst, dst_end in self.leaders:
                if src == dst:
                    continue
                group = dist.new_group([src, dst], backend=self.backend,
                                       timeout=CHANNEL_TIMEOUT)
                if self.index == src:
                    self.sends[dst_end] = Channel(dst, group)
                elif self.index == dst:
                    self.recvs[src_end] = Channel(src, group)
        logger.info("worker %d joined %d of %d groups and %d channels", self.index,
                    len(self._groups), len(self.specs), len(self.sends) + len(self.recvs))

    def close(self) -> None:
        """Leave the world (a no-op when it was never joined)."""
        if self._joined:
            self._groups.clear()
            self.sends.clear()
            self.recvs.clear()
            dist.destroy_process_group()
            self._joined = False
