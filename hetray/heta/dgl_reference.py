"""A stock single-process DGL R-GCN, the accuracy yardstick next to hetray's models.

The model is ``HeteroGraphConv`` of ``GraphConv(norm='right')`` plus a per-type self-loop.

Glossary: ``L`` layers (= len(fanouts)); ``d`` hidden dim; ``C`` classes; ``p`` dropout.

Layer ``l`` on block ``b``: ``h_dst = drop(relu(sum_r GraphConv_r(b, h_src) + W_self h_dst))``,
then a ``Linear(d, C)`` on the target type (dropout after every ReLU, as hetray's model).
Inputs: ``Linear(D_t, d)`` of features, or a learnable embedding for featureless types,
initialised like hetray's (:func:`~hetray.heta.models.init_embedding`, ``N(0, 1)`` by
default, which is also ``nn.Embedding``'s own default). It trains with the recipe of a
:class:`~hetray.heta.raf.TrainConfig`: Adam (lr, L2 weight decay), and either

- full-graph (``full_graph``): one step per epoch on all training ids, on blocks of *every*
  in-neighbour (``MultiLayerFullNeighborSampler``), which compute exactly the seeds' outputs
  of a forward pass over the whole graph; or
- mini-batches from ``MultiLayerNeighborSampler(fanouts)`` (per relation, root level first).

With ``select_best`` it validates after every epoch and reports the test numbers of the epoch
of best validation accuracy (the first, on ties), stopping after ``patience`` epochs without
improvement when that is set: hetray's selection rule.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import dgl
import torch
from dgl import nn as dglnn
from torch import nn
from torch.nn import functional as F  # noqa: N812

from hetray.graph.hetero import HeteroGraph
from hetray.heta.config import ModelConfig, TrainConfig
from hetray.heta.metrics import Evaluation, confusion_matrix
from hetray.heta.models import init_embedding

logger = logging.getLogger(__name__)

#: Seeds per evaluation batch.
EVAL_BATCH_SIZE = 1024
#: DGL's advice on every dataloader iteration (CPU affinity): noise for a yardstick.
AFFINITY_ADVICE = "Dataloader CPU affinity opt is not enabled"


class DglRgcn(nn.Module):
    """Stock heterograph R-GCN."""

    def __init__(self, hg: HeteroGraph, config: ModelConfig) -> None:
        super().__init__()
        dim = config.hidden_dim
        self.target_type = hg.target_type
        self.inputs = nn.ModuleDict({t: self._input(hg, t, config) for t in hg.graph.ntypes})
        self.convs = nn.ModuleList([dglnn.HeteroGraphConv(
            {rel: dglnn.GraphConv(dim, dim, norm="right", allow_zero_in_degree=True)
             for rel in hg.graph.etypes}, aggregate="sum") for _ in range(config.depth)])
        self.self_loops = nn.ModuleList([nn.ModuleDict({
            t: nn.Linear(dim, dim) for t in hg.graph.ntypes}) for _ in range(config.depth)])
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(dim, hg.num_classes)

    @staticmethod
    def _input(hg: HeteroGraph, ntype: str, config: ModelConfig) -> nn.Module:
        if hg.feature_dim(ntype):
            return nn.Linear(hg.feature_dim(ntype), config.hidden_dim)
        emb = nn.Embedding(hg.num_nodes(ntype), config.hidden_dim)
        init_embedding(emb.weight, config)
        return emb

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
                new[t] = self.dropout(F.relu(out[t] + self_term if t in out else self_term))
            h = new
        return self.classifier(h[self.target_type])


@dataclass(frozen=True, slots=True, kw_only=True)
class DglResult:
    """The selected epoch of a DGL run.

    Attributes:
        train: evaluation on the training ids.
        val: evaluation on the validation ids.
        test: evaluation on the test ids.
        best_epoch: the epoch the numbers are from (the last one without ``select_best``).
        epochs_run: epochs trained (fewer than asked when early stopping ended the run).
    """

    train: Evaluation
    val: Evaluation
    test: Evaluation
    best_epoch: int
    epochs_run: int

    def to_dict(self) -> dict[str, float]:
        """``{"train", "val", "test"}`` accuracies plus ``*_f1``, ``best_epoch``."""
        return {"train": self.train.acc, "val": self.val.acc, "test": self.test.acc,
                "val_f1": self.val.macro_f1, "test_f1": self.test.macro_f1,
                "best_epoch": self.best_epoch, "epochs_run": self.epochs_run}


def _sampler(config: TrainConfig) -> dgl.dataloading.BlockSampler:
    if config.full_graph:
        return dgl.dataloading.MultiLayerFullNeighborSampler(config.model.depth)
    return dgl.dataloading.MultiLayerNeighborSampler(list(reversed(config.model.fanouts)))


def _loader(hg: HeteroGraph, ids: torch.Tensor, config: TrainConfig, batch_size: int,
            shuffle: bool) -> dgl.dataloading.DataLoader:
    return dgl.dataloading.DataLoader(hg.graph, {hg.target_type: ids}, _sampler(config),
                                      batch_size=batch_size, shuffle=shuffle)


def _train_epoch(model: DglRgcn, hg: HeteroGraph, config: TrainConfig,
                 optimizer: torch.optim.Optimizer, features: dict[str, torch.Tensor]) -> None:
    model.train()
    size = len(hg.train_idx) if config.full_graph else config.batch_size
    shuffle = not config.full_graph  # one full batch: its order only reshuffles dropout
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", AFFINITY_ADVICE)
        for input_nodes, output_nodes, blocks in _loader(hg, hg.train_idx, config, size,
                                                         shuffle):
            seeds = output_nodes[hg.target_type]
            loss = F.cross_entropy(model(blocks, input_nodes, features), hg.labels[seeds])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def evaluate(model: DglRgcn, hg: HeteroGraph, ids: torch.Tensor, config: TrainConfig,
             features: dict[str, torch.Tensor]) -> Evaluation:
    """Accuracy and macro-F1 of ``model`` on target ids ``ids`` (int64 ``(n,)``).

    Runs under ``fork_rng``: DGL's loader draws from torch's RNG, and validating must not
    change the dropout masks of the epochs that follow.
    """
    model.eval()
    matrix = torch.zeros(hg.num_classes, hg.num_classes, dtype=torch.int64)
    with torch.no_grad(), torch.random.fork_rng(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", AFFINITY_ADVICE)
        for input_nodes, output_nodes, blocks in _loader(hg, ids, config, EVAL_BATCH_SIZE,
                                                         False):
            seeds = output_nodes[hg.target_type]
            pred = model(blocks, input_nodes, features).argmax(1)
            matrix += confusion_matrix(pred, hg.labels[seeds], hg.num_classes)
    return Evaluation.of(matrix)


def train_dgl_rgcn(hg: HeteroGraph, config: TrainConfig) -> DglResult:
    """Train :class:`DglRgcn` with ``config``'s recipe; the selected epoch's evaluations."""
    torch.manual_seed(config.model.seed)
    dgl.seed(config.model.seed)  # the loader's shuffle and the neighbour sampler
    model = DglRgcn(hg, config.model)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr,
                                 weight_decay=config.weight_decay)
    features = dict(hg.features)
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    epoch = -1
    for epoch in range(config.epochs):
        _train_epoch(model, hg, config, optimizer, features)
        if not config.select_best:
            continue
        val = evaluate(model, hg, hg.val_idx, config, features).acc
        if best is None or val > best[0]:
            best = (val, epoch, {k: v.clone() for k, v in model.state_dict().items()})
        elif config.patience and epoch - best[1] >= config.patience:
            break
    if best is not None:
        model.load_state_dict(best[2])
    evals = [evaluate(model, hg, ids, config, features)
             for ids in (hg.train_idx, hg.val_idx, hg.test_idx)]
    return DglResult(train=evals[0], val=evals[1], test=evals[2],
                     best_epoch=best[1] if best is not None else epoch,
                     epochs_run=epoch + 1)
