"""Analytical cost of a plan: ``(plan, cluster, model) -> Cost`` with named components.

Symbols as in :mod:`hetray.planner.plan`; ``b_i = G / (m dp_i)`` sequences per replica and
micro-batch, ``P_i`` parameters of stage ``i``, ``F`` peak FLOP/s of the stage's device.

Per stage ``i`` and micro-batch (seconds)::

    eff(b, h/t)  = E_MAX * n / (n + N_HALF) * w / (w + W_HALF),  n = b s tokens, w = h / t
    t_fwd        = FLOP_fwd(layers_i, b_i) / (t_i F eff) + 2 L_i allreduce_tp(bytes(b_i))
    t_bwd        = 2 FLOP_fwd / (t_i F eff)             + 2 L_i allreduce_tp(bytes(b_i))
                   (+ t_fwd again with activation recomputation; + the attention core's
                   4 b s^2 h FLOPs per layer with selective recomputation)
    allreduce(n bytes over d ranks, link) = 2 (d-1)/d n / bw + 2 (d-1) alpha        (ring)
    p2p cut i    = alpha + bytes(G/m) / (bw * streams) on the hop's route (one queue per
                   cable and direction, :mod:`hetray.planner.links`); link class intra-node /
                   inter-node / cross
    dp_i         = hierarchical all-reduce of P_i / t_i * dtype bytes over the stage's nodes,
                   NIC shared per node or per device (:mod:`hetray.planner.links`)
    opt_i        = OPTIMIZER_BYTES_PER_PARAM * P_i / t_i / memory bandwidth  (/ dp_i with ZeRO-1)
    mem_i        = state(P_i / t_i)
                   + act(b_i, t_i) * L_i / v * peak in-flight chunks  (+ logits on the last stage;
                   recompute keeps only the layer input s b h, plus one layer's act; selective
                   recompute drops the attention core's 5 a s^2 b / t bytes)
    state(P)     = STATE_BYTES_PER_PARAM * P, or with ZeRO-1 (16 - 12 (1 - 1/dp_i)) P: the
                   12 bytes of fp32 master weights and Adam moments are sharded over dp_i

The pipeline makespan comes from :func:`hetray.pipeline.simulator.simulate` on these times;
``step = makespan + max_i dp_i + max_i opt_i`` (no overlap assumed).

Example:
    >>> from hetray.cluster.loader import load_cluster_spec
    >>> from hetray.planner.model_spec import PRESETS
    >>> from hetray.planner.plan import DeviceGroup, Plan, StagePlan
    >>> spec = load_cluster_spec("cluster_configs/specs/two-cluster-16.yaml")
    >>> group = DeviceGroup(cluster="dc-a100", node_group="a100-x4", device_model="A100-80GB",
    ...                     first_device=0, count=8)
    >>> plan = Plan(stages=(StagePlan(devices=group, dp=4, tp=2, layer_start=0,
    ...                               layer_end=24),), global_batch=32, num_microbatches=4)
    >>> cost = estimate(plan, spec, PRESETS["gpt-1.3b"])
    >>> cost.feasible, 0.5 < cost.step_time_s < 5.0
    (True, True)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hetray.accel.specs import AcceleratorSpec
from hetray.cluster.spec import ClusterSpec, LinkClass, LinkSpec, device_spec
from hetray.core.errors import InfeasiblePlanError
from hetray.core.units import GIB
from hetray.pipeline.simulator import PipelineTimings, SimResult, Transfer, simulate
from hetray.planner.links import GroupShape, allreduce_s, hierarchical_allreduce_s, hop_transfer
from hetray.planner.model_spec import DType, ModelSpec
from hetray.planner.plan import DeviceGroup, Plan, StagePlan, node_group_of

logger = logging.getLogger(__name__)

#: Best fraction of peak a dense transformer layer reaches (large matmuls).
E_MAX = 0.6
#: Tokens per replica at which efficiency reaches half of its best.
N_HALF = 256.0
#: Matrix width (h / tp) at which efficiency reaches half of its best.
W_HALF = 128.0
#: bf16 weights + bf16 grads + fp32 master, Adam m and v (mixed-precision Adam).
STATE_BYTES_PER_PARAM = 16.0
#: Of those, the fp32 master weights and Adam m and v, which ZeRO-1 shards over dp.
OPTIMIZER_STATE_BYTES_PER_PARAM = 12.0
#: Bytes the Adam step reads and writes per parameter.
OPTIMIZER_BYTES_PER_PARAM = 32.0
#: Share of device memory usable for states and activations (rest: workspace, fragmentation).
USABLE_MEMORY_FRACTION = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class StageCost:
    """Cost components of one stage (seconds per micro-batch unless noted).

    Attributes:
        forward_s: forward of one micro-batch through the whole stage, tp collectives included.
        backward_s: backward, same convention.
        tp_comm_s: the tensor-parallel all-reduce share of ``forward_s + backward_s``.
        hop: the activation hop to the next stage (None for the last).
        link_class: link class to the next stage (None for the last).
        dp_allreduce_s: gradient all-reduce per iteration.
        optimizer_s: optimizer step per iteration.
        memory_bytes: peak bytes per device.
        capacity_bytes: usable bytes per device.
        throughput_flops: effective FLOP/s of the whole stage (all its devices).
    """

    forward_s: float
    backward_s: float
    tp_comm_s: float
    hop: Transfer | None
    link_class: LinkClass | None
    dp_allreduce_s: float
    optimizer_s: float
    memory_bytes: float
    capacity_bytes: float
    throughput_flops: float

    @property
    def p2p_s(self) -> float:
        """Seconds to send one micro-batch's activation to the next stage (0 for the last)."""
        return self.hop.time_s if self.hop is not None else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """Predicted cost of one training iteration.

    Attributes:
        step_time_s: seconds per iteration.
        pipeline_s: simulated pipeline makespan.
        dp_allreduce_s: slowest stage's gradient all-reduce.
        optimizer_s: slowest stage's optimizer step.
        compute_s: busiest stage's compute over all micro-batches.
        p2p_s: sum of per-micro-batch p2p times over the cuts.
        bubble_fraction: idle share of the pipeline (simulated).
        imbalance: max / mean of per-stage compute.
        tokens_per_s: ``G s / step_time_s``.
        stages: per-stage components.
    """

    step_time_s: float
    pipeline_s: float
    dp_allreduce_s: float
    optimizer_s: float
    compute_s: float
    p2p_s: float
    bubble_fraction: float
    imbalance: float
    tokens_per_s: float
    stages: tuple[StageCost, ...]

    @property
    def feasible(self) -> bool:
        """Every stage fits in device memory."""
        return all(s.memory_bytes <= s.capacity_bytes for s in self.stages)


