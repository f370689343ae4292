"""PRES: prediction-correction of pending-event memories and memory coherence (pure torch).

Paper: Su, Zou, Wu, "PRES: Toward Scalable Memory-Based Dynamic Graph Neural Networks",
ICLR 2024, https://arxiv.org/abs/2402.04284. Its method section is not public: the form
below is hetray's **reconstruction** of the paper's "GMM updated with MLE" prediction and
its fusion (``docs/pres.md`` says what is verified and what is not).

Glossary: ``N`` nodes, ``U`` rows a batch reads, ``D`` memory dim, ``K`` mixture
components, ``B`` events per batch, ``c_i`` events of node ``i`` in one batch.

Why memories miss transitions. In the TGL layout (:mod:`hetray.temporal.memory`) a batch
updates each row once from its one pending mail, and a node with ``c_i >= 2`` events keeps
only its last event's mail (last writer wins): the other ``c_i - 1`` transitions of the
batch are lost. A trainer that keeps, per node, how many it lost at its last write
(``missed``, written only for the batch's endpoints: ``O(B)``) knows which rows a read
serves without them.

Prediction-correction, per batch, on the ``U`` rows read (never on all ``N``):

1. the model's updater computes ``s_bar = UPD(s, mail)`` (U, D); its transition is
   ``delta = s_bar - s``;
2. for each row with ``m = missed > 0``: the mixture's responsibilities ``r_ik`` of its
   ``delta`` give the mode it moves in, ``mu_i = sum_k r_ik mu_k`` and
   ``v_i = sum_k r_ik (var_k + mu_k^2) - mu_i^2``; the prediction is
   ``s_hat = s_bar + m mu_i`` (variance ``m v_i``);
3. fusion ``s = (1 - gamma) s_bar + gamma s_hat = s_bar + gamma m mu_i``; ``auto`` takes
   gamma per element from the two mean squared errors against the exact memory, that of
   ``s_bar`` (which misses ``m`` transitions: ``m (v_i + mu_i^2)``) and that of ``s_hat``
   (``m v_i``): ``gamma = (v + mu^2) / (2 v + mu^2)``, in [1/2, 1];
4. the batch's endpoints' observed transitions update the mixture (online maximum
   likelihood, statistics decayed by ``rho`` per batch), and their ``missed`` becomes
   ``c_i - 1``.

The fused rows feed the model's embeddings (the loss), and by default are written back;
``write_back: false`` writes ``s_bar`` (the released code: a read-time correction). The
correction is a statistic (no gradient); the gradient reaches ``s_bar`` unscaled.

Memory coherence: ``beta * (1 - mean_i cos(s_new_i, s_prev_i))`` over the batch's
endpoints, **with** its gradient into the memory updater. The released code
(``jwsu825/MDGNN_BS``, ``train.py``) ``.detach()``es this term, so it adds a constant to the
loss and nothing to training; the paper presents it as a learning objective that smooths
memory (its ablation trains TGN-PRES-S with it alone), which only a term with a gradient
can do, so hetray keeps the gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.nn import functional

from hetray.temporal.pres_config import GammaRule, PresConfig

#: Variance floor of every component and dimension (keeps the likelihood finite).
VAR_FLOOR = 1e-6


class OnlineGMM:
    """A diagonal ``K``-component Gaussian mixture over ``D``-vectors, fitted online.

    Sufficient statistics per component (float64): ``n_k``, ``S1_k = sum r x``,
    ``S2_k = sum r x^2``, each decayed by ``forgetting`` (``rho``) before a batch is added;
    the parameters are their maximum-likelihood values ``pi_k = n_k / sum n``,
    ``mu_k = S1_k / n_k``, ``var_k = S2_k / n_k - mu_k^2`` (floored at :data:`VAR_FLOOR`).
    With ``K = 1`` and ``rho = 1`` they are the sample mean and variance of every vector
    seen. The first batch is split among ``K`` farthest-apart seeds (:meth:`_first`).

    Example:
        >>> gmm = OnlineGMM(components=1, dim=2, forgetting=1.0)
        >>> gmm.update(torch.tensor([[0.0, 1.0], [2.0, 3.0]]))
        >>> gmm.mean().tolist(), gmm.var().tolist()
        ([[1.0, 2.0]], [[1.0, 1.0]])
    """

    def __init__(self, components: int, dim: int, forgetting: float) -> None:
        self.components, self.dim, self.forgetting = components, dim, forgetting
        self.count = torch.zeros(components, dtype=torch.float64)
        self.sum1 = torch.zeros(components, dim, dtype=torch.float64)
        self.sum2 = torch.zeros(components, dim, dtype=torch.float64)

    @property
    def fitted(self) -> bool:
        """Whether any vector was seen."""
        return bool(self.count.sum() > 0)

    def weights(self) -> torch.Tensor:
        """``pi`` float64 (K,)."""
        return self.count / self.count.sum().clamp_min(1e-300)

    def mean(self) -> torch.Tensor:
        """``mu`` float64 (K, D)."""
        return self.sum1 / self.count.clamp_min(1e-300)[:, None]

    def var(self) -> torch.Tensor:
        """``var`` float64 (K, D), at least :data:`VAR_FLOOR`."""
        second = self.sum2 / self.count.clamp_min(1e-300)[:, None]
        return (second - self.mean() ** 2).clamp_min(VAR_FLOOR)

    def responsibilities(self, x: torch.Tensor) -> torch.Tensor:
        """Posterior of each component: x (n, D) -> float64 (n, K), rows summing to 1."""
        x = x.double()
        mu, inv = self.mean(), 1.0 / self.var()
        # sum_d (x - mu)^2 / var as three products: O(n K D), no (n, K, D) array
        quad = (x * x) @ inv.T - 2.0 * x @ (mu * inv).T + (mu * mu * inv).sum(dim=1)
        log_p = (self.weights().clamp_min(1e-300).log()
                 - 0.5 * (inv.log().neg().sum(dim=1) + self.dim * math.log(2 * math.pi))
                 - 0.5 * quad)
        return torch.softmax(log_p, dim=1)

    def update(self, x: torch.Tensor) -> None:
        """Decay the statistics by ``rho`` and add the batch ``x`` float (n, D)."""
        x = x.detach().double()
        if len(x) == 0:
            return
        resp = self.responsibilities(x) if self.fitted else self._first(x)
        rho = self.forgetting
        self.count = rho * self.count + resp.sum(dim=0)
        self.sum1 = rho * self.sum1 + resp.T @ x
        self.sum2 = rho * self.sum2 + resp.T @ (x * x)

    def _first(self, x: torch.Tensor) -> torch.Tensor:
        """Responsibilities float64 (n, K) of the first batch: its nearest of K seeds.

        The seeds are ``K`` farthest-apart points (the first the one nearest the mean).
        """
        picks = [int(((x - x.mean(dim=0)) ** 2).sum(dim=1).argmin())]
        dist = ((x - x[picks[0]]) ** 2).sum(dim=1)
        while len(picks) < self.components:
            picks.append(int(dist.argmax()))
            dist = torch.minimum(dist, ((x - x[picks[-1]]) ** 2).sum(dim=1))
        nearest = torch.cdist(x, x[picks]).argmin(dim=1)
        return functional.one_hot(nearest, self.components).double()

    def predict(self, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance of the next transition in the mode of each row's ``delta``.

        Args:
            delta: float (n, D) observed transitions.

        Returns:
            float64 (n, D) ``mu_i = sum_k r_ik mu_k`` and ``v_i`` (see the module doc).
        """
        resp = self.responsibilities(delta)
        mu = self.mean()
        mean = resp @ mu
        second = resp @ (self.var() + mu * mu)
        return mean, (second - mean * mean).clamp_min(VAR_FLOOR)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The statistics (``torch.save``-able, read back with ``weights_only``)."""
        return {"count": self.count.clone(), "sum1": self.sum1.clone(),
                "sum2": self.sum2.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Put back a :meth:`state_dict`.

        Raises:
            ValueError: a statistic of another shape.
        """
        for name in ("count", "sum1", "sum2"):
            mine, given = getattr(self, name), state[name]
            if given.shape != mine.shape:
                raise ValueError(f"PRES mixture {name}: expected {tuple(mine.shape)}, "
                                 f"got {tuple(given.shape)}")
            setattr(self, name, given.clone().double())


