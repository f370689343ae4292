"""The experiments: in-distribution, cross-model (held-out families), cross-device (few-shot).

- :func:`train_cdmpp` fits min-max + PE inputs, Box-Cox targets and the cost model on a
  :class:`~hetray.latency.dataset.Programs` subset; ``fit_fn`` is :func:`hetray.latency.train.fit`
  in-process or ``hetray.actors.latency.fit_ray`` (Ray Train).
- :func:`cross_model`: train on every family but ``holdout``, test on ``holdout`` (all devices).
- :func:`cross_device`: pre-train on ``sources`` with CMD towards the unlabeled target rows,
  then fine-tune on ``K`` target tasks chosen by KMeans or at random; zero-shot is the
  pre-trained model unchanged. Each is scored on the target rows of the tasks it did not see.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hetray.latency.baselines import (
    TreeBaseline,
    device_matrix,
    mape,
    mean_per_task,
    task_median_oracle,
    within_task_spearman,
)
from hetray.latency.dataset import Programs
from hetray.latency.encoding import MinMax
from hetray.latency.sampling import kmeans_tasks, random_tasks
from hetray.latency.train import (
    Batchable,
    FitJob,
    FitResult,
    Targets,
    TrainConfig,
    finetune_config,
    fit,
    load_model,
    predict,
)

FitFn = Callable[[FitJob], FitResult]


@dataclass(frozen=True, slots=True)
class Trained:
    """A fitted CDMPP predictor: input scaling, target map, model state, config, fit seconds."""

    norm: MinMax
    targets: Targets
    state: dict
    config: TrainConfig
    seconds: float

    def inputs(self, data: Programs, with_y: bool = False) -> Batchable:
        """Model inputs of ``data`` (targets included when ``with_y``)."""
        x = self.norm.encode(data.leaves, data.positions, data.mask)
        y = self.targets.encode(data.latency) if with_y else np.zeros(0, np.float32)
        return Batchable(x, data.mask, device_matrix(data.device), y)

    def predict(self, data: Programs) -> np.ndarray:
        """Predicted latency (s) of every row, shape ``(R,)``."""
        model = load_model(self.state, self.config.model)
        return self.targets.decode(predict(model, self.inputs(data)))


def train_cdmpp(train: Programs, cfg: TrainConfig, target: Programs | None = None,
                fit_fn: FitFn = fit) -> Trained:
    """Fit scaling, targets and the model on ``train`` (CMD towards ``target`` if given)."""
    norm, targets = MinMax.fit(train.leaves, train.mask), Targets.fit(train.latency)
    shell = Trained(norm, targets, {}, cfg, 0.0)
    job = FitJob(shell.inputs(train, with_y=True), cfg,
                 shell.inputs(target) if target is not None else None)
    result = fit_fn(job)
    return Trained(norm, targets, result.state, cfg, result.seconds)


def finetune(base: Trained, rows: Programs, epochs: int, fit_fn: FitFn = fit) -> Trained:
    """Continue training ``base`` on ``rows`` (same scaling and targets)."""
    cfg = finetune_config(base.config, epochs)
    result = fit_fn(FitJob(base.inputs(rows, with_y=True), cfg, None, base.state))
    return Trained(base.norm, base.targets, result.state, cfg, result.seconds)


def stratified_split(latency: np.ndarray, every: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """CDMPP's split: sort by latency, every ``every``-th row to test -> (train, test) indices."""
    order = np.argsort(latency, kind="stable")
    test = np.zeros(len(latency), bool)
    test[order[every - 1::every]] = True
    return np.flatnonzero(~test), np.flatnonzero(test)


def _compared(test: Programs, cdmpp: np.ndarray, gbt: np.ndarray) -> dict[str, float]:
    """MAPE (%) of both predictors on ``test`` and how well each ranks a task's schedules.

    Also the task-median oracle's MAPE: the error left by the spread of schedules alone.
    """
    return {"mape_cdmpp": mape(cdmpp, test.latency), "mape_gbt": mape(gbt, test.latency),
            "mape_task_oracle": mape(task_median_oracle(test), test.latency),
            "spearman_within_task_cdmpp": within_task_spearman(cdmpp, test),
            "spearman_within_task_gbt": within_task_spearman(gbt, test)}


