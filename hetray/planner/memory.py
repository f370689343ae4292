"""The memory-fit estimate the search prunes with (principles P2 and P6).

Symbols as in :mod:`hetray.planner.plan`; ``P_i`` parameters of stage ``i``, ``c_i`` the
chunk-activations stage ``i`` holds at its peak. Per device of stage ``i`` (bytes)::

    need_i = state(P_i / tp_i) + act(b_i, tp_i) * L_i / v * c_i      (state: ZeRO-1 aware)
             (+ fp32 logits of one micro-batch on the last stage)
    free_i = USABLE_MEMORY_FRACTION * device memory - need_i

Two loads are estimated (:class:`MemoryLoad`):

* before ``m`` is chosen (``num_microbatches=0``): one sequence per replica, 1F1B with
  ``c_i = p - i``, recomputation on, no logits -- an optimistic bound, so a stage that does
  not fit here fits under no ``m``;
* with ``m`` and ``v``: ``b_i = G / (m dp_i)`` and ``c_i = min(p - i, m)`` for 1F1B, or
  ``min(2 (p - i - 1) + (v - 1) p + 1, m v)`` interleaved.

The exact check of a complete plan is :func:`hetray.planner.cost_model.check_memory`,
which takes ``c_i`` from the simulated schedule.

Example:
    >>> from hetray.planner.model_spec import PRESETS
    >>> from hetray.planner.plan import DeviceGroup
    >>> group = DeviceGroup(cluster="a", node_group="g", device_model="A100-80GB",
    ...                     first_device=0, count=8)
    >>> free = stage_free_bytes(PRESETS["gpt-1.3b"], 64, (group,), (1,), (24,), MemoryLoad())
    >>> free[0] > 0
    True
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from hetray.cluster.spec import device_spec
from hetray.planner import cost_model
from hetray.planner.model_spec import ModelSpec
from hetray.planner.plan import DeviceGroup, StagePlan

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryLoad:
    """The load a memory estimate assumes (see the module doc).

    Attributes:
        num_microbatches: ``m``; 0 for the optimistic bound before ``m`` is chosen.
        num_chunks: ``v`` virtual chunks per stage.
        recompute: activation recomputation.
        selective: selective (attention-core) recomputation, when ``recompute`` is off.
        zero: ZeRO-1 (optimizer states sharded over dp).
    """

    num_microbatches: int = 0
    num_chunks: int = 1
    recompute: bool = True
    selective: bool = False
    zero: bool = True

    def in_flight(self, num_stages: int, index: int) -> int:
        """Chunk-activations stage ``index`` of ``num_stages`` holds at its peak."""
        p, m, v = num_stages, self.num_microbatches, self.num_chunks
        if m == 0:
            return p - index
        return min(p - index, m) if v == 1 else min(2 * (p - index - 1) + (v - 1) * p + 1, m * v)


def stage_free_bytes(model: ModelSpec, global_batch: int, groups: Sequence[DeviceGroup],
                     tps: Sequence[int], layers: Sequence[int], load: MemoryLoad) -> list[float]:
    """Estimated free bytes per device of each stage (negative: the stage does not fit).

    Args:
        model: the model.
        global_batch: ``G`` sequences per iteration.
        groups: ``(p,)`` device group per stage.
        tps: ``(p,)`` tensor-parallel degree per stage.
        layers: ``(p,)`` layers per stage.
        load: what the stages hold.

    Returns:
        ``(p,)`` free bytes per device, ``USABLE_MEMORY_FRACTION * memory - need``.
    """
    p, out = len(groups), []
    for i, (group, tp, num) in enumerate(zip(groups, tps, layers, strict=True)):
        dp = group.count // tp
        stage = StagePlan(devices=group, dp=dp, tp=tp, layer_start=0, layer_end=num)
        params = cost_model.stage_params(model, stage, i == 0, i == p - 1) / tp
        sequences = global_batch / load.num_microbatches if load.num_microbatches else 0.0
        replica_batch = sequences / dp if load.num_microbatches else 1
        need = cost_model.state_bytes(params, dp, load.zero) + cost_model.activation_bytes(
            model, stage, replica_batch, load.recompute, load.num_chunks, load.in_flight(p, i),
            load.selective)
        if load.num_microbatches and i == p - 1:  # fp32 logits of one micro-batch
            need += 4.0 * sequences / dp * model.seq_len * model.vocab_size / tp
        usable = cost_model.USABLE_MEMORY_FRACTION * device_spec(group.device_model).memory_bytes
        out.append(usable - need)
    return out