class FusionErrors:
    """Online error moments of the two estimates of a missed transition, per dimension.

    For a node's transition ``delta`` and the mixture's prediction ``mu`` of it made at the
    node's previous transition, the computed memory errs by ``e_c = delta`` (it misses the
    transition) and the predicted one by ``e_p = delta - mu``. With the decayed sums of
    ``e_c^2``, ``e_p^2`` and ``e_c e_p`` (float64 (D,)), the minimum-variance fusion of the
    two correlated estimates (Kalman's gain with a cross term) is
    ``gamma = (var_c - cov) / (var_c + var_p - 2 cov)``, clipped to [0, 1]: 0 until a
    prediction has been checked, near 1 when predictions are good, near 0 when they are no
    better than nothing.

    Example:
        >>> errors = FusionErrors(dim=1, forgetting=1.0)
        >>> errors.update(torch.tensor([[2.0]]), torch.tensor([[2.0]]))
        >>> errors.gamma().tolist()
        [1.0]
    """

    def __init__(self, dim: int, forgetting: float) -> None:
        self.forgetting = forgetting
        self.sums = torch.zeros(3, dim, dtype=torch.float64)  # e_c^2, e_p^2, e_c e_p

    def update(self, delta: torch.Tensor, predicted: torch.Tensor) -> None:
        """Add observed transitions float (n, D) and their predictions (n, D)."""
        if not len(delta):
            return
        e_c, e_p = delta.double(), delta.double() - predicted.double()
        batch = torch.stack([(e_c * e_c).sum(0), (e_p * e_p).sum(0), (e_c * e_p).sum(0)])
        self.sums = self.forgetting * self.sums + batch

    def gamma(self) -> torch.Tensor:
        """float64 (D,) the fusion weight of the prediction."""
        var_c, var_p, cov = self.sums
        denom = var_c + var_p - 2.0 * cov  # = sum mu^2 >= 0
        safe = torch.where(denom > 0, denom, torch.ones_like(denom))
        return torch.where(denom > 0, (var_c - cov) / safe, torch.zeros_like(denom)).clamp(0, 1)


