"""Measured step / layer times: the training data of the RF cost model, and its file format.

One record per measurement; files are Parquet (``.parquet``) or JSON (``.json``: an object
``{"schema_version": 1, "records": [...]}``), one column / key per field below, SI units.

=============================  ==========================================================
field                          meaning
=============================  ==========================================================
kind                           ``layer`` (``hetray profile``: one transformer layer fwd+bwd)
                               or ``step`` (one training iteration of a pipeline run)
                               or ``predicted`` (``hetray profile --predict``: a layer
                               predicted by the CDMPP latency model, hetray.latency)
device_model                   registry model or ``CPU`` (slowest device for ``step``)
peak_flops                     device peak FLOP/s at the dtype used
memory_bandwidth_bytes_per_s   device memory bandwidth
hidden_size, num_heads,        model sizes (see :mod:`hetray.planner.model_spec`)
ffn_size, seq_len
microbatch_size                sequences per micro-batch and replica
num_layers                     layers timed (``layer``: layers stacked in the timed module)
tp, dp, num_stages,            parallel layout (1 for ``layer`` records)
num_microbatches, num_chunks
cross_cluster_bytes            bytes crossing cluster boundaries per iteration
min_link_bytes_per_s           slowest link the pipeline uses (0 when none)
analytical_compute_s           analytical busiest-stage compute
analytical_comm_s              analytical p2p + dp all-reduce + tp all-reduce time
bubble_fraction, imbalance     analytical pipeline bubble share and max/mean stage compute
analytical_s                   analytical prediction of ``measured_s``
measured_s                     what was measured (median of repeats), seconds
=============================  ==========================================================

Add your own clusters' numbers by appending records with these fields.

Example:
    >>> rec = Measurement(kind="layer", device_model="CPU", peak_flops=1e11,
    ...     memory_bandwidth_bytes_per_s=1e10, hidden_size=64, num_heads=4, ffn_size=256,
    ...     seq_len=32, microbatch_size=1, analytical_s=1e-3, measured_s=2e-3)
    >>> records_from_frame(records_to_frame([rec]), "mem")[0] == rec
    True
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from hetray.core.errors import ProfileDataError
from hetray.core.group import first_line
from hetray.core.strict_text import parse_json, read_config_text

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
KINDS = ("layer", "step", "predicted")  # predicted: hetray latency (CDMPP), no timing


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One measured time with its workload description (fields: see the module table)."""

    kind: str
    device_model: str
    peak_flops: float
    memory_bandwidth_bytes_per_s: float
    hidden_size: int
    num_heads: int
    ffn_size: int
    seq_len: int
    microbatch_size: float
    num_layers: int = 1
    tp: int = 1
    dp: int = 1
    num_stages: int = 1
    num_microbatches: int = 1
    num_chunks: int = 1
    cross_cluster_bytes: float = 0.0
    min_link_bytes_per_s: float = 0.0
    analytical_compute_s: float = 0.0
    analytical_comm_s: float = 0.0
    bubble_fraction: float = 0.0
    imbalance: float = 1.0
    analytical_s: float
    measured_s: float


FIELDS = tuple(f.name for f in dataclasses.fields(Measurement))
_TYPES = {f.name: f.type for f in dataclasses.fields(Measurement)}


def records_to_frame(records: Sequence[Measurement]) -> pd.DataFrame:
    """One row per record, one column per field."""
    return pd.DataFrame([dataclasses.asdict(r) for r in records], columns=list(FIELDS))


def _cast(value: object, type_name: str, source: str, row: int, name: str) -> object:
    caster = {"str": str, "int": int, "float": float}[str(type_name)]
    try:
        out = caster(value)  # type: ignore[operator]
    except (TypeError, ValueError, OverflowError) as err:
        raise ProfileDataError(source, f"row {row}: {name}={value!r} is not {type_name}") from err
    if isinstance(out, float) and not math.isfinite(out):
        raise ProfileDataError(source, f"row {row}: {name}={value!r} is not finite")
    return out


def records_from_frame(frame: pd.DataFrame, source: str) -> list[Measurement]:
    """Validate ``frame`` (exact columns, types, positive times) into records.

    Raises:
        ProfileDataError: missing or unknown columns, bad values; names row and field.
    """
    missing = [f for f in FIELDS if f not in frame.columns]
    unknown = [c for c in frame.columns if c not in FIELDS]
    if missing or unknown:
        raise ProfileDataError(source, f"missing columns {missing}, unknown columns {unknown}; "
                               f"expected {list(FIELDS)}")
    out = []
    for row, values in enumerate(frame[list(FIELDS)].itertuples(index=False)):
        fields = {n: _cast(v, _TYPES[n], source, row, n)
                  for n, v in zip(FIELDS, values, strict=True)}
        if fields["kind"] not in KINDS:
            raise ProfileDataError(source, f"row {row}: kind={fields['kind']!r}, allowed {KINDS}")
        for name in ("measured_s", "analytical_s", "peak_flops"):
            if fields[name] <= 0:  # type: ignore[operator]
                raise ProfileDataError(source, f"row {row}: {name} must be > 0")
        out.append(Measurement(**fields))  # type: ignore[arg-type]
    return out


def save_measurements(path: str | Path, records: Sequence[Measurement]) -> None:
    """Write ``records`` to ``.parquet`` or ``.json``."""
    path = Path(path)
    if path.suffix == ".parquet":
        records_to_frame(records).to_parquet(path, index=False)
    elif path.suffix == ".json":
        rows = [dataclasses.asdict(r) for r in records]
        path.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "records": rows}, indent=1),
                        encoding="utf-8")
    else:
        raise ProfileDataError(str(path), "unknown suffix; use .parquet or .json")


def load_measurements(path: str | Path) -> list[Measurement]:
    """Read and validate a ``.parquet`` or ``.json`` measurement file.

    Raises:
        ProfileDataError: unreadable file, wrong schema_version, bad rows.
    """
    path = Path(path)
    if not path.is_file():
        raise ProfileDataError(str(path), "no such file")
    if path.suffix == ".parquet":
        return records_from_frame(_read_parquet(path), str(path))
    if path.suffix != ".json":
        raise ProfileDataError(str(path), "unknown suffix; use .parquet or .json")
    data = parse_json(read_config_text(path), str(path))
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise ProfileDataError(str(path), f"expected an object with schema_version "
                               f"{SCHEMA_VERSION} and records")
    records = data.get("records", [])
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ProfileDataError(str(path), "records must be a list of objects (one per "
                               "measurement)")
    try:
        frame = pd.DataFrame(records, columns=None)
    except (OverflowError, ValueError, TypeError) as err:
        raise ProfileDataError(str(path), f"records do not form a table ({first_line(err)})"
                               ) from err
    return records_from_frame(frame, str(path))


def _read_parquet(path: Path) -> pd.DataFrame:
    """The table of a measurements Parquet file.

    Raises:
        ProfileDataError: not a readable Parquet table (empty, truncated, bad metadata).
    """
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError,
            pa.ArrowException) as err:
        raise ProfileDataError(str(path), f"not a readable Parquet table "
                               f"({type(err).__name__}: {first_line(err)})") from err
