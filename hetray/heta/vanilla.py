"""The vanilla (DistDGL-style) baseline: node partitions + remote input fetch + data parallel.

Glossary: ``K`` workers; ``B`` global seeds per step, ``B / K`` per worker; ``d`` hidden dim.

Every node of every type is owned by one of ``K`` node partitions (METIS through
``dgl.metis_partition_assignment`` on the homogenised graph, or random). Worker ``k`` keeps
a full model replica, trains on seeds ``seeds[k::K]``, samples all relations, and must read
the input rows (features; embeddings, which also carry Adam state) of every sampled node:
rows owned by another partition are remote. Per step it exchanges::

    remote input rows         sum_t |remote ids_t| * row_bytes_t   (one message per owner)
    dense gradients           all-reduce of every non-embedding parameter gradient
    embedding gradients       all-gather of touched row ids, all-reduce of the union rows

Byte counters use ring all-reduce traffic, ``2 (K-1)/K * n`` bytes sent per rank. The
structure is replicated on every worker (sampling is free of RPC, which favours vanilla).
An optional static :class:`~hetray.heta.cache.RowCache` of remote rows (``worker.cache``)
removes its hits from the fetch: they are neither counted nor delayed. Values are read
from the local replica either way, so the cache changes traffic, never the numerics.
"""

from __future__ import annotations

import logging

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from hetray.accel.precision import LossScaler, autocast, resolve_device
from hetray.comm.link_emulation import LinkEmulator, ring_allreduce_bytes
from hetray.core.native_output import captured_output
from hetray.graph.hetero import HeteroGraph
from hetray.heta.cache import PROFILE_STEP_OFFSET, RowCache
from hetray.heta.collective import Collective
from hetray.heta.config import TrainConfig
from hetray.heta.meta_partition import meta_partition
from hetray.heta.models import MetatreeHGNN, StepContext, identity_reduce
from hetray.heta.raf import StepStats, input_specs, make_optimizer, root_view, schema_stats
from hetray.heta.sampling import SampledTree, sample_tree

logger = logging.getLogger(__name__)


def node_partition(hg: HeteroGraph, num_parts: int, *, method: str, seed: int,
                   ) -> dict[str, torch.Tensor]:
    """Owner partition of every node: int64 ``(N_t,)`` per type.

    Args:
        hg: the graph.
        num_parts: ``K``.
        method: ``"metis"`` (``dgl.metis_partition_assignment`` on the homogenised,
            symmetrised graph) or ``"random"``.
        seed: seed of the random assignment.
    """
    if num_parts == 1:
        return {t: torch.zeros(hg.num_nodes(t), dtype=torch.int64) for t in hg.graph.ntypes}
    if method == "random":
        gen = torch.Generator().manual_seed(seed)
        return {t: torch.randint(0, num_parts, (hg.num_nodes(t),), generator=gen)
                for t in hg.graph.ntypes}
    import dgl  # loaded only when METIS runs (importing Heta's configs stays DGL-free)

    homo = dgl.to_homogeneous(hg.graph)
    with captured_output(logger, "DGL's METIS partitioning"):  # its timing lines -> the log
        assign = dgl.metis_partition_assignment(dgl.to_bidirected(homo), num_parts).long()
    ntype_ids = homo.ndata[dgl.NTYPE]
    return {t: assign[ntype_ids == i] for i, t in enumerate(hg.graph.ntypes)}