def fusion_weight(errors: FusionErrors, cfg: PresConfig) -> torch.Tensor:
    """``gamma`` float64 (D,): :meth:`FusionErrors.gamma` (``auto``) or the fixed constant."""
    if cfg.gamma_rule == GammaRule.FIXED:
        return torch.full_like(errors.sums[0], cfg.gamma)
    return errors.gamma()


def missed_weight(gamma: torch.Tensor, missed: torch.Tensor) -> torch.Tensor:
    """``gamma + gamma^2 + ... + gamma^m``: float64 (n, D) from gamma (D,), m int64 (n,).

    The weight of the predicted transition for ``m`` missed ones: each predicted from the
    one before with weight ``gamma``, so ``m gamma`` while ``gamma`` is near 1, about
    ``gamma`` when it is small (transitions that do not persist add nothing).
    """
    m = missed.double()[:, None]
    near_one = gamma >= 1.0 - 1e-9
    ratio = torch.where(near_one, torch.zeros_like(gamma), gamma)
    geometric = ratio * (1.0 - ratio ** m) / (1.0 - ratio)
    return torch.where(near_one, m * gamma, geometric)


@dataclass(slots=True)
class BatchCorrection:
    """One batch's correction, made by :meth:`Pres.begin`; the model calls it on ``s_bar``.

    Attributes:
        old: float32 (U, D) the rows' memory as read (``s``).
        missed: int64 (U,) transitions each row's memory misses.
        gamma: float64 (D,) the fusion weight of the prediction.
        gmm: the trainer's mixture.
        computed: float32 (U, D) ``s_bar`` (detached), set by the call.
        corrected_rows: rows the call changed.
    """

    old: torch.Tensor
    missed: torch.Tensor
    gamma: torch.Tensor
    gmm: OnlineGMM
    computed: torch.Tensor | None = None
    corrected_rows: int = 0

    def __call__(self, memory: torch.Tensor) -> torch.Tensor:
        """Fuse: ``memory`` float32 (U, D) ``s_bar`` -> (U, D), gradient kept on ``s_bar``."""
        self.computed = memory.detach()
        rows = torch.nonzero(self.missed > 0).squeeze(1)
        if not len(rows) or not self.gmm.fitted or not bool((self.gamma > 0).any()):
            return memory
        mean, _ = self.gmm.predict(self.computed[rows] - self.old[rows])
        shift = missed_weight(self.gamma, self.missed[rows]) * mean
        self.corrected_rows = len(rows)
        return memory.index_add(0, rows, shift.to(memory.dtype))


