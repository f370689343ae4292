"""One training or evaluation step of a memory-based TGNN.

Its link-prediction metrics are in :mod:`hetray.temporal.link_metrics`.

Glossary: ``B`` events per batch, ``R = 3B`` roots, ``U`` fetched nodes, ``K`` neighbours.

A step is stage 4 of MSPipe: it takes a sampled batch and the memory rows read for it,
runs the model, and returns the write-back (stage 5's input) as a
:class:`~hetray.temporal.memory.MemoryUpdate`. Given the trainer's
:class:`~hetray.temporal.pres.Pres`, a step corrects the memory of rows that miss
transitions, adds the memory-coherence term to the loss and updates PRES's state; given
the trainer's :class:`~hetray.temporal.vca.Vca`, it adds the volatility-aware penalty on the
batch's soft errors. Without them, it runs exactly the plain step. A plain step runs where
the model's parameters are (its inputs move there; scores and the write-back come back to
the host); PRES and VCA steps run on the CPU.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from hetray.accel.precision import LossScaler, autocast
from hetray.accel.specs import Precision
from hetray.temporal.batches import SampledBatch
from hetray.temporal.memory import MemoryRows, MemoryUpdate, build_update
from hetray.temporal.models import MemoryTGNN, ModelInputs, ModelOutputs
from hetray.temporal.pres import BatchCorrection, Pres, coherence_loss
from hetray.temporal.vca import Vca


@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    """What a step produced.

    Attributes:
        loss: mean BCE loss (0 in evaluation). update: the write-back.
        pos_score, neg_score: float64 (B,) sigmoid scores. step_s: seconds spent.
    """

    loss: float
    update: MemoryUpdate
    pos_score: np.ndarray
    neg_score: np.ndarray
    step_s: float


def host_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing ``array``'s memory, copying only read-only arrays (Ray hands those)."""
    return torch.from_numpy(np.require(array, requirements="W"))


def batch_tensors(batch: SampledBatch) -> dict[str, torch.Tensor]:
    """The batch's share of :class:`ModelInputs` on the host: roots, neighbours, times, features.

    ``root_idx`` int64 (R,), ``root_t`` float64 (R,), ``nbr_idx`` int64 (R, K), ``nbr_mask``
    bool (R, K), ``nbr_dt`` float32 (R, K), ``nbr_feat`` float32 (R, K, D_e).
    """
    t = batch.t
    root_t = torch.from_numpy(np.concatenate([t, t, t]))
    nbr_dt = root_t[:, None].numpy() - batch.nbrs.t
    num_roots, k = batch.nbr_idx.shape
    feat = batch.nbr_feat if batch.nbr_feat.ndim == 3 else \
        np.zeros((num_roots, k, batch.edge_feat.shape[1]), np.float32)
    return {"root_idx": host_tensor(batch.root_idx), "root_t": root_t,
            "nbr_idx": host_tensor(batch.nbr_idx), "nbr_mask": host_tensor(batch.nbrs.mask),
            "nbr_dt": host_tensor(nbr_dt.astype(np.float32)), "nbr_feat": host_tensor(feat)}


def to_inputs(batch: SampledBatch, rows: MemoryRows, memory: np.ndarray) -> ModelInputs:
    """Tensors for the model; ``memory`` float32 (U, D) may be a mitigated copy of rows'."""
    return ModelInputs(memory=host_tensor(memory), mem_ts=host_tensor(rows.mem_ts),
                       mail=host_tensor(rows.mail), mail_ts=host_tensor(rows.mail_ts),
                       **batch_tensors(batch))


def _update_of(batch: SampledBatch, new_memory: torch.Tensor,
               new_mem_ts: torch.Tensor) -> MemoryUpdate:
    """The write-back on the host (the memory store's side), whatever device computed it."""
    return build_update(batch.src, batch.dst, batch.t, batch.edge_feat,
                        new_memory.cpu().numpy(), new_mem_ts.cpu().numpy())


def model_device(model: nn.Module) -> torch.device:
    """Where ``model``'s parameters live (its inputs are moved there)."""
    return next(model.parameters()).device


def _pres_forward(model: MemoryTGNN, x: ModelInputs, batch: SampledBatch,
                  pres: Pres) -> tuple[ModelOutputs, BatchCorrection, MemoryUpdate]:
    """The model with PRES's correction; returns its outputs, the correction, the write-back.

    ``write_back`` off: the write-back holds the uncorrected memory ``s_bar``.
    """
    correction = pres.begin(batch.nodes, x.memory)
    out = model(x, correct=correction)
    new_memory = out.new_memory
    if not pres.cfg.write_back and correction.computed is not None:
        new_memory = correction.computed[x.root_idx[:2 * batch.size]]
    return out, correction, _update_of(batch, new_memory, out.new_mem_ts)


def _endpoints(batch: SampledBatch) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows int64 (E,) of the batch's sources and destinations, and their nodes."""
    rows = np.unique(batch.root_idx[:2 * batch.size])
    return rows, batch.nodes[rows]


