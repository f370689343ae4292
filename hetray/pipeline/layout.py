"""Where every layer and every micro-batch row of a pipelined model lives.

Symbols: ``p`` stages (ranks), ``v`` chunks per rank, ``q = c*p + r`` the virtual stage of
local chunk ``c`` on rank ``r``, ``n_r`` layers of rank ``r``, ``m`` micro-batches, ``R``
rows (sequences) per micro-batch, ``dp_r`` replicas of rank ``r``, ``t_r`` tensor-parallel
ranks of each replica of rank ``r``.

**Layers.** The model's layer sequence is cut into ``p*v`` consecutive pieces, taken in
virtual-stage order ``q = 0, 1, ..., p*v - 1``; rank ``r`` holds pieces ``r, p + r, ...``
(Megatron's interleaved placement). A plan only fixes how many layers each rank holds
(``n_r = layer_end - layer_start``); piece ``q = c*p + r`` gets ``n_r // v`` layers, plus
one for the first ``n_r % v`` chunks ``c``. With ``v = 1`` that is exactly the plan's
``[layer_start, layer_end)``; with ``v > 1`` a rank's layers are no longer contiguous::

    p = 2, v = 2, n = (3, 2):   q:      0      1      2      3
                                rank:   0      1      0      1
                                layers: [0,2)  [2,3)  [3,4)  [4,5)

**Rows.** Each rank splits every micro-batch into consecutive row ranges, one per replica,
in proportion to replica throughput (:func:`~hetray.pipeline.reshard.row_shares`).
:func:`hetray.planner.layout.layout_from_plan` builds a layout from a plan;
:func:`make_layout` builds one without a cluster.

**Links.** Each replica has a :class:`Location`; two replicas on one node talk over an
intra-node link, on two nodes of one cluster over an inter-node link, else cross-cluster.

**Workers.** A replica with ``t_r > 1`` is ``t_r`` workers (:class:`WorkerSlot`), one per
tensor-parallel rank, on the replica's node (:mod:`hetray.pipeline.tensor_parallel`).
Worker order is rank, then replica, then tensor-parallel rank; :meth:`PipelineLayout.
process_groups` lists the collective groups they form (a rank's replicas per
tensor-parallel rank for the gradient all-reduce, a replica's workers for tensor
parallelism).

Example:
    >>> layout = make_layout(stage_layers=(3, 2), shares=((2,), (1, 1)), num_microbatches=2,
    ...                      num_chunks=2)
    >>> layout.layer_bounds()
    [(0, 2), (2, 3), (3, 4), (4, 5)]
    >>> layout.replica_rows(Endpoint(1, 1))
    (1, 2)
    >>> layout.link_class(Endpoint(0, 0), Endpoint(1, 1)).value
    'inter_node'
    >>> tp = make_layout(stage_layers=(1, 1), shares=((2,), (1, 1)), num_microbatches=1,
    ...                  tp=(2, 1))
    >>> [(g.kind.value, g.workers) for g in tp.process_groups()]
    [('tp', (0, 1)), ('dp', (2, 3))]
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from hetray.cluster.spec import LinkClass
from hetray.core.errors import ConfigError
from hetray.pipeline.reshard import Endpoint, row_offsets

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Location:
    """Where one replica runs: cluster name and a node name unique within it."""

    cluster: str
    node: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StageLayout:
    """One rank of the pipeline.

    Attributes:
        rank: ``r``.
        chunk_layers: ``(v,)`` layer ranges ``[start, end)`` of local chunks ``c = 0..v-1``.
        row_shares: ``(dp_r,)`` rows of each micro-batch per replica (sum ``R``).
        locations: ``(dp_r,)`` where each replica runs.
        tp: ``t_r``, tensor-parallel workers of each replica.
    """

    rank: int
    chunk_layers: tuple[tuple[int, int], ...]
    row_shares: tuple[int, ...]
    locations: tuple[Location, ...]
    tp: int = 1

    @property
    def dp(self) -> int:
        """Replicas of this rank."""
        return len(self.row_shares)


@dataclass(frozen=True, slots=True, order=True)
class WorkerSlot:
    """One worker of the pipeline: its replica and its tensor-parallel rank in it."""

    endpoint: Endpoint
    tp_rank: int = 0

    @property
    def leads(self) -> bool:
        """Whether this worker talks to other stages for its replica (tensor rank 0)."""
        return self.tp_rank == 0


class GroupKind(enum.Enum):
    """What a collective group of workers sums."""

    DP = "dp"   # gradients over a rank's replicas (one group per tensor-parallel rank)
    TP = "tp"   # partial sums of one replica's tensor-parallel workers


@dataclass(frozen=True, slots=True)
class ProcessGroup:
    """A collective group: ``workers`` are indices into :meth:`PipelineLayout.workers`."""

    kind: GroupKind
    workers: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineLayout:
    """Layers, rows and links of every replica of a pipeline.

    Attributes:
        stages: the ``p`` ranks in pipeline order.
        num_microbatches: ``m``.
    """

    stages: tuple[StageLayout, ...]
    num_microbatches: int

    def __post_init__(self) -> None:
        if not self.stages or self.num_microbatches < 1:
            raise ConfigError("PipelineLayout", "stages/num_microbatches",
                              (len(self.stages), self.num_microbatches), ">= 1 each")
        rows = {sum(stage.row_shares) for stage in self.stages}
        chunks = {len(stage.chunk_layers) for stage in self.stages}
        if len(rows) != 1 or len(chunks) != 1:
            raise ConfigError("PipelineLayout", "stages", (rows, chunks),
                              "the same micro-batch rows and chunk count on every rank")
        if any(len(s.locations) != s.dp for s in self.stages):
            raise ConfigError("PipelineLayout", "locations", [s.locations for s in self.stages],
                              "one location per replica")
        if any(s.tp < 1 for s in self.stages):
            raise ConfigError("PipelineLayout", "tp", [s.tp for s in self.stages], ">= 1 each")

    @property
    def num_ranks(self) -> int:
        """``p``."""
        return len(self.stages)

    @property
    def num_chunks(self) -> int:
        """``v``."""
        return len(self.stages[0].chunk_layers)

    @property
    def num_virtual(self) -> int:
        """``p * v`` virtual stages."""
        return self.num_ranks * self.num_chunks

    @property
    def microbatch_rows(self) -> int:
        """``R`` sequences per micro-batch."""
        return sum(self.stages[0].row_shares)

    @property
    def global_batch(self) -> int:
        """``m * R`` sequences per step."""
        return self.num_microbatches * self.microbatch_rows

    def endpoints(self) -> list[Endpoint]:
        """Every replica, by rank then replica."""
        return [Endpoint(s.rank, i) for s in self.stages for i in range(s.dp)]

    def workers(self) -> list[WorkerSlot]:
        """Every worker, by rank, replica, then tensor-parallel rank."""
        return [WorkerSlot(e, j) for e in self.endpoints()
                for j in range(self.stages[e.rank].tp)]

    def process_groups(self) -> list[ProcessGroup]:
        """The collective groups of more than one worker, in one fixed order.

        Per rank: its tensor-parallel groups (one per replica), then its data-parallel
        groups (one per tensor-parallel rank).
        """
        index = {w: i for i, w in enumerate(self.workers())}
        out = []
        for s in self.stages:
            tp = [tuple(index[WorkerSlot(Endpoint(s.rank, i), j)] for j in range(s.tp))
                  for i in range(s.dp)]
            out += [ProcessGroup(GroupKind.TP, g) for g in tp if len(g) > 1]
            out += [ProcessGroup(GroupKind.DP, tuple(g[j] for g in tp))
                    for j in range(s.tp) if s.dp > 1]
        return out

    def layer_bounds(self) -> list[tuple[int, int]]:
        """``(p v,)`` layer ranges in virtual-stage order."""
        p = self.num_ranks
        return [self.stages[q % p].chunk_layers[q // p] for q in range(self.num_virtual)]

    def replica_rows(self, endpoint: Endpoint) -> tuple[int, int]:
        """Rows ``[start, stop)`` of each micro-batch that ``endpoint`` holds."""
        offsets = row_offsets(self.stages[endpoint.rank].row_shares)
        return offsets[endpoint.replica], offsets[endpoint.replica + 1]

    def link_class(self, src: Endpoint, dst: Endpoint) -> LinkClass:
        """The link between two replicas, from their locations."""
        a = self.stages[src.rank].locations[src.replica]
        b = self.stages[dst.rank].locations[dst.replica]
        if a.cluster != b.cluster:
            return LinkClass.CROSS_CLUSTER
        return LinkClass.INTRA_NODE if a.node == b.node else LinkClass.INTER_NODE


def chunk_layer_counts(stage_layers: Sequence[int], num_chunks: int) -> list[list[int]]:
    """Layers per local chunk: ``out[r][c] = n_r // v + (c < n_r % v)``.

    Raises:
        ConfigError: a rank has fewer layers than chunks.
    """
    if any(n < num_chunks for n in stage_layers) or num_chunks < 1:
        raise ConfigError("layout", "stage_layers", tuple(stage_layers),
                          f">= num_chunks={num_chunks} layers on every rank")
    return [[n // num_chunks + (c < n % num_chunks) for c in range(num_chunks)]
            for n in stage_layers]


def chunk_layer_ranges(stage_layers: Sequence[int],
                       num_chunks: int) -> list[list[tuple[int, int]]]:
    """Layer ranges per rank and local chunk, ``out[r][c]`` (module docstring rule).

    >>> chunk_layer_ranges((3, 2), 2)
    [[(0, 2), (3, 4)], [(2, 3), (4, 5)]]
    """
    counts = chunk_layer_counts(stage_layers, num_chunks)
    p, at = len(stage_layers), 0
    out: list[list[tuple[int, int]]] = [[] for _ in range(p)]
    for q in range(p * num_chunks):
        size = counts[q % p][q // p]
        out[q % p].append((at, at + size))
        at += size
    return out


def make_layout(*, stage_layers: Sequence[int], shares: Sequence[Sequence[int]],
                num_microbatches: int, num_chunks: int = 1, clusters: Sequence[str] = (),
                tp: Sequence[int] = ()) -> PipelineLayout:
    """A layout without a cluster spec (tests, benchmarks, local runs).

    Every rank runs on its own node; its replicas share that node.

    Args:
        stage_layers: ``(p,)`` layers per rank.
        shares: ``(p,)`` tuples of rows per replica (each rank sums to ``R``).
        num_microbatches: ``m``.
        num_chunks: ``v``.
        clusters: ``(p,)`` cluster name per rank (default: one cluster), so tests can mark
            a hop cross-cluster.
        tp: ``(p,)`` tensor-parallel workers per replica (default 1 each).
    """
    if len(shares) != len(stage_layers) or any(
            x and len(x) != len(stage_layers) for x in (clusters, tp)):
        raise ConfigError("make_layout", "shares/clusters/tp",
                          (len(shares), len(clusters), len(tp)),
                          f"{len(stage_layers)} entries (one per rank)")
    names = tuple(clusters) or ("local",) * len(stage_layers)
    layers = chunk_layer_ranges(stage_layers, num_chunks)
    widths = tuple(tp) or (1,) * len(stage_layers)
    stages = tuple(StageLayout(rank=r, chunk_layers=tuple(layers[r]), row_shares=tuple(s),
                               locations=(Location(names[r], f"node{r}"),) * len(s),
                               tp=widths[r])
                   for r, s in enumerate(shares))
    return PipelineLayout(stages=stages, num_microbatches=num_microbatches)
