"""The per-event scores a finished run saves, so that it can be evaluated again later.

``hetray train mspipe`` writes ``{run storage}/evaluation.parquet`` when a run ends: one row
per scored event of the tested epoch's validation pass and of the test pass, columns
``set`` (``val`` / ``test``), ``eid`` (int64), ``t`` (float64 event time), ``pos`` and
``neg`` (float64 sigmoid scores of the positive and its negative), and the run's facts in
the schema metadata key ``hetray_evaluation`` (JSON: model, dataset, best epoch, the VCA
weight). ``hetray eval vcs --run DIR`` reads it back (:func:`load_evaluation`): the file is
untrusted (a shared location) and checked column by column before use. Nothing here imports
torch.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hetray.core.errors import ConfigError, TemporalDataError
from hetray.core.storage import RunStorage
from hetray.mspipe.staleness import PassReport
from hetray.temporal.data import one_line, read_bounded_parquet

logger = logging.getLogger(__name__)

#: The file's name inside the run storage.
EVALUATION_FILE = "evaluation.parquet"
#: The schema-metadata key of the run's facts.
META_KEY = b"hetray_evaluation"
#: Most bytes of the file that are read (about 2e7 scored events).
MAX_EVALUATION_BYTES = 1 << 30
_COLUMNS = {"set": pa.types.is_string, "eid": pa.types.is_integer,
            "t": pa.types.is_floating, "pos": pa.types.is_floating,
            "neg": pa.types.is_floating}


class ScoreSet(StrEnum):
    """Which pass a row was scored in."""

    VAL = "val"
    TEST = "test"


@dataclass(frozen=True, slots=True)
class SetScores:
    """One pass's scores in event order: eid int64 (n,), t, pos, neg float64 (n,)."""

    eid: np.ndarray
    t: np.ndarray
    pos: np.ndarray
    neg: np.ndarray

    def __len__(self) -> int:
        return len(self.eid)


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedEvaluation:
    """What a run saved for evaluation: scores per set and the run's facts.

    Attributes:
        sets: the scored passes (``test`` always, ``val`` when the run kept it).
        meta: JSON facts of the run (``model``, ``dataset``, ``best_epoch``, ``vca_weight``).
    """

    sets: dict[ScoreSet, SetScores]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_table(self) -> pa.Table:
        """The Arrow table written to :data:`EVALUATION_FILE`."""
        names = [s.value for s, scores in self.sets.items() for _ in range(len(scores))]
        cols = {k: np.concatenate([getattr(v, k) for v in self.sets.values()])
                if self.sets else np.zeros(0) for k in ("eid", "t", "pos", "neg")}
        table = pa.table({"set": pa.array(names, pa.string()),
                          "eid": pa.array(cols["eid"].astype(np.int64)),
                          **{k: pa.array(cols[k].astype(np.float64))
                             for k in ("t", "pos", "neg")}})
        return table.replace_schema_metadata({META_KEY: json.dumps(self.meta).encode()})

    def to_bytes(self) -> bytes:
        """The Parquet file's bytes."""
        sink = pa.BufferOutputStream()
        pq.write_table(self.to_table(), sink)
        return sink.getvalue().to_pybytes()


def set_scores(done: PassReport, times: np.ndarray) -> SetScores:
    """The scores of evaluation pass ``done``; ``times`` float64 (E,) every event's time."""
    eids = np.asarray(done.eids, np.int64)
    return SetScores(eid=eids, t=np.asarray(times, np.float64)[eids],
                     pos=np.asarray(done.pos_score, np.float64),
                     neg=np.asarray(done.neg_score, np.float64))


def save_evaluation(storage: RunStorage, evaluation: SavedEvaluation) -> None:
    """Write ``evaluation`` to ``{storage}/evaluation.parquet``."""
    storage.write_bytes(EVALUATION_FILE, evaluation.to_bytes())
    logger.info("per-event scores saved to %s", storage.display(EVALUATION_FILE))