def peak_flops(spec: AcceleratorSpec, model: ModelSpec) -> float:
    """Peak FLOP/s of ``spec`` at the model's dtype; bf16 falls back to fp16.

    V100 has no bf16, and fp16 mixed precision with loss scaling trains the same model there.
    """
    peak = spec.peak_flops(model.dtype.precision)
    return peak if peak > 0 or model.dtype is not DType.BF16 else spec.fp16_flops


def efficiency(tokens: float, width: float) -> float:
    """Fraction of peak FLOP/s reached for ``tokens`` rows and matrix ``width`` (see module)."""
    return E_MAX * tokens / (tokens + N_HALF) * width / (width + W_HALF)


def link_between(cluster: ClusterSpec, a: DeviceGroup, b: DeviceGroup,
                 per_node: int) -> tuple[LinkClass, LinkSpec]:
    """Link class and link joining two device groups (``per_node`` devices per node)."""
    if a.cluster != b.cluster:
        return LinkClass.CROSS_CLUSTER, cluster.link(a.cluster, b.cluster, LinkClass.CROSS_CLUSTER)
    same_node = (a.node_group == b.node_group and len(a.nodes(per_node)) == 1
                 and a.nodes(per_node) == b.nodes(per_node))
    kind = LinkClass.INTRA_NODE if same_node else LinkClass.INTER_NODE
    return kind, cluster.link(a.cluster, a.cluster, kind)


def state_bytes(params: float, dp: int, zero: bool) -> float:
    """Weight, gradient and optimizer bytes per device for ``params`` parameters.

    >>> state_bytes(1.0, 4, zero=False), state_bytes(1.0, 4, zero=True)
    (16.0, 7.0)
    """
    sharded = OPTIMIZER_STATE_BYTES_PER_PARAM * (1.0 - 1.0 / dp) if zero else 0.0
    return (STATE_BYTES_PER_PARAM - sharded) * params


