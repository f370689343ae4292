"""A hybrid-parallel training plan: pipeline stages, each a device group with dp x tp.

Symbols: ``p`` stages, ``m`` micro-batches, ``v`` virtual chunks per stage, ``G`` the global
batch (sequences), ``dp_i``/``tp_i`` data/tensor-parallel degree of stage ``i``.

One iteration pushes ``m`` micro-batches of ``G/m`` sequences through the stages; stage ``i``
splits each micro-batch over its ``dp_i`` replicas (``G/(m dp_i)`` sequences each) and each
replica over ``tp_i`` devices of one node. Stage ``i`` owns layers ``[layer_start,
layer_end)``; the first stage also holds the embedding, the last one the LM head.

Example:
    >>> group = DeviceGroup(cluster="a", node_group="g", device_model="A100-80GB",
    ...                     first_device=0, count=8)
    >>> stage = StagePlan(devices=group, dp=4, tp=2, layer_start=0, layer_end=32)
    >>> plan = Plan(stages=(stage,), global_batch=64, num_microbatches=4)
    >>> plan_from_json(plan_to_json(plan)) == plan
    True
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hetray.cluster.spec import ClusterSpec, NodeGroup
from hetray.core.config import config_from_mapping, limited
from hetray.core.errors import ConfigError, InfeasiblePlanError
from hetray.core.strict_text import parse_json
from hetray.pipeline.schedules import Schedule

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceGroup:
    """Consecutive devices of one node group.

    Attributes:
        cluster: cluster name in the spec.
        node_group: node group name in that cluster.
        device_model: the group's device model (copied for readability and checks).
        first_device: index of the first device within the node group (node = index // per node).
        count: number of devices.
    """

    cluster: str
    node_group: str
    device_model: str
    first_device: int = limited("cluster_devices")
    count: int = limited("cluster_devices")

    def __post_init__(self) -> None:
        _at_least("DeviceGroup", {"first_device": (self.first_device, 0),
                                  "count": (self.count, 1)})

    def nodes(self, devices_per_node: int) -> range:
        """Node indices (within the node group) the devices sit on."""
        last = self.first_device + self.count - 1
        return range(self.first_device // devices_per_node, last // devices_per_node + 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class StagePlan:
    """One pipeline stage.

    Attributes:
        devices: where it runs.
        dp: data-parallel replicas.
        tp: tensor-parallel degree inside each replica (devices of one node).
        layer_start: first layer (inclusive).
        layer_end: last layer (exclusive).
    """

    devices: DeviceGroup
    dp: int = limited("cluster_devices")
    tp: int = limited("cluster_devices")
    layer_start: int = limited("layers")
    layer_end: int = limited("layers")

    def __post_init__(self) -> None:
        _at_least("StagePlan", {"dp": (self.dp, 1), "tp": (self.tp, 1),
                                "layer_start": (self.layer_start, 0),
                                "layer_end": (self.layer_end, 1)})

    @property
    def num_layers(self) -> int:
        """Layers on this stage."""
        return self.layer_end - self.layer_start


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """An ordered pipeline of stages plus batching and schedule.

    Attributes:
        stages: the ``p`` stages, in pipeline order.
        global_batch: ``G`` sequences per iteration.
        num_microbatches: ``m``.
        num_chunks: ``v`` virtual chunks per stage (1 unless interleaved).
        schedule: pipeline schedule.
        recompute: recompute activations in backward (keeps only each layer's input).
        selective_recompute: recompute only the attention core (softmax, dropout, scores),
            Korthikanti et al. 2022; ignored when ``recompute`` is set.
        zero: ZeRO-1 / distributed optimizer: the fp32 master weights and Adam moments are
            sharded over each stage's ``dp`` replicas (gradients reduce-scattered, updated
            weights all-gathered: the bytes of one all-reduce).
    """

    stages: tuple[StagePlan, ...]
    global_batch: int = limited("batch_rows")
    num_microbatches: int = limited("micro_batches")
    num_chunks: int = limited("layers", 1)
    schedule: Schedule = Schedule.ONE_F_ONE_B
    recompute: bool = False
    selective_recompute: bool = False
    zero: bool = False

    def __post_init__(self) -> None:
        _at_least("Plan", {"global_batch": (self.global_batch, 1),
                           "num_microbatches": (self.num_microbatches, 1),
                           "num_chunks": (self.num_chunks, 1)})

    @property
    def microbatch_size(self) -> int:
        """Sequences per micro-batch (over all replicas of a stage), ``G / m``."""
        return self.global_batch // self.num_microbatches

    @property
    def num_devices(self) -> int:
        """Devices the plan uses."""
        return sum(stage.devices.count for stage in self.stages)


def _at_least(source: str, values: Mapping[str, tuple[Any, int]]) -> None:
    """Raise ConfigError for the first ``field: (value, minimum)`` that is an int below it.

    Values of other types are left to the loader's type checks.
    """
    for field, (value, minimum) in values.items():
        if isinstance(value, int) and not isinstance(value, bool) and value < minimum:
            raise ConfigError(source, field, value, f"an int >= {minimum}")


def node_group_of(cluster: ClusterSpec, group: DeviceGroup, index: int = -1) -> NodeGroup:
    """The node group of ``cluster`` that ``group`` lies in.

    Args:
        cluster: the spec.
        group: devices of one node group.
        index: the stage ``group`` belongs to, for errors (-1: none).

    Raises:
        InfeasiblePlanError: unknown cluster or node group, or another device model there.
    """
    try:
        found = cluster.cluster(group.cluster)
    except KeyError as err:
        raise InfeasiblePlanError(index, f"unknown cluster {group.cluster!r}") from err
    for node_group in found.node_groups:
        if node_group.name == group.node_group:
            if node_group.device_model != group.device_model:
                raise InfeasiblePlanError(index, f"node group {group.node_group!r} holds "
                                          f"{node_group.device_model}, not {group.device_model}")
            return node_group
    raise InfeasiblePlanError(index, f"no node group {group.node_group!r} in {group.cluster!r}")


def _check_stage(stage: StagePlan, index: int, node_group: NodeGroup) -> None:
    group, per_node = stage.devices, node_group.devices_per_node
    if per_node % stage.tp:
        raise InfeasiblePlanError(index, f"tp={stage.tp} must divide the {per_node} devices "
                                  "per node (tensor parallelism stays inside a node)")
    if group.first_device < 0 or group.first_device + group.count > node_group.num_devices:
        raise InfeasiblePlanError(index, f"devices [{group.first_device}, "
                                  f"{group.first_device + group.count}) exceed node group "
                                  f"{group.node_group!r} ({node_group.num_devices} devices)")
    aligned = (group.first_device % per_node == 0 and group.count % per_node == 0
               if group.count > per_node else len(group.nodes(per_node)) == 1)
    if not aligned or group.first_device % stage.tp:
        raise InfeasiblePlanError(index, f"devices [{group.first_device}, +{group.count}) must "
                                  f"be whole nodes or lie in one node, aligned to tp={stage.tp}")


def _check_batching(plan: Plan) -> None:
    p, m, v = len(plan.stages), plan.num_microbatches, plan.num_chunks
    if m < 1 or plan.global_batch % m:
        raise InfeasiblePlanError(-1, f"num_microbatches={m} must divide global_batch="
                                  f"{plan.global_batch}")
    for index, stage in enumerate(plan.stages):
        if plan.microbatch_size % stage.dp:
            raise InfeasiblePlanError(index, f"micro-batch of {plan.microbatch_size} sequences "
                                      f"does not split over dp={stage.dp} replicas")
        if stage.num_layers < v:
            layers = "1 layer" if stage.num_layers == 1 else f"{stage.num_layers} layers"
            raise InfeasiblePlanError(index, f"{layers} cannot form v={v} "
                                      "virtual chunks")
    interleaved = plan.schedule in (Schedule.INTERLEAVED, Schedule.VIRTUAL_1F1B)
    if interleaved and m % p:
        raise InfeasiblePlanError(-1, f"{plan.schedule.value} needs m % p == 0, got m={m}, p={p}")
    if not interleaved and v != 1:
        raise InfeasiblePlanError(-1, f"{plan.schedule.value} takes num_chunks=1, got {v}")


def validate_structure(plan: Plan, num_layers: int) -> None:
    """Check what needs no cluster spec: stages, ``dp x tp`` per stage, layers, batching.

    Raises:
        InfeasiblePlanError: names the stage (-1 for the plan) and the broken rule.
    """
    if not plan.stages:
        raise InfeasiblePlanError(-1, "a plan needs at least one stage")
    expected_start = 0
    for index, stage in enumerate(plan.stages):
        if stage.dp < 1 or stage.tp < 1 or stage.dp * stage.tp != stage.devices.count:
            raise InfeasiblePlanError(index, f"dp x tp = {stage.dp} x {stage.tp} must equal "
                                      f"the {stage.devices.count} devices of the stage")
        if stage.layer_start != expected_start or stage.layer_end <= stage.layer_start:
            raise InfeasiblePlanError(index, f"layers [{stage.layer_start}, {stage.layer_end}) "
                                      f"must start at {expected_start} and be non-empty")
        expected_start = stage.layer_end
    if expected_start != num_layers:
        raise InfeasiblePlanError(-1, f"stages cover {expected_start} of "
                                  f"{num_layers} layers of the model")
    _check_batching(plan)


def validate_plan(plan: Plan, cluster: ClusterSpec, num_layers: int) -> None:
    """:func:`validate_structure`, then: devices exist and do not overlap, tp inside a node.

    Memory is checked by :func:`hetray.planner.cost_model.check_memory`.

    Raises:
        InfeasiblePlanError: names the stage (-1 for the plan) and the broken rule.
    """
    validate_structure(plan, num_layers)
    used: set[tuple[str, str, int]] = set()
    for index, stage in enumerate(plan.stages):
        _check_stage(stage, index, node_group_of(cluster, stage.devices, index))
        group = stage.devices
        devices = {(group.cluster, group.node_group, d)
                   for d in range(group.first_device, group.first_device + group.count)}
        if used & devices:
            raise InfeasiblePlanError(index, "its devices overlap an earlier stage's")
        used |= devices


def plan_to_json(plan: Plan) -> str:
    """Serialise ``plan`` (with ``schema_version``) to a JSON string."""
    data = asdict(plan)
    data["schedule"] = plan.schedule.value
    return json.dumps({"schema_version": SCHEMA_VERSION, **data}, indent=2)


def plan_from_json(text: str, source: str = "plan.json") -> Plan:
    """Parse a plan written by :func:`plan_to_json`, every field type- and limit-checked.

    Args:
        text: the JSON.
        source: the file it came from, for errors.

    Raises:
        ConfigError: not JSON, wrong ``schema_version``, or a missing, unknown or bad field.
    """
    data = parse_json(text, source)
    if not isinstance(data, Mapping) or data.get("schema_version") != SCHEMA_VERSION:
        version = data.get("schema_version") if isinstance(data, Mapping) else data
        raise ConfigError(source, "schema_version", version, str(SCHEMA_VERSION))
    fields = {key: value for key, value in data.items() if key != "schema_version"}
    return config_from_mapping(Plan, fields, source)
