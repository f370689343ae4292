"""The planner link: predict a GPT layer's fwd+bwd time on a device nobody profiled.

The layer is the operators of :func:`hetray.latency.tasks.gpt_layer_ops` (matmuls of QKV,
projection and MLP with their two backward matmuls each, attention's batch matmuls, softmax
and norm), each with a count. For every operator the predictor ranks that operator's sampled
programs on the device and keeps the one it predicts fastest (what a tuner guided by the cost
model would run); the raw layer time is the count-weighted sum of those predictions. The
measured counterpart is the measured time of the same chosen programs on that device (the
layer as these TVM kernels, not as PyTorch runs it). :func:`to_measurement` turns a prediction
into a planner :class:`~hetray.planner.measurements.Measurement` of kind ``"predicted"``.

**Selection bias.** The prediction of the program a model ranks fastest is the least of ~48
noisy predictions, so it tends to be low for that program: over all programs of an operator
the predictions are about right, at the chosen ones they are low (numbers in
``docs/latency.md``). So the layer prediction on ``device`` is the raw sum times a
correction measured on the *other* devices of the dataset, where the same selection was
timed: the geometric mean over them of measured / raw predicted layer time (1 where there
is no other device). Measurements of ``device`` itself never enter it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hetray.latency.dataset import Programs
from hetray.latency.devices import BY_NAME, VECTOR_LANES
from hetray.latency.protocols import Trained
from hetray.latency.tasks import GPTShape, gpt_layer_ops

#: Per operator name: the raw predicted and the measured seconds of the chosen program.
Operators = dict[str, tuple[float, float]]


@dataclass(frozen=True, slots=True)
class LayerPrediction:
    """Predicted and measured layer fwd+bwd seconds on ``device``, and per-operator times.

    Attributes:
        predicted_s: ``raw_predicted_s * correction``, the link's prediction.
        raw_predicted_s: the count-weighted sum of the chosen programs' predictions.
        correction: measured / raw predicted layer time on ``calibrated_on`` (geometric mean).
        calibrated_on: the other devices the correction was measured on (may be empty).
        operators: per operator, raw predicted and measured seconds of the chosen program.
    """

    device: str
    predicted_s: float
    measured_s: float
    operators: Operators
    raw_predicted_s: float
    correction: float = 1.0
    calibrated_on: tuple[str, ...] = ()

    @property
    def error(self) -> float:
        """``|predicted - measured| / measured``."""
        return abs(self.predicted_s - self.measured_s) / self.measured_s

    @property
    def raw_error(self) -> float:
        """``|raw predicted - measured| / measured`` (before the correction)."""
        return abs(self.raw_predicted_s - self.measured_s) / self.measured_s


def chosen_layer(model: Trained, data: Programs, device: str,
                 shape: GPTShape | None = None) -> tuple[float, float, Operators]:
    """``(raw predicted s, measured s, per operator)`` of the programs ``model`` ranks fastest.

    Raises:
        KeyError: ``data`` has no program of one of the layer's operators on ``device``.
    """
    ops: Operators = {}
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
    return pred_total, meas_total, ops


def predict_layers(model: Trained, data: Programs, devices: Sequence[str],
                   shape: GPTShape | None = None) -> list[LayerPrediction]:
    """Predict the GPT layer on each of ``devices``, corrected on the other devices of ``data``.

    Every device's chosen programs are ranked once; a device of ``data`` without every
    operator of the layer is left out of the corrections.

    Raises:
        KeyError: ``data`` has no program of one of the layer's operators on a device of
            ``devices``.
    """
    layers: dict[str, tuple[float, float, Operators]] = {}
    for device in dict.fromkeys([*devices, *map(str, np.unique(data.device))]):
        try:
            layers[device] = chosen_layer(model, data, device, shape)
        except KeyError:
            if device in devices:
                raise
    out = []
    for device in devices:
        raw, measured, ops = layers[device]
        others = tuple(d for d in layers if d != device)
        logs = [np.log(layers[d][1] / layers[d][0]) for d in others]
        correction = float(np.exp(np.mean(logs))) if logs else 1.0
        out.append(LayerPrediction(device, raw * correction, measured, ops, raw, correction,
                                   others))
    return out


def predict_layer(model: Trained, data: Programs, device: str,
                  shape: GPTShape | None = None) -> LayerPrediction:
    """:func:`predict_layers` for one device."""
    return predict_layers(model, data, [device], shape)[0]


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
    for device in devices:
        if device not in BY_NAME:
            raise ConfigError("--device", "device", device, sorted(BY_NAME))
    return [(pred, to_measurement(pred)) for pred in predict_layers(model, data, devices)]
