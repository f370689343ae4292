"""Fuzz the saved-evaluation reader (:func:`hetray.mspipe.evaluation.load_evaluation`).

``hetray eval vcs --run DIR`` reads ``DIR/evaluation.parquet``, the per-event scores a run
saved (a shared location: untrusted). The seed is a small valid file; mutants drop, retype
and fill columns, edit the ``hetray_evaluation`` metadata, cut rows and flip bytes. See
:mod:`tests.fuzz.harness` for the property, bounds and budget.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given

from hetray.core.storage import RunStorage
from hetray.mspipe.evaluation import (
    EVALUATION_FILE,
    META_KEY,
    SavedEvaluation,
    ScoreSet,
    SetScores,
    load_evaluation,
)
from tests.fuzz.harness import check_loader, fuzz_settings, written
from tests.fuzz.tables import table_mutants

_SEED = SavedEvaluation(
    sets={ScoreSet.VAL: SetScores(eid=np.arange(3), t=np.array([1.0, 2.0, 2.0]),
                                  pos=np.array([0.9, 0.2, 0.6]), neg=np.array([0.1, 0.4, 0.5])),
          ScoreSet.TEST: SetScores(eid=np.arange(3, 7), t=np.array([3.0, 4.0, 4.0, 6.0]),
                                   pos=np.array([0.8, 0.3, 0.7, 0.5]),
                                   neg=np.array([0.2, 0.6, 0.1, 0.5]))},
    meta={"model": "tgn", "best_epoch": 1})


def valid_evaluation(saved: SavedEvaluation) -> None:
    """What every evaluation read back must satisfy."""
    assert ScoreSet.TEST in saved.sets
    assert isinstance(saved.meta, dict)
    for scores in saved.sets.values():
        n = len(scores)
        assert scores.eid.shape == scores.t.shape == scores.pos.shape == scores.neg.shape == (n,)
        assert np.isfinite(scores.t).all()
        for values in (scores.pos, scores.neg):
            assert ((values >= 0) & (values <= 1)).all()


@fuzz_settings(40)
@given(table_mutants(_SEED.to_table(), (META_KEY,)))
def test_saved_evaluation(data):
    with written({EVALUATION_FILE: data}, "run") as root:
        check_loader("saved_evaluation", lambda: load_evaluation(RunStorage.of(str(root))),
                     root, valid_evaluation)


def test_saved_evaluation_seed_is_valid():
    with written({EVALUATION_FILE: _SEED.to_bytes()}, "run") as root:
        saved = load_evaluation(RunStorage.of(str(root)))
        valid_evaluation(saved)
        assert saved.meta == _SEED.meta
        np.testing.assert_array_equal(saved.sets[ScoreSet.TEST].neg,
                                      _SEED.sets[ScoreSet.TEST].neg)