def load_evaluation(storage: RunStorage) -> SavedEvaluation:
    """Read what a finished run saved (:data:`EVALUATION_FILE`).

    Raises:
        ConfigError: the run directory holds no ``evaluation.parquet`` (names both).
        TemporalDataError: the file is not a valid score table (names the file and row).
    """
    source = storage.display(EVALUATION_FILE)
    if not storage.exists(EVALUATION_FILE):
        raise ConfigError("--run", "run directory", storage.display(),
                          f"a finished `hetray train mspipe` run directory, which holds "
                          f"{EVALUATION_FILE} (the per-event scores a run saves when it "
                          f"ends); missing here: {source}")
    try:
        data = storage.read_bytes(EVALUATION_FILE, MAX_EVALUATION_BYTES)
    except (OSError, ValueError) as err:
        raise TemporalDataError(source, 0, type(err).__name__, one_line(err)) from err
    return parse_evaluation(data, source)


def parse_evaluation(data: bytes, source: str) -> SavedEvaluation:
    """The evaluation in Parquet ``data`` read from ``source`` (checked before use).

    Raises:
        TemporalDataError: not Parquet, a missing or mistyped column, a bad value or
            metadata (names ``source`` and the row).
        ConfigError: more rows than the ``graph_edges`` limit.
    """
    table = read_bounded_parquet(pa.py_buffer(data), source, _check_schema)
    for name in _COLUMNS:
        if table.column(name).null_count:
            raise TemporalDataError(source, 0, None, f"column {name!r} holds nulls")
    meta = _meta(table.schema.metadata or {}, source)
    names = table.column("set").to_numpy(zero_copy_only=False)
    arrays = {k: table.column(k).to_numpy(zero_copy_only=False) for k in _COLUMNS if k != "set"}
    _check_values(names, arrays, source)
    sets = {}
    for score_set in ScoreSet:
        rows = names == score_set.value
        if rows.any():
            sets[score_set] = SetScores(
                eid=arrays["eid"][rows].astype(np.int64),
                **{k: arrays[k][rows].astype(np.float64) for k in ("t", "pos", "neg")})
    if ScoreSet.TEST not in sets:
        raise TemporalDataError(source, 0, None, "no 'test' rows: the test pass is missing")
    return SavedEvaluation(sets=sets, meta=meta)


def _check_schema(schema: pa.Schema, source: str) -> None:
    for name, ok in _COLUMNS.items():
        index = schema.get_field_index(name)
        if index < 0:
            raise TemporalDataError(source, 0, name, f"missing column (needs {sorted(_COLUMNS)})")
        if not ok(schema.field(index).type):
            raise TemporalDataError(source, 0, str(schema.field(index).type),
                                    f"column {name!r} has the wrong type")


def _check_values(names: np.ndarray, arrays: dict[str, np.ndarray], source: str) -> None:
    """Known set names, finite times, scores in [0, 1]; the first bad row is named."""
    allowed = np.array([s.value for s in ScoreSet], dtype=object)
    checks = [("set", ~np.isin(names.astype(object), allowed), "not 'val' or 'test'"),
              ("t", ~np.isfinite(arrays["t"]), "not a finite time")]
    checks += [(k, ~((arrays[k] >= 0.0) & (arrays[k] <= 1.0)), "not a score in [0, 1]")
               for k in ("pos", "neg")]
    for column, bad, problem in checks:
        if bad.any():
            row = int(np.argmax(bad))
            value = names[row] if column == "set" else arrays[column][row]
            raise TemporalDataError(source, row + 1, value, f"column {column!r}: {problem}")


def _meta(metadata: dict[bytes, bytes], source: str) -> dict[str, Any]:
    raw = metadata.get(META_KEY, b"{}")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise TemporalDataError(source, 0, raw[:80], f"metadata {META_KEY.decode()}: not "
                                                     f"JSON ({one_line(err)})") from err
    if not isinstance(meta, dict):
        raise TemporalDataError(source, 0, raw[:80],
                                f"metadata {META_KEY.decode()}: not a JSON object")
    return meta
