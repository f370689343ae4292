"""CDMPP under Ray Train (TorchTrainer, one CPU worker) equals the in-process fit."""

from __future__ import annotations

import numpy as np
from hetray.actors.latency import fit_ray

from hetray.latency.dataset import load
from hetray.latency.protocols import train_cdmpp
from hetray.latency.train import TrainConfig
from tests.unit.latency.helpers import synthetic_file


def test_ray_train_fit_equals_the_in_process_fit(ray_shared, one_torch_thread, tmp_path):
    data = load(synthetic_file(tmp_path / "d.parquet", tasks=3, programs=8))
    cfg = TrainConfig(epochs=3, batch=16)
    here = train_cdmpp(data, cfg)
    on_ray = train_cdmpp(data, cfg, fit_fn=lambda job: fit_ray(job, 1))
    assert on_ray.state.keys() == here.state.keys()
    np.testing.assert_allclose(on_ray.predict(data), here.predict(data), rtol=1e-6)
    assert on_ray.seconds > 0