@dataclass(slots=True)
class Pres:
    """The trainer's PRES state: the mixture, the fusion's error moments, per-node counts.

    Args:
        cfg: the settings.
        num_nodes: ``N``.
        memory_dim: ``D``.

    Attributes:
        gmm: the online mixture over transitions.
        errors: the error moments the ``auto`` fusion weight comes from.
        missed: int64 (N,) transitions node ``i``'s stored memory misses (set at its last
            write; zeroed with the memory at each epoch start).
        predicted: float32 (N, D) the mixture's prediction of node ``i``'s next transition,
            made at its last write (checked against the transition its next read observes).
        has_prediction: bool (N,) whether ``predicted`` holds one.

    Every per-batch operation touches the batch's rows only: ``O(U K D)``.
    """

    cfg: PresConfig
    num_nodes: int
    memory_dim: int
    gmm: OnlineGMM = field(init=False)
    errors: FusionErrors = field(init=False)
    missed: np.ndarray = field(init=False)
    predicted: np.ndarray = field(init=False)
    has_prediction: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.gmm = OnlineGMM(self.cfg.components, self.memory_dim, self.cfg.forgetting)
        self.errors = FusionErrors(self.memory_dim, self.cfg.forgetting)
        self.missed = np.zeros(self.num_nodes, np.int64)
        self.predicted = np.zeros((self.num_nodes, self.memory_dim), np.float32)
        self.has_prediction = np.zeros(self.num_nodes, bool)

    def reset_memory(self) -> None:
        """The memory was zeroed (epoch start): nothing is missed or predicted any more."""
        self.missed[:] = 0
        self.has_prediction[:] = False

    def begin(self, nodes: np.ndarray, old: torch.Tensor) -> BatchCorrection:
        """The correction of a batch reading ``nodes`` int64 (U,) with memory ``old`` (U, D)."""
        return BatchCorrection(old=old, missed=torch.from_numpy(self.missed[nodes]),
                               gamma=fusion_weight(self.errors, self.cfg), gmm=self.gmm)

    def finish(self, correction: BatchCorrection, endpoints: tuple[np.ndarray, np.ndarray],
               src: np.ndarray, dst: np.ndarray) -> None:
        """After the step: check and make predictions, fit the transitions, count misses.

        Args:
            correction: the batch's correction (called by the model).
            endpoints: the distinct sources and destinations: their rows int64 (E,) in the
                batch's rows and their node ids int64 (E,).
            src: int64 (B,) sources.
            dst: int64 (B,) destinations.
        """
        rows, nodes = endpoints
        if correction.computed is not None and len(rows):
            index = torch.from_numpy(rows)
            delta = correction.computed[index] - correction.old[index]
            known = self.has_prediction[nodes]
            self.errors.update(delta[torch.from_numpy(known)],
                               torch.from_numpy(self.predicted[nodes[known]]))
            self.gmm.update(delta)
            self.predicted[nodes] = self.gmm.predict(delta)[0].float().numpy()
            self.has_prediction[nodes] = True
        ends, counts = np.unique(np.concatenate([src, dst]), return_counts=True)
        self.missed[ends] = counts - 1

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Everything above as tensors (saved with the trainer's checkpoint)."""
        return {**self.gmm.state_dict(), "errors": self.errors.sums.clone(),
                "missed": torch.from_numpy(self.missed.copy()),
                "predicted": torch.from_numpy(self.predicted.copy()),
                "has_prediction": torch.from_numpy(self.has_prediction.copy())}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Put back a :meth:`state_dict`.

        Raises:
            ValueError: a state of another shape (another model or stream).
        """
        for name in ("missed", "predicted", "has_prediction"):
            if tuple(state[name].shape) != getattr(self, name).shape:
                raise ValueError(f"PRES {name}: expected {getattr(self, name).shape}, got "
                                 f"{tuple(state[name].shape)}")
        if state["errors"].shape != self.errors.sums.shape:
            raise ValueError(f"PRES errors: expected {tuple(self.errors.sums.shape)}, got "
                             f"{tuple(state['errors'].shape)}")
        self.gmm.load_state_dict(state)
        self.errors.sums = state["errors"].clone().double()
        self.missed = state["missed"].numpy().astype(np.int64, copy=True)
        self.predicted = state["predicted"].numpy().astype(np.float32, copy=True)
        self.has_prediction = state["has_prediction"].numpy().astype(bool, copy=True)


def coherence_loss(new: torch.Tensor, prev: torch.Tensor, beta: float) -> torch.Tensor:
    """``beta * (1 - mean cos(new, prev))``: new float32 (E, D) with grad, prev (E, D) data.

    Rows whose previous memory is zero (a node's first event) contribute ``cos = 0`` and no
    gradient.
    """
    if not len(new):
        return new.sum() * 0.0
    return beta * (1.0 - functional.cosine_similarity(new, prev, dim=1).mean())