class VanillaWorker:
    """One data-parallel worker of the baseline.

    Like :class:`~hetray.heta.raf.RafWorker` it keeps everything on ``config.device``: the
    structure replica, rows, owners, parameters and (once set) its cache's row bitmap.

    Args:
        hg: the graph (structure replicated; rows read by ownership).
        owners: node partition from :func:`node_partition`.
        rank: this worker's partition id.
        config: training config (the same model as RAF, all subtrees).
        link: emulated network for remote rows, or None for shared memory.
    """

    def __init__(self, hg: HeteroGraph, owners: dict[str, torch.Tensor], rank: int,
                 config: TrainConfig, link: LinkEmulator | None = None) -> None:
        plan = meta_partition(schema_stats(hg, config.model.hidden_dim), 1, config.model.depth)
        self.rank, self.config, self.link = rank, config, link
        self.subtrees = list(plan.subtrees)
        self.tree = plan.tree
        self.target_type = hg.target_type
        self.device = resolve_device(config.device, "TrainConfig")
        self.owners = {t: o.to(self.device) for t, o in owners.items()}
        self.csc = {rel: tuple(t.to(self.device) for t in hg.csc(rel)) for rel in hg.relations}
        self.features = {t: f.to(self.device, config.model.dtype)
                         for t, f in hg.features.items()}
        self.labels = hg.labels.to(self.device)
        self.model = MetatreeHGNN(tree=plan.tree, trunk=plan.trunk, inputs=input_specs(hg),
                                  num_classes=hg.num_classes,
                                  config=config.model).to(self.device, config.model.dtype)
        self.optimizer = make_optimizer(self.model, config)
        self.scaler = LossScaler(self.device, config.precision)
        itemsize = torch.finfo(config.model.dtype).bits // 8
        self.row_bytes = {t: itemsize * (hg.feature_dim(t) or config.model.hidden_dim)
                          for t in hg.graph.ntypes}
        self.bytes_sent = 0
        self.cache: RowCache | None = None

    def _trees(self, seeds: torch.Tensor, step: int) -> dict:
        """The sampled tree of each root subtree (the same draws as the whole tree's)."""
        return {st.index: sample_tree(root_view(st.node, self.target_type), seeds, self.csc,
                                      self.config.sample_fanouts, self.config.model.seed, step)
                for st in self.subtrees}

    def _logits(self, seeds: torch.Tensor, trees: dict, step: int,
                train: bool) -> torch.Tensor:
        """The model on ``seeds`` from the per-subtree trees of :meth:`_trees`."""
        self.model.train(train)
        whole = SampledTree(ids=seeds, edges=tuple(trees[st.index].edges[0]
                                                   for st in self.subtrees))
        ctx = StepContext(reduce=identity_reduce, seed=self.config.model.seed, step=step,
                          train=train)
        with autocast(self.device, self.config.precision):
            logits = self.model(whole, self.features, ctx)
        return logits.to(self.config.model.dtype)

    def _remote_ids(self, trees: dict) -> list[tuple[str, torch.Tensor]]:
        """``(ntype, ids)`` of the remote rows a step reads: int64 unique ids per subtree."""
        out = []
        for st in self.subtrees:
            view = root_view(st.node, self.target_type)
            for ntype, parts in trees[st.index].input_ids(view).items():
                ids = torch.unique(torch.cat(parts))
                out.append((ntype, ids[self.owners[ntype][ids] != self.rank]))
        return out

    def _fetch_remote_rows(self, trees: dict) -> None:
        """Charge (and delay) the remote input rows this mini-batch reads, less cached ones."""
        per_owner: dict[int, int] = {}
        for ntype, ids in self._remote_ids(trees):
            if self.cache is not None:
                ids = self.cache.lookup(ntype, ids)
            counts = torch.bincount(self.owners[ntype][ids], minlength=1)
            for part, n in enumerate(counts.tolist()):
                if n:
                    per_owner[part] = per_owner.get(part, 0) + n * self.row_bytes[ntype]
        for num_bytes in per_owner.values():
            self.bytes_sent += num_bytes
            if self.link is not None:
                self.link.wait(num_bytes)

    def remote_access_counts(self, batches: list[torch.Tensor],
                             world_size: int) -> dict[str, torch.Tensor]:
        """Remote row reads per type, int64 ``(N_t,)``, of this worker's share of ``batches``.

        The profiling pass of the cache: it samples with its own step salts, so it does not
        replay the training steps. The counts are returned on the host (cache planning).
        """
        counts = {t: torch.zeros(len(o), dtype=torch.int64, device=self.device)
                  for t, o in self.owners.items()}
        for i, seeds in enumerate(batches):
            mine = seeds[self.rank::world_size].to(self.device)
            trees = self._trees(mine, PROFILE_STEP_OFFSET + i)
            for ntype, ids in self._remote_ids(trees):
                counts[ntype] += torch.bincount(ids, minlength=len(counts[ntype]))
        return {t: c.cpu() for t, c in counts.items()}

    def step(self, seeds: torch.Tensor, step: int, coll: Collective) -> StepStats:
        """Train on this worker's share of the global batch ``seeds (B,)``; syncs gradients.

        With fp16 loss scaling the scaled gradients are summed (scaling is linear), so every
        rank sees the same gradients and takes or skips the step with the others.
        """
        mine = seeds[self.rank::coll.world_size].to(self.device)
        trees = self._trees(mine, step)
        self._fetch_remote_rows(trees)
        logits = self._logits(mine, trees, step, train=True)
        loss = F.cross_entropy(logits, self.labels[mine], reduction="sum") / len(seeds)
        self.optimizer.zero_grad(set_to_none=False)
        self.scaler.scale(loss).backward()
        self._sync_gradients(coll)
        self.scaler.step(self.optimizer)
        return StepStats.of_logits(float(coll.allreduce(loss.detach().reshape(1))),
                                   logits.detach(), self.labels[mine])

    def _sync_gradients(self, coll: Collective) -> None:
        embedding_ids = {id(m.weight) for m in self.model.modules()
                         if isinstance(m, nn.Embedding)}
        params = list(self.model.parameters())
        dense = [p for p in params if id(p) not in embedding_ids]
        flat = torch.cat([p.grad.reshape(-1) for p in dense])
        flat = self._allreduce(flat, coll)
        offset = 0
        for p in dense:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        for emb in (p for p in params if id(p) in embedding_ids):
            self._sync_rows(emb, coll)

    def _sync_rows(self, emb: torch.Tensor, coll: Collective) -> None:
        rows = torch.nonzero(emb.grad.abs().sum(1)).flatten()
        sizes = coll.allgather(torch.tensor([len(rows)], device=rows.device))
        padded = torch.full((int(max(s.item() for s in sizes)),), -1, dtype=torch.int64,
                            device=rows.device)
        padded[:len(rows)] = rows
        self.bytes_sent += padded.numel() * 8 * (coll.world_size - 1)
        union = torch.unique(torch.cat(coll.allgather(padded)))
        union = union[union >= 0]
        emb.grad[union] = self._allreduce(emb.grad[union].contiguous(), coll)

    def _allreduce(self, tensor: torch.Tensor, coll: Collective) -> torch.Tensor:
        num_bytes = ring_allreduce_bytes(tensor.numel() * tensor.element_size(), coll.world_size)
        self.bytes_sent += num_bytes
        if self.link is not None and num_bytes:
            self.link.wait(num_bytes)
        return coll.allreduce(tensor)

    def evaluate(self, seeds: torch.Tensor, step: int, coll: Collective) -> StepStats:
        """Accuracy on this worker's share of ``seeds`` (no traffic counted)."""
        mine = seeds[self.rank::coll.world_size].to(self.device)
        with torch.no_grad():
            logits = self._logits(mine, self._trees(mine, step), step, train=False)
        return StepStats.of_logits(float(F.cross_entropy(logits, self.labels[mine])), logits,
                                   self.labels[mine])