def in_distribution(data: Programs, cfg: TrainConfig, fit_fn: FitFn = fit) -> dict[str, float]:
    """Stratified 80/20 split: CDMPP vs GBT vs mean-per-task MAPE (%), and fit seconds."""
    tr, te = stratified_split(data.latency)
    train, test = data.subset(tr), data.subset(te)
    model = train_cdmpp(train, cfg, fit_fn=fit_fn)
    gbt = TreeBaseline(cfg.seed).fit(train)
    return {**_compared(test, model.predict(test), gbt.predict(test)),
            "mape_mean_per_task": mape(mean_per_task(train, test), test.latency),
            "seconds_cdmpp": model.seconds, "seconds_gbt": gbt.seconds}


def cross_model(data: Programs, holdout: tuple[str, ...], cfg: TrainConfig,
                fit_fn: FitFn = fit) -> dict:
    """Train without the ``holdout`` families, test on them; MAPE (%) and fit seconds.

    ``by_family`` holds the same comparison for each held-out family.
    """
    held = np.isin(data.family, holdout)
    train, test = data.subset(~held), data.subset(held)
    model = train_cdmpp(train, cfg, target=test, fit_fn=fit_fn)
    gbt = TreeBaseline(cfg.seed).fit(train)
    ours, theirs = model.predict(test), gbt.predict(test)
    by_family = {}
    for family in holdout:
        rows = test.family == family
        by_family[family] = _compared(test.subset(rows), ours[rows], theirs[rows])
    return {**_compared(test, ours, theirs), "by_family": by_family,
            "mape_device_mean": mape(mean_per_task(train, test), test.latency),
            "seconds_cdmpp": model.seconds, "seconds_gbt": gbt.seconds,
            "train_rows": float(len(train)), "test_rows": float(len(test))}


@dataclass(frozen=True, slots=True, kw_only=True)
class CrossDevice:
    """Cross-device settings: sources, target, ``k`` tasks, fine-tune epochs, random draws."""

    sources: tuple[str, ...] = ("t1-x86-64", "t1-haswell")
    target: str = "t1-znver4"
    k: int = 10
    finetune_epochs: int = 40
    random_draws: int = 3


def _scored(model: Trained, target: Programs, seen: list[str]) -> float:
    test = target.subset(~np.isin(target.task, seen))
    return mape(model.predict(test), test.latency)


def cross_device(data: Programs, setup: CrossDevice, cfg: TrainConfig,
                 fit_fn: FitFn = fit) -> tuple[dict[str, float], Trained]:
    """Pre-train on the sources, fine-tune on ``k`` target tasks; MAPE (%) of each variant.

    Returns the metrics and the KMeans-fine-tuned model.
    """
    source = data.subset(np.isin(data.device, setup.sources))
    target = data.subset(data.device == setup.target)
    base = train_cdmpp(source, cfg, target=target, fit_fn=fit_fn)
    x = base.inputs(target).x.reshape(len(target), -1)
    start = time.perf_counter()
    chosen = kmeans_tasks(x, target.task, setup.k, seed=cfg.seed)
    select_s = time.perf_counter() - start
    tuned = finetune(base, target.subset(np.isin(target.task, chosen)), setup.finetune_epochs,
                     fit_fn)
    randoms = []
    for draw in range(setup.random_draws):
        picked = random_tasks(target.task, setup.k, seed=cfg.seed + 1 + draw)
        rand = finetune(base, target.subset(np.isin(target.task, picked)), setup.finetune_epochs,
                        fit_fn)
        randoms.append(_scored(rand, target, picked))
    gbt = TreeBaseline(cfg.seed).fit(data.subset(np.isin(data.device, setup.sources)
                                                 | ((data.device == setup.target)
                                                    & np.isin(data.task, chosen))))
    test = target.subset(~np.isin(target.task, chosen))
    compared = _compared(test, tuned.predict(test), gbt.predict(test))
    metrics = {"mape_zero_shot": _scored(base, target, chosen),
               "mape_kmeans": compared["mape_cdmpp"],
               "mape_random": float(np.mean(randoms)), "mape_random_draws": randoms,
               "mape_gbt": compared["mape_gbt"], "mape_task_oracle": compared["mape_task_oracle"],
               "spearman_within_task_kmeans": compared["spearman_within_task_cdmpp"],
               "spearman_within_task_gbt": compared["spearman_within_task_gbt"],
               "seconds_pretrain": base.seconds, "seconds_finetune": tuned.seconds,
               "seconds_kmeans_select": select_s, "seconds_gbt": gbt.seconds,
               "kmeans_tasks": chosen}
    return metrics, tuned
