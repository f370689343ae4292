"""``hetray eval``: evaluate a finished run again from what it saved.

``hetray eval vcs --run DIR`` reads ``DIR/evaluation.parquet`` (the per-event scores every
``hetray train mspipe`` run saves in its run storage, :mod:`hetray.mspipe.evaluation`),
computes the volatility-cluster statistics of its errors (:mod:`hetray.temporal.volatility`,
``docs/vcs.md``), prints them and writes two plots. ``hetray train mspipe --report-vcs`` calls
the same :func:`report_vcs` when its run ends. Importing this module loads neither torch nor
Ray (nor matplotlib or scipy: the command body does).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hetray.cli.common import handle_errors
from hetray.core.storage import RunStorage
from hetray.mspipe.evaluation import SavedEvaluation, ScoreSet, load_evaluation
from hetray.temporal.volatility import (
    DEFAULT_DRAWS,
    DEFAULT_LAGS,
    DEFAULT_Z,
    ErrorSeries,
    WindowKind,
    WindowSpec,
    volatility_report,
)

if TYPE_CHECKING:
    from hetray.temporal.composition import CompositionReport
    from hetray.temporal.data import EventStream
    from hetray.temporal.volatility import VolatilityReport

logger = logging.getLogger(__name__)

#: The ``--help`` Examples block (``\b`` keeps click from rewrapping it).
EXAMPLES = """\b
Examples:
  hetray train mspipe --pipeline sequential --storage runs/tgn --epochs 3
  hetray eval vcs --run runs/tgn                     # table + two plots in runs/tgn
  hetray eval vcs --run runs/tgn --window time --window-size 50 --out plots/
  hetray eval vcs --run runs/tgn --set val --draws 5000 --json-out vcs.json
  hetray eval vcs --run runs/tgn --events ../shared/data/collegemsg/CollegeMsg.txt
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class VcsSettings:
    """How the statistics are computed (the flags of ``hetray eval vcs``)."""

    score_set: ScoreSet = ScoreSet.TEST
    window: WindowSpec = field(default_factory=WindowSpec)
    z: float = DEFAULT_Z
    lags: int = DEFAULT_LAGS
    draws: int = DEFAULT_DRAWS
    seed: int = 0
    temperature: float = 1.0


def _label(saved: SavedEvaluation, score_set: ScoreSet) -> str:
    meta = saved.meta
    dataset = Path(str(meta.get("dataset", "?"))).name
    weight = meta.get("vca_weight", 0.0)
    vca = f", VCA lambda {weight:g}" if isinstance(weight, int | float) and weight else ""
    return f"{meta.get('model', '?')} on {dataset}{vca} ({score_set.value})"


