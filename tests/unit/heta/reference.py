"""The single-process reference every distributed Heta test compares with (K = 1, no group)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from hetray.heta.collective import CollectiveHub, LocalCollective
from hetray.heta.config import ConvKind, HolderConfig, Mode, ModelConfig, TrainConfig
from hetray.heta.holder import HolderCore
from hetray.heta.raf import EVAL_STEP_OFFSET, StepStats


def exact_config(conv: ConvKind, **model) -> TrainConfig:
    """Float64, tiny, no selection: Adam keeps summation-order differences below 1e-5."""
    return TrainConfig(model=ModelConfig(conv=conv, hidden_dim=16, fanouts=(4, 3), seed=1,
                                         float64=True, **model),
                       batch_size=64, lr=0.02, select_best=False)


def single_process(hg, train: TrainConfig, epochs: int,
                   ) -> tuple[HolderCore, list[list[StepStats]]]:
    """One holder with every subtree, stepped as the driver numbers steps."""
    core = HolderCore(hg, HolderConfig(mode=Mode.RAF, train=train, num_partitions=1), 0)
    history = []
    for epoch in range(epochs):
        batches = train.batches(hg.train_idx, epoch)
        history.append([core.train_step(seeds, epoch * len(batches) + i, LocalCollective())
                        for i, seeds in enumerate(batches)])
    return core, history


def holders_in_threads(hg, train: TrainConfig, num_parts: int, steps: int,
                       ) -> tuple[list[HolderCore], list[list[StepStats]]]:
    """``num_parts`` RAF holders as threads meeting in a hub: the first ``steps`` steps."""
    cfg = HolderConfig(mode=Mode.RAF, train=train, num_partitions=num_parts)
    cores = [HolderCore(hg, cfg, k) for k in range(num_parts)]
    batches: list[tuple[int, torch.Tensor]] = []
    epoch = 0
    while len(batches) < steps:
        epoch_seeds = train.batches(hg.train_idx, epoch)
        batches += [(epoch * len(epoch_seeds) + i, s) for i, s in enumerate(epoch_seeds)]
        epoch += 1
    hub = CollectiveHub(timeout_s=60)

    def work(k: int) -> list[StepStats]:
        coll = hub.join("test", k, num_parts)
        return [cores[k].train_step(seeds, i, coll) for i, seeds in batches[:steps]]

    with ThreadPoolExecutor(num_parts) as pool:
        histories = [f.result() for f in [pool.submit(work, k) for k in range(num_parts)]]
    return cores, histories


def accuracy(core: HolderCore, ids: torch.Tensor, batch_size: int = 1024) -> float:
    """Accuracy as the driver evaluates it (same batches, same sampling salts)."""
    stats = [core.eval_step(seeds, EVAL_STEP_OFFSET + i, LocalCollective())
             for i, seeds in enumerate(ids.split(batch_size))]
    return sum(s.num_correct for s in stats) / sum(s.num_seeds for s in stats)


def gathered(parts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The model's parameters from every holder's share (replicas must agree exactly)."""
    params: dict[str, torch.Tensor] = {}
    for part in parts:
        for name, value in part.items():
            if name in params:
                assert torch.equal(params[name], value), f"replicas of {name} differ"
            params[name] = value
    return params


def assert_same(expected, actual, atol: float = 1e-5):
    assert expected.keys() == actual.keys()
    for name, value in expected.items():
        assert torch.allclose(value, actual[name], atol=atol), name


def tiny_dblp(seed: int = 0, num_authors: int = 300):
    """A small graph with HeCo DBLP's schema: one relation enters the target ``author``.

    ``author <-pa- paper <-{rev_pa, rev_pc, rev_pt}- {author, conference, term}``; authors,
    papers and terms carry features, conferences are featureless; 3 planted classes.
    """
    from hetray.graph.hetero import HeteroGraph, build_heterograph

    gen = torch.Generator().manual_seed(seed)
    counts = {"author": num_authors, "paper": 2 * num_authors, "term": 80, "conference": 6}
    labels = torch.randint(0, 3, (num_authors,), generator=gen)
    paper_cls = torch.randint(0, 3, (counts["paper"],), generator=gen)
    edges = {}
    for dst, n_edges in (("author", 3 * num_authors), ("conference", counts["paper"]),
                         ("term", 4 * counts["paper"])):
        src = torch.randint(0, counts["paper"], (n_edges,), generator=gen)
        if dst == "author":  # papers mostly link authors of their class
            pool = [torch.nonzero(labels == c).flatten() for c in range(3)]
            pick = torch.randint(0, 10**6, (n_edges,), generator=gen)
            dst_ids = torch.stack([pool[int(c)][int(p) % len(pool[int(c)])]
                                   for c, p in zip(paper_cls[src], pick, strict=True)])
        else:
            dst_ids = torch.randint(0, counts[dst], (n_edges,), generator=gen)
        name = {"author": "pa", "conference": "pc", "term": "pt"}[dst]
        edges[("paper", name, dst)] = (src, dst_ids)
        edges[(dst, f"rev_{name}", "paper")] = (dst_ids, src)
    feats = {"author": torch.randn(num_authors, 8, generator=gen),
             "paper": torch.nn.functional.one_hot(paper_cls, 3).float()
             + 0.5 * torch.randn(counts["paper"], 3, generator=gen),
             "term": torch.randn(counts["term"], 4, generator=gen)}
    order = torch.randperm(num_authors, generator=gen)
    cut = num_authors // 3
    return HeteroGraph(name="tiny-dblp", graph=build_heterograph("tiny-dblp", edges, counts),
                       features=feats, target_type="author", labels=labels, num_classes=3,
                       train_idx=order[:cut], val_idx=order[cut:2 * cut],
                       test_idx=order[2 * cut:])
