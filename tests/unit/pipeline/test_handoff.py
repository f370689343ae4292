"""Plan -> pipeline run config (hetray.planner.handoff): the run config rebuilds exactly the
layout the planner's rule gives, and carries the schedule, the slow link and its warm-up."""

from __future__ import annotations

import pytest

from hetray.cluster.spec import LinkClass
from hetray.core.errors import InfeasiblePlanError
from hetray.pipeline.run import RunConfig, TrainConfig
from hetray.pipeline.schedules import Schedule
from hetray.planner.handoff import (
    default_plan,
    local_spec,
    model_spec,
    pipeline_config,
    step_records,
    with_schedule,
)
from hetray.planner.layout import layout_from_plan


def test_the_run_config_holds_the_plans_layout_schedule_and_link():
    spec, base = local_spec(), RunConfig(train=TrainConfig(steps=2))
    plan = default_plan(spec, base.model.num_layers, schedule=Schedule.VIRTUAL_1F1B,
                        num_microbatches=4, microbatch_size=2)
    config = pipeline_config(plan, spec, base)
    assert config.layout() == layout_from_plan(plan, spec)
    assert (config.pipeline.schedule, config.pipeline.num_chunks) == (Schedule.VIRTUAL_1F1B, 2)
    assert config.pipeline.extra_warmup >= 1  # a 20 ms hop is worth hiding
    (link,) = config.pipeline.links
    assert link.link_class is LinkClass.CROSS_CLUSTER
    assert link.spec() == spec.link("site-a", "site-b", LinkClass.CROSS_CLUSTER)
    assert config.train == base.train
    records = step_records(plan, spec, config, [0.5, 0.25])
    assert [r.measured_s for r in records] == [0.5, 0.25]


def test_without_a_spec_every_stage_gets_a_node_and_no_link_is_emulated():
    base = RunConfig()
    plan = with_schedule(default_plan(local_spec(), 4, schedule=Schedule.VIRTUAL_1F1B,
                                      num_microbatches=2, microbatch_size=2), Schedule.GPIPE)
    config = pipeline_config(plan, None, base)
    assert (config.pipeline.num_chunks, config.pipeline.links) == (1, ())
    assert [s.nodes for s in config.pipeline.stages] == [(), ()]
    assert model_spec(config).num_layers == base.model.num_layers
    with pytest.raises(InfeasiblePlanError, match="layers of the model"):
        pipeline_config(default_plan(local_spec(), 6, schedule=Schedule.GPIPE,
                                     num_microbatches=2, microbatch_size=1), None, base)