def step_result(loss: torch.Tensor | float, update: MemoryUpdate, out: ModelOutputs,
                start: float) -> StepResult:
    """The step's result; ``step_s`` runs from ``start`` until the scores reached the host.

    Copying the scores to the host waits for every kernel queued before them, so on a GPU
    ``step_s`` is the synchronised step (forward, backward, Adam, and a resident table's
    write, all queued earlier).
    """
    return StepResult(loss=float(loss), update=update,
                      pos_score=torch.sigmoid(out.pos_logit).detach().double().cpu().numpy(),
                      neg_score=torch.sigmoid(out.neg_logit).detach().double().cpu().numpy(),
                      step_s=time.perf_counter() - start)


def train_step(model: MemoryTGNN, optimizer: torch.optim.Optimizer, batch: SampledBatch,
               rows: MemoryRows, memory: np.ndarray, pres: Pres | None = None,
               vca: Vca | None = None, precision: Precision = Precision.FP32,
               scaler: LossScaler | None = None) -> StepResult:
    """Forward, BCE on positives and negatives (+ PRES's coherence, + VCA), backward, step.

    ``precision`` and ``scaler`` (:mod:`hetray.accel.precision`) apply to the plain step.
    """
    if pres is None:
        return _plain_train_step(model, optimizer, batch, rows, memory, vca, precision, scaler)
    start = time.perf_counter()
    model.train()
    x = to_inputs(batch, rows, memory)
    out, correction, update = _pres_forward(model, x, batch, pres)
    loss = _bce(out)
    ends = _endpoints(batch)
    if pres.cfg.beta > 0:
        index = torch.from_numpy(ends[0])
        loss = loss + coherence_loss(out.memory.index_select(0, index),
                                     x.memory.index_select(0, index), pres.cfg.beta)
    if vca is not None:
        loss = loss + vca.penalty(out.pos_logit, out.neg_logit)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    pres.finish(correction, ends, batch.src, batch.dst)
    return step_result(loss, update, out, start)


def _bce(out: ModelOutputs) -> torch.Tensor:
    """Mean BCE of the positives against 1 plus that of the negatives against 0."""
    loss_fn = nn.BCEWithLogitsLoss()
    return loss_fn(out.pos_logit, torch.ones_like(out.pos_logit)) + \
        loss_fn(out.neg_logit, torch.zeros_like(out.neg_logit))


def _plain_train_step(model: MemoryTGNN, optimizer: torch.optim.Optimizer,
                      batch: SampledBatch, rows: MemoryRows, memory: np.ndarray,
                      vca: Vca | None = None, precision: Precision = Precision.FP32,
                      scaler: LossScaler | None = None) -> StepResult:
    """The step without PRES (with VCA's penalty when ``vca`` is given)."""
    start = time.perf_counter()
    model.train()
    x = to_inputs(batch, rows, memory).to(model_device(model))
    loss, out = fit_batch(model, optimizer, x, vca, precision, scaler)
    return step_result(loss, _update_of(batch, out.new_memory, out.new_mem_ts), out, start)


def fit_batch(model: MemoryTGNN, optimizer: torch.optim.Optimizer, x: ModelInputs,
              vca: Vca | None = None, precision: Precision = Precision.FP32,
              scaler: LossScaler | None = None) -> tuple[torch.Tensor, ModelOutputs]:
    """Forward on inputs ``x`` already on the model's device, BCE (+ VCA), backward, Adam.

    Returns the loss and the outputs (scores and write-back in float32 whatever the
    ``precision``).
    """
    with autocast(model_device(model), precision):
        out = _float32(model(x))
    loss = _bce(out)
    if vca is not None:
        loss = loss + vca.penalty(out.pos_logit, out.neg_logit)
    optimizer.zero_grad()
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
    return loss, out


def score_batch(model: MemoryTGNN, x: ModelInputs,
                precision: Precision = Precision.FP32) -> ModelOutputs:
    """The model on inputs ``x`` already on its device, in ``precision`` (outputs float32)."""
    with autocast(model_device(model), precision):
        return _float32(model(x))


def _float32(out: ModelOutputs) -> ModelOutputs:
    """``out`` with autocast's half-precision scores and memory back in float32 (else as is)."""
    if out.pos_logit.dtype == torch.float32 and out.new_memory.dtype == torch.float32:
        return out
    return ModelOutputs(pos_logit=out.pos_logit.float(), neg_logit=out.neg_logit.float(),
                        new_memory=out.new_memory.float(), new_mem_ts=out.new_mem_ts,
                        memory=out.memory.float())


@torch.no_grad()
def eval_step(model: MemoryTGNN, batch: SampledBatch, rows: MemoryRows,
              memory: np.ndarray, pres: Pres | None = None,
              precision: Precision = Precision.FP32) -> StepResult:
    """Score a batch without gradients (memory is still written back, as in TGN).

    With ``pres`` the memory is corrected and PRES's state updated as in training.
    """
    start = time.perf_counter()
    model.eval()
    device = model_device(model)
    x = to_inputs(batch, rows, memory).to(device)
    if pres is None:
        out = score_batch(model, x, precision)
        return step_result(0.0, _update_of(batch, out.new_memory, out.new_mem_ts), out, start)
    out, correction, update = _pres_forward(model, x, batch, pres)
    pres.finish(correction, _endpoints(batch), batch.src, batch.dst)
    return step_result(0.0, update, out, start)
