"""The volatility-aware (VCA) training objective -- a reconstruction.

Su and Wu (AAAI 2025) regularise a TGNN "toward more uniform error distributions" over time;
their loss is not public, so this is hetray's reconstruction (``docs/vcs.md``; research note
``pres_vcs_mtrgl_cdmpp.md`` §2.3). Glossary: ``B`` events per batch (in time order), ``W``
sub-windows per batch, ``w = ceil(B / W)`` events per window, ``M`` batches of history,
``H`` history events.

Per training batch, with logits ``s_pos, s_neg`` (B,):

- soft errors ``e = sigmoid((s_neg - s_pos) / T)`` (B,), the differentiable hard error;
- the sequence ``[history, e]``: the last ``M`` batches' soft errors (detached, a ring
  buffer, so windows span batches) followed by this batch's;
- windows of ``w`` events aligned at the sequence's end (a leading remainder shorter than
  ``w`` is left out), their mean soft-error rates ``r_j``;
- the penalty ``lambda * Var_j(r_j) / (1 / (4 w))`` (``ddof = 1``): the variance of the
  window rates in units of the largest variance independent errors give (``p (1 - p) / w``
  at ``p = 1/2``), i.e. a soft dispersion index scaled by ``4 p (1 - p) <= 1``. The scale
  is a constant, so the gradient is the variance's and the penalty cannot be lowered by
  erring more (a normaliser ``p (1 - p)`` of the current rate could be).

The gradient reaches only this batch's events. With ``lambda = 0`` the trainer makes no
:class:`Vca` and trains exactly as without it.
"""

from __future__ import annotations

from collections import deque

import torch

from hetray.temporal.vca_config import VcaConfig


def soft_errors(pos_logit: torch.Tensor, neg_logit: torch.Tensor,
                temperature: float = 1.0) -> torch.Tensor:
    """``sigmoid((s_neg - s_pos) / T)``, (B,) from logits (B,) each."""
    return torch.sigmoid((neg_logit - pos_logit) / temperature)


def window_rates(errors: torch.Tensor, size: int) -> torch.Tensor:
    """Mean of each window of ``size`` events, aligned at the end: (len(errors) // size,)."""
    num = errors.shape[0] // size
    return errors[errors.shape[0] - num * size:].reshape(num, size).mean(dim=1)


def vca_penalty(current: torch.Tensor, history: torch.Tensor, windows: int) -> torch.Tensor:
    """The scaled window-rate variance of ``[history, current]`` (scalar; 0 if < 2 windows).

    Args:
        current: float (B,) this batch's soft errors (with their gradient).
        history: float (H,) earlier batches' soft errors, detached (H may be 0).
        windows: ``W``; the window size is ``ceil(B / W)``.

    Example:
        >>> e = torch.tensor([0., 0., 1., 1.])
        >>> round(float(vca_penalty(e, torch.zeros(0), 2)), 3)  # rates 0, 1: Var 0.5, w 2
        4.0
    """
    size = max(1, -(-current.shape[0] // windows))
    rates = window_rates(torch.cat([history.to(current.dtype), current]), size)
    if rates.shape[0] < 2:
        return current.sum() * 0.0
    return rates.var(unbiased=True) * (4.0 * size)


class Vca:
    """The trainer's VCA state: settings and the ring buffer of the last ``M`` batches.

    Example:
        >>> vca = Vca(VcaConfig(weight=0.5, windows=2, history=1))
        >>> logits = torch.zeros(4, requires_grad=True)
        >>> float(vca.penalty(logits, torch.zeros(4)))  # equal rates: no penalty
        0.0
        >>> len(vca.buffer)
        1
    """

    def __init__(self, cfg: VcaConfig) -> None:
        self.cfg = cfg
        self.buffer: deque[torch.Tensor] = deque(maxlen=cfg.history)

    def penalty(self, pos_logit: torch.Tensor, neg_logit: torch.Tensor) -> torch.Tensor:
        """``lambda`` times the penalty of this batch (B,) logits; remembers its errors."""
        errors = soft_errors(pos_logit, neg_logit, self.cfg.temperature)
        history = torch.cat(list(self.buffer)) if self.buffer else errors.new_zeros(0)
        loss = self.cfg.weight * vca_penalty(errors, history, self.cfg.windows)
        if self.cfg.history:
            self.buffer.append(errors.detach())
        return loss

    def for_epoch(self) -> Vca:
        """This state with its history forgotten (each epoch starts from zeroed memory)."""
        self.buffer.clear()
        return self
