"""The planner link: predict a GPT layer's fwd+bwd time on a device nobody profiled.

The layer is the operators of :func:`hetray.latency.tasks.gpt_layer_ops` (matmuls of QKV,
projection and MLP with their two backward matmuls each, attention's batch matmuls, softmax
and norm), each with a count. For every operator the predictor ranks that operator's sampled
programs on the device and keeps the one it predicts fastest (what a tuner guided by the cost
model would run); the layer time is the count-weighted sum of those predictions. The
measured counterpart is the measured time of the same chosen programs on that device (the
layer as these TVM kernels, not as PyTorch runs it). :func:`to_measurement` turns a prediction
into a planner :class:`~hetray.planner.measurements.Measurement` of kind ``"predicted"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetray.latency.dataset import Programs
from hetray.latency.devices import BY_NAME, VECTOR_LANES
from hetray.latency.protocols import Trained
from hetray.latency.tasks import GPTShape, gpt_layer_ops


@dataclass(frozen=True, slots=True)
class LayerPrediction:
    """Predicted and measured layer fwd+bwd seconds on ``device``, and per-operator times."""

    device: str
    predicted_s: float
    measured_s: float
    operators: dict[str, tuple[float, float]]

    @property
    def error(self) -> float:
        """``|predicted - measured| / measured``."""
        return abs(self.predicted_s - self.measured_s) / self.measured_s


def predict_layer(model: Trained, data: Programs, device: str,
                  shape: GPTShape | None = None) -> LayerPrediction:
    """Predict the GPT layer on ``device`` from the programs of ``data`` on that device.

    Raises:
        KeyError: ``data`` has no program of one of the layer's operators on ``device``.
    """
    ops: dict[str, tuple[float, float]] = {}
    pred_total = meas_total = 0.0
    for task, count in gpt_layer_ops(shape or GPTShape()):
        rows = data.subset((data.task == task.name) & (data.device == device))
        if not len(rows):
            raise KeyError(f"no programs of {task.name} on {device}")
        pred = model.predict(rows)
        best = int(np.argmin(pred))
        ops[task.name] = (float(pred[best]), float(rows.latency[best]))
        pred_total += count * float(pred[best])
        meas_total += count * float(rows.latency[best])
    return LayerPrediction(device, pred_total, meas_total, ops)


def to_measurement(pred: LayerPrediction, shape: GPTShape | None = None) -> object:
    """The prediction as a planner Measurement (kind ``"predicted"``, ``measured_s`` = it)."""
    from hetray.planner.measurements import Measurement

    shape = shape or GPTShape()
    dev = BY_NAME[pred.device]
    peak = 3.0e9 * 2 * 2 * VECTOR_LANES[dev.isa] * dev.threads
    return Measurement(kind="predicted", device_model=f"CPU:{pred.device}", peak_flops=peak,
                       memory_bandwidth_bytes_per_s=20e9 * dev.threads,
                       hidden_size=shape.hidden, num_heads=shape.heads, ffn_size=shape.ffn,
                       seq_len=shape.seq, microbatch_size=float(shape.batch),
                       analytical_s=pred.predicted_s, measured_s=pred.predicted_s)


def profile_predicted(model_dir: str, data_path: str,
                      devices: tuple[str, ...]) -> list[tuple[LayerPrediction, object]]:
    """``hetray profile --predict``: ``(prediction, Measurement)`` per device.

    Raises:
        ProfileDataError / GraphDataError: unreadable predictor or dataset.
        ConfigError: an unknown device name.
    """
    from pathlib import Path

    from hetray.core.errors import ConfigError
    from hetray.latency import dataset, store

    model, data = store.load(Path(model_dir)), dataset.load(Path(data_path))
    out = []
    for device in devices:
        if device not in BY_NAME:
            raise ConfigError("--device", "device", device, sorted(BY_NAME))
        pred = predict_layer(model, data, device)
        out.append((pred, to_measurement(pred)))
    return out
