"""A stock single-process DGL R-GCN, the accuracy yardstick next to hetray's models.

The model is ``HeteroGraphConv`` of ``GraphConv(norm='right')`` plus a per-type self-loop.

Glossary: ``L`` layers (= len(fanouts)); ``d`` hidden dim; ``C`` classes.

Layer ``l`` on block ``b``: ``h_dst = sum_r GraphConv_r(b, h_src) + W_self h_dst`` (ReLU
between layers), then a ``Linear(d, C)`` on the target type. Inputs: ``Linear(D_t, d)`` of
features, or a learnable embedding for featureless types. Mini-batches come from
``dgl.dataloading.MultiLayerNeighborSampler(fanouts)`` (``fanouts`` per relation, root
level first) with the same batch size, learning rate and epochs as hetray's runs.
"""

from __future__ import annotations

import logging

import dgl
import torch
from dgl import nn as dglnn
from torch import nn
from torch.nn import functional as F  # noqa: N812

from hetray.graph.hetero import HeteroGraph
from hetray.heta.raf import TrainConfig

logger = logging.getLogger(__name__)


class DglRgcn(nn.Module):
    """Stock heterograph R-GCN."""

    def __init__(self, hg: HeteroGraph, hidden_dim: int, num_layers: int) -> None:
        super().__init__()
        self.target_type = hg.target_type
        self.inputs = nn.ModuleDict({
            t: nn.Linear(hg.feature_dim(t), hidden_dim) if hg.feature_dim(t)
            else nn.Embedding(hg.num_nodes(t), hidden_dim) for t in hg.graph.ntypes})
        self.convs = nn.ModuleList([dglnn.HeteroGraphConv(
            {rel: dglnn.GraphConv(hidden_dim, hidden_dim, norm="right",
                                  allow_zero_in_degree=True) for rel in hg.graph.etypes},
            aggregate="sum") for _ in range(num_layers)])
        self.self_loops = nn.ModuleList([nn.ModuleDict({
            t: nn.Linear(hidden_dim, hidden_dim) for t in hg.graph.ntypes})
            for _ in range(num_layers)])
        self.classifier = nn.Linear(hidden_dim, hg.num_classes)

    def forward(self, blocks: list[dgl.DGLGraph], input_nodes: dict[str, torch.Tensor],
                features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits float32 ``(B, C)`` for the seeds of ``blocks[-1]``."""
        h = {t: self.inputs[t](features[t][ids]) if t in features else self.inputs[t](ids)
             for t, ids in input_nodes.items() if len(ids)}
        for i, (conv, block) in enumerate(zip(self.convs, blocks, strict=True)):
            out = conv(block, h)
            new = {}
            for t in block.dsttypes:
                if block.num_dst_nodes(t) == 0:
                    continue
                self_term = self.self_loops[i][t](h[t][:block.num_dst_nodes(t)])
                new[t] = out[t] + self_term if t in out else self_term
            h = new if i == len(blocks) - 1 else {t: F.relu(v) for t, v in new.items()}
        return self.classifier(h[self.target_type])


def _loader(hg: HeteroGraph, ids: torch.Tensor, config: TrainConfig,
            shuffle: bool) -> dgl.dataloading.DataLoader:
    sampler = dgl.dataloading.MultiLayerNeighborSampler(list(reversed(config.model.fanouts)))
    return dgl.dataloading.DataLoader(hg.graph, {hg.target_type: ids}, sampler,
                                      batch_size=config.batch_size, shuffle=shuffle)


def train_dgl_rgcn(hg: HeteroGraph, config: TrainConfig) -> dict[str, float]:
    """Train :class:`DglRgcn` like hetray's runs; returns train/val/test accuracy."""
    torch.manual_seed(config.model.seed)
    model = DglRgcn(hg, config.model.hidden_dim, config.model.depth)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    features = dict(hg.features)
    for _ in range(config.epochs):
        model.train()
        for input_nodes, output_nodes, blocks in _loader(hg, hg.train_idx, config, True):
            seeds = output_nodes[hg.target_type]
            loss = F.cross_entropy(model(blocks, input_nodes, features), hg.labels[seeds])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return {split: _accuracy(model, hg, getattr(hg, f"{split}_idx"), config, features)
            for split in ("train", "val", "test")}


def _accuracy(model: DglRgcn, hg: HeteroGraph, ids: torch.Tensor, config: TrainConfig,
              features: dict[str, torch.Tensor]) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for input_nodes, output_nodes, blocks in _loader(hg, ids, config, False):
            seeds = output_nodes[hg.target_type]
            pred = model(blocks, input_nodes, features).argmax(1)
            correct += int((pred == hg.labels[seeds]).sum())
    return correct / len(ids)