def attention_core_flops(model: ModelSpec, batch: float) -> float:
    """Forward FLOPs of one layer's attention scores and their weighted sum, ``4 b s^2 h``."""
    return 4.0 * batch * model.seq_len * model.seq_len * model.hidden_size


def stage_params(model: ModelSpec, stage: StagePlan, first: bool, last: bool) -> float:
    """Parameters held by ``stage`` (embedding on the first, LM head on the last)."""
    return (stage.num_layers * model.layer_params
            + model.embedding_params * (int(first) + int(last)))


def _stage_compute(model: ModelSpec, stage: StagePlan, spec: AcceleratorSpec, batch: float,
                   last: bool) -> tuple[float, float]:
    """(forward seconds, effective stage FLOP/s) of one replica for ``batch`` sequences."""
    flops = stage.num_layers * model.layer_forward_flops(batch)
    if last:
        flops += model.head_forward_flops(batch)
    rate = peak_flops(spec, model) * stage.tp * efficiency(
        batch * model.seq_len, model.hidden_size / stage.tp)
    if rate <= 0.0:
        raise InfeasiblePlanError(-1, f"{spec.model} has no {model.dtype.value} arithmetic")
    return flops / rate, rate * stage.dp


def _stage_cost(plan: Plan, cluster: ClusterSpec, model: ModelSpec, index: int) -> StageCost:
    stage, last = plan.stages[index], index == len(plan.stages) - 1
    group, per_node = stage.devices, node_group_of(cluster, stage.devices, index).devices_per_node
    spec = device_spec(group.device_model)
    batch = plan.microbatch_size / stage.dp
    fwd, rate = _stage_compute(model, stage, spec, batch, last)
    intra = cluster.link(group.cluster, group.cluster, LinkClass.INTRA_NODE)
    tp_comm = 2 * stage.num_layers * allreduce_s(model.boundary_bytes(batch), stage.tp, intra)
    params = stage_params(model, stage, index == 0, last) / stage.tp
    inter = cluster.link(group.cluster, group.cluster, LinkClass.INTER_NODE)
    dp_s = hierarchical_allreduce_s(params * model.dtype.num_bytes,
                                    GroupShape.of(stage, per_node), intra, inter)
    hop, link_class = None, None
    if not last:
        link_class, hop = _transfer(plan, cluster, model, index)
    backward = (3.0 if plan.recompute else 2.0) * fwd + (2 if plan.recompute else 1) * tp_comm
    if plan.selective_recompute and not plan.recompute:
        backward += stage.num_layers * attention_core_flops(model, batch) / (rate / stage.dp)
    return StageCost(
        forward_s=fwd + tp_comm, backward_s=backward, tp_comm_s=3.0 * tp_comm if plan.recompute
        else 2.0 * tp_comm,
        hop=hop, link_class=link_class,
        dp_allreduce_s=dp_s,
        optimizer_s=OPTIMIZER_BYTES_PER_PARAM * params / spec.memory_bandwidth_bytes_per_s
        / (stage.dp if plan.zero else 1),
        memory_bytes=state_bytes(params, stage.dp, plan.zero),  # + activations after sim
        capacity_bytes=USABLE_MEMORY_FRACTION * spec.memory_bytes, throughput_flops=rate)


def _transfer(plan: Plan, cluster: ClusterSpec, model: ModelSpec,
              index: int) -> tuple[LinkClass, Transfer]:
    """The hop from stage ``index`` to the next one (the wrap hop when ``index`` is last)."""
    p = len(plan.stages)
    a, b = plan.stages[index], plan.stages[(index + 1) % p]
    per_node = (node_group_of(cluster, a.devices, index).devices_per_node,
                node_group_of(cluster, b.devices, (index + 1) % p).devices_per_node)
    return hop_transfer(cluster, a, b, per_node, model.boundary_bytes(plan.microbatch_size))


def _timings(plan: Plan, cluster: ClusterSpec, model: ModelSpec,
             stages: list[StageCost]) -> PipelineTimings:
    p = len(plan.stages)
    hops = [stage.hop for stage in stages[:-1] if stage.hop is not None]
    wrap = hops[0] if hops else Transfer(latency_s=0.0, bytes_per_s=1.0, num_bytes=0.0)
    if p > 2:
        wrap = _transfer(plan, cluster, model, p - 1)[1]
    return PipelineTimings(
        forward_s=tuple(s.forward_s for s in stages),
        backward_s=tuple(s.backward_s for s in stages),
        num_microbatches=plan.num_microbatches, num_chunks=plan.num_chunks, hops=tuple(hops),
        wrap=wrap)


