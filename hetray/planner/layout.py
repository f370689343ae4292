"""Turn a :class:`~hetray.planner.plan.Plan` into the pipeline layout the runtime executes.

The layer and row rules are documented in :mod:`hetray.pipeline.layout`; this module only
reads them off the plan and the cluster spec (it lives in the planner because the pipeline
package must not import the planner).

Example:
    >>> from hetray.cluster.spec import Cluster, ClusterSpec, LinkSpec, NodeGroup
    >>> from hetray.planner.plan import DeviceGroup, Plan, StagePlan
    >>> link = LinkSpec(latency_s=1e-6, bandwidth_bytes_per_s=1e9)
    >>> spec = ClusterSpec(name="s", cross_cluster_links=(), clusters=(Cluster(
    ...     name="a", intra_node=link, inter_node=link, node_groups=(NodeGroup(
    ...         name="g", device_model="A100-80GB", devices_per_node=2, num_nodes=2),)),))
    >>> def stage(first, dp, layers):
    ...     group = DeviceGroup(cluster="a", node_group="g", device_model="A100-80GB",
    ...                         first_device=first, count=dp)
    ...     return StagePlan(devices=group, dp=dp, tp=1, layer_start=layers[0],
    ...                      layer_end=layers[1])
    >>> plan = Plan(stages=(stage(0, 2, (0, 3)), stage(2, 1, (3, 4))), global_batch=8,
    ...             num_microbatches=2)
    >>> layout = layout_from_plan(plan, spec, replica_speeds=((3.0, 1.0), (1.0,)))
    >>> [s.row_shares for s in layout.stages], layout.layer_bounds()
    ([(3, 1), (4,)], [(0, 3), (3, 4)])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from hetray.cluster.spec import ClusterSpec
from hetray.core.errors import ConfigError
from hetray.pipeline.layout import Location, PipelineLayout, StageLayout, chunk_layer_ranges
from hetray.pipeline.reshard import row_shares
from hetray.planner.plan import Plan, StagePlan, node_group_of

logger = logging.getLogger(__name__)


def _replica_locations(stage: StagePlan, devices_per_node: int) -> tuple[Location, ...]:
    """Replica ``i`` runs on devices ``first + i*tp ..``; its node names its location."""
    group = stage.devices
    return tuple(Location(group.cluster, f"{group.node_group}/"
                          f"{(group.first_device + i * stage.tp) // devices_per_node}")
                 for i in range(stage.dp))


def layout_from_plan(plan: Plan, cluster: ClusterSpec,
                     replica_speeds: Sequence[Sequence[float]] = ()) -> PipelineLayout:
    """The layout ``plan`` implies on ``cluster``.

    Args:
        plan: a validated plan (:func:`hetray.planner.plan.validate_plan`).
        cluster: the spec the plan was made for (node sizes, cluster names).
        replica_speeds: ``(p,)`` tuples of ``dp_r`` relative replica throughputs (default
            equal); each micro-batch's rows are split in proportion to them.

    Raises:
        ConfigError: speeds do not match the stages' dp.
        InfeasiblePlanError: a stage's devices are in no node group of ``cluster``.
    """
    speeds = replica_speeds or [(1.0,) * s.dp for s in plan.stages]
    if len(speeds) != len(plan.stages) or any(
            len(w) != s.dp for w, s in zip(speeds, plan.stages, strict=True)):
        raise ConfigError("layout_from_plan", "replica_speeds", speeds,
                          "one tuple of dp speeds per stage")
    layers = chunk_layer_ranges([s.num_layers for s in plan.stages], plan.num_chunks)
    stages = tuple(
        StageLayout(rank=r, chunk_layers=tuple(layers[r]),
                    row_shares=row_shares(plan.microbatch_size, speeds[r]),
                    locations=_replica_locations(
                        stage, node_group_of(cluster, stage.devices, r).devices_per_node))
        for r, stage in enumerate(plan.stages))
    return PipelineLayout(stages=stages, num_microbatches=plan.num_microbatches)
