"""SBGD block samplers on Ray actors equal in-process sampling; study cells as Ray tasks."""

from __future__ import annotations

import pytest
from hetray.actors.generate import RayBackend, ray_map

from hetray.generate.data import Dataset, DataSpec, make_dataset
from hetray.generate.model import ModelSpec, SBGDModel
from hetray.generate.nets import NetSpec
from hetray.generate.run import sample
from hetray.generate.sampler import SamplerSpec
from hetray.generate.study_run import StudyConfig, local_map, run_study
from hetray.generate.train import TrainSpec

TINY = ModelSpec(net=NetSpec(hidden=8, depth=1, powers=2), train=TrainSpec(steps=5, batch_size=4),
                 sampler=SamplerSpec(steps=10), block_size=24, chunk=2)


@pytest.fixture
def model(one_torch_thread):
    m = SBGDModel(TINY)
    m.fit(make_dataset(DataSpec(dataset=Dataset.SBM, num_graphs=3, blocks=(2, 3))))
    return m


def test_ray_block_samplers_equal_in_process_sampling(ray_shared, model):
    on_ray = sample(model, [90, 41], seed=3, backend=RayBackend(), num_workers=2,
                    worker_cpus=1.0)
    here = [model.sample(90, seed=3), model.sample(41, seed=4)]
    assert [g.shape[0] for g in on_ray] == [90, 41]
    assert all(abs(a - b).sum() == 0 for a, b in zip(on_ray, here, strict=True))
    assert sum(g.nnz for g in on_ray) > 0


@pytest.mark.slow  # fresh task workers import torch: ~40 s on 2 shared cores
def test_study_cells_as_ray_tasks_equal_local_cells(ray_shared):
    config = StudyConfig(sizes=(16, 32), steps=(10, 50), horizons=(0.5, 2.0), num_nodes=16,
                         learned_sizes=(), joint_sizes=())
    on_ray = run_study(config, lambda f, cells, s: ray_map(f, cells, s, num_cpus=0.5))
    here = run_study(config, local_map)
    assert on_ray.frame()["kl"].tolist() == here.frame()["kl"].tolist()


@pytest.mark.slow  # a whole Tune sweep of one trial (~1 min on 2 shared cores)
def test_generate_trial_runs_under_tune(ray_shared, tmp_path):
    from dataclasses import replace

    from hetray.actors.tune import run_sweep

    from hetray.experiments.grid import load_grid, smoke_grid
    from hetray.experiments.registry import EXPERIMENTS
    from tests.conftest import REPO

    grid = smoke_grid(load_grid(REPO / "examples" / "grids" / "generate.yaml", EXPERIMENTS),
                      EXPERIMENTS["generate"])
    grid = replace(grid, params={k: v[:1] for k, v in grid.params.items()})
    outcome = run_sweep(grid, tmp_path, max_concurrent=1, verbose=0)
    assert outcome.num_errors == 0
    assert outcome.table["mmd_sum"].notna().all()