def _echo(report: VolatilityReport, label: str) -> None:
    click.echo(f"volatility clusters of {label}: {report.num_events} events, "
               f"{report.num_errors} errors (rate {report.error_rate:.4f}); "
               f"{report.num_windows} windows ({report.empty_windows} empty), "
               f"{report.draws} permutation draws")
    frame = report.to_frame()
    click.echo(frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    click.echo(f"Ljung-Box chi-square({report.lags}) p = {report.chi2_p:.4g}. Reading: D near "
               "1 with a large p, no clustering; D > 1 with p < 0.05, errors cluster in time "
               "(docs/vcs.md)")


def report_vcs(storage: RunStorage, saved: SavedEvaluation, settings: VcsSettings,
               out: Path | None = None) -> VolatilityReport:
    """Compute, print and plot the statistics of ``saved``; plots go to ``out`` or storage.

    Raises:
        ConfigError: ``settings.score_set`` was not saved by the run.
    """
    from hetray.core.errors import ConfigError
    from hetray.experiments.vcs_plots import (
        AUTOCORRELATION_PNG,
        ERROR_RATE_PNG,
        autocorrelation_figure,
        error_rate_figure,
    )

    if settings.score_set not in saved.sets:
        raise ConfigError("--set", "set", settings.score_set.value,
                          ", ".join(s.value for s in saved.sets) + " (what the run saved)")
    scores = saved.sets[settings.score_set]
    series = ErrorSeries.of_scores(scores.pos, scores.neg, scores.t, settings.temperature)
    report = volatility_report(series, settings.window, draws=settings.draws,
                               seed=settings.seed, z=settings.z, lags=settings.lags)
    label = _label(saved, settings.score_set)
    _echo(report, label)
    for name, png in ((ERROR_RATE_PNG, error_rate_figure(report, label)),
                      (AUTOCORRELATION_PNG, autocorrelation_figure(report, label))):
        _write_png(storage, out, name, png)
    return report


def _write_png(storage: RunStorage, out: Path | None, name: str, png: bytes) -> None:
    """Write a figure into ``out`` if given, else into the run storage; say where."""
    if out is None:
        storage.write_bytes(name, png)
        click.echo(f"wrote {storage.display(name)}")
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(png)
        click.echo(f"wrote {out / name}")


def report_composition(storage: RunStorage, saved: SavedEvaluation, stream: EventStream,
                       settings: VcsSettings, out: Path | None = None) -> CompositionReport:
    """Print how much of D the composition of ``stream`` (the run's events) explains.

    Also writes its figure (:data:`~hetray.experiments.vcs_plots.COMPOSITION_PNG`) to
    ``out`` or the run storage.

    Raises:
        ValueError: ``stream`` is not the one the run trained on, or a pass is missing.
    """
    from hetray.experiments.vcs import composition_of
    from hetray.experiments.vcs_plots import COMPOSITION_PNG, composition_figure

    found = composition_of(saved.sets, stream, settings.window, settings.score_set)
    share = (f"{found.explained_share:.0%} of D - 1 explained"
             if math.isfinite(found.explained_share) else "D <= 1: no excess to explain")
    new = (f"{found.new_node_share:.1%} of events touch a new node (error rate "
           f"{found.error_rate_new:.3f} vs {found.error_rate_seen:.3f} elsewhere)"
           if found.new_node_share > 0 else "no event touches a new node")
    click.echo(f"composition (new and rarely seen endpoints, class rates from the other "
               f"pass): D {found.dispersion:.3g} -> {found.conditional_dispersion:.3g} given "
               f"the classes, {share}; {new}")
    scored = saved.sets[settings.score_set]
    figure = composition_figure(found, settings.window.edges(scored.t),
                                _label(saved, settings.score_set))
    _write_png(storage, out, COMPOSITION_PNG, figure)
    return found


@click.group("eval")
def eval_group() -> None:
    """Evaluate finished runs again from the per-event scores they saved."""


@eval_group.command("vcs", epilog=EXAMPLES)
@click.option("--run", "run_dir", required=True, metavar="DIR|URI",
              help="A finished `hetray train mspipe` run directory (its --storage): it holds "
                   "evaluation.parquet, the per-event test and validation scores.")
@click.option("--set", "score_set", type=click.Choice([s.value for s in ScoreSet]),
              default=ScoreSet.TEST.value, show_default=True,
              help="Which pass's errors: the test pass or the tested epoch's validation.")
@click.option("--window", type=click.Choice([k.value for k in WindowKind]),
              default=WindowKind.EVENTS.value, show_default=True,
              help="events: windows of --window-size events; time: --window-size windows of "
                   "equal time span (events with equal times share one; some may be empty).")
@click.option("--window-size", default=WindowSpec().size, show_default=True,
              type=click.IntRange(1, 10**7),
              help="Events per window (--window events) or number of windows (--window time).")
@click.option("--z", default=DEFAULT_Z, show_default=True, type=click.FloatRange(min=0),
              help="A cluster window's error rate exceeds p + z standard errors.")
@click.option("--lags", default=DEFAULT_LAGS, show_default=True, type=click.IntRange(1, 1000),
              help="Lags K of the Ljung-Box statistic and of the autocorrelation plot.")
@click.option("--draws", default=DEFAULT_DRAWS, show_default=True,
              type=click.IntRange(1, 100_000),
              help="Permutation draws of the null (errors shuffled across events).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Seed of the permutation draws.")
@click.option("--temperature", default=1.0, show_default=True,
              type=click.FloatRange(min=0, min_open=True),
              help="T of the soft error sigmoid((logit s_neg - logit s_pos) / T).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write the two plots here instead of into the run directory.")
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the statistics as JSON.")
@click.option("--events", type=click.Path(dir_okay=False, path_type=Path),
              help="The event file the run trained on: also report how much of D its "
                   "composition (bursts of new and rarely seen nodes) explains.")
@handle_errors
def vcs(run_dir: str, score_set: str, window: str, window_size: int, z: float, lags: int,
        draws: int, seed: int, temperature: float, out: Path | None,
        json_out: Path | None, events: Path | None) -> None:
    """Volatility-cluster statistics of a finished run's errors: D, clusters, Ljung-Box."""
    storage = RunStorage.of(run_dir)
    saved = load_evaluation(storage)
    settings = VcsSettings(score_set=ScoreSet(score_set),
                           window=WindowSpec(WindowKind(window), window_size), z=z, lags=lags,
                           draws=draws, seed=seed, temperature=temperature)
    report = report_vcs(storage, saved, settings, out)
    composition = None
    if events is not None:
        from hetray.core.errors import ConfigError
        from hetray.mspipe.config import DataConfig, read_dataset

        stream = read_dataset(DataConfig(dataset=str(events))).events
        try:
            composition = report_composition(storage, saved, stream, settings, out)
        except ValueError as exc:
            raise ConfigError("--events", "events", str(events), str(exc)) from exc
    if json_out is not None:
        extra = {} if composition is None else {"composition": composition.to_dict()}
        json_out.write_text(json.dumps({**report.to_dict(), "run": storage.display(),
                                        "set": score_set, "meta": saved.meta, **extra},
                                       indent=2, allow_nan=False), encoding="utf-8")