def _with_activations(plan: Plan, model: ModelSpec, stages: list[StageCost],
                      sim: SimResult) -> tuple[StageCost, ...]:
    out = []
    for i, (stage, cost) in enumerate(zip(plan.stages, stages, strict=True)):
        batch = plan.microbatch_size / stage.dp
        act = activation_bytes(model, stage, batch, plan.recompute, plan.num_chunks,
                               sim.peak_in_flight[i], plan.selective_recompute)
        if i == len(stages) - 1:  # fp32 logits of one micro-batch
            act += 4.0 * batch * model.seq_len * model.vocab_size / stage.tp
        out.append(_replace_memory(cost, cost.memory_bytes + act))
    return tuple(out)


def activation_bytes(model: ModelSpec, stage: StagePlan, batch: float, recompute: bool,
                     num_chunks: int, in_flight_chunks: int, selective: bool = False) -> float:
    """Activation bytes per device of ``stage`` holding ``in_flight_chunks`` chunk-activations.

    With ``recompute`` each layer keeps only its input, plus one layer's full activations
    while its backward runs; ``selective`` (without ``recompute``) drops the attention
    core's ``5 a s^2 b / t`` share (``dtype`` scaled) of every layer.
    """
    per_layer = model.layer_activation_bytes(batch, stage.tp)
    if selective and not recompute:
        s, a = model.seq_len, model.num_heads
        per_layer -= model.dtype.num_bytes / 2.0 * 5.0 * a * s * s * batch / stage.tp
    kept = model.boundary_bytes(batch) if recompute else per_layer
    held = kept * stage.num_layers / num_chunks * in_flight_chunks
    return held + (per_layer if recompute else 0.0)


def _replace_memory(cost: StageCost, memory_bytes: float) -> StageCost:
    fields = {name: getattr(cost, name) for name in StageCost.__slots__}
    return StageCost(**{**fields, "memory_bytes": memory_bytes})


def estimate(plan: Plan, cluster: ClusterSpec, model: ModelSpec) -> Cost:
    """Predict the step time, its components and memory of ``plan`` (pure; see module)."""
    stages = [_stage_cost(plan, cluster, model, i) for i in range(len(plan.stages))]
    sim = simulate(_timings(plan, cluster, model, stages), plan.schedule)
    final = _with_activations(plan, model, stages, sim)
    dp_s = max(s.dp_allreduce_s for s in final)
    opt_s = max(s.optimizer_s for s in final)
    step = sim.makespan_s + dp_s + opt_s
    compute = [(s.forward_s + s.backward_s) * plan.num_microbatches for s in final]
    return Cost(
        step_time_s=step, pipeline_s=sim.makespan_s, dp_allreduce_s=dp_s, optimizer_s=opt_s,
        compute_s=max(compute), p2p_s=sum(s.p2p_s for s in final),
        bubble_fraction=sim.bubble_fraction, imbalance=max(compute) / (sum(compute) / len(final)),
        tokens_per_s=plan.global_batch * model.seq_len / step, stages=final)


def layers_text(count: int) -> str:
    """``"1 layer"``, ``"2 layers"``.

    >>> layers_text(1), layers_text(3)
    ('1 layer', '3 layers')
    """
    return f"{count} layer" if count == 1 else f"{count} layers"


def check_memory(plan: Plan, cost: Cost) -> None:
    """Raise for the stage that overflows device memory the most.

    Raises:
        InfeasiblePlanError: names the stage, its devices, need vs usable GiB and the shortfall.
    """
    short = [(s.memory_bytes - s.capacity_bytes, i) for i, s in enumerate(cost.stages)]
    shortfall, index = max(short)
    if shortfall <= 0:
        return
    group, stage = plan.stages[index].devices, cost.stages[index]
    raise InfeasiblePlanError(
        index,
        f"{group.count} x {group.device_model} in {group.cluster} (dp={plan.stages[index].dp}, "
        f"tp={plan.stages[index].tp}, {layers_text(plan.stages[index].num_layers)}) need "
        f"{stage.memory_bytes / GIB:.1f} GiB per device but have {stage.capacity_bytes / GIB:.1f}"
        f" GiB usable: short by {shortfall / GIB:.1f} GiB",
        shortfall_bytes=shortfall)
