"""The ``hetray`` command line.

Exit codes: 0 success, 1 runtime failure (e.g. Ray unreachable), 2 bad input (flags, files,
values); see :mod:`hetray.cli.errors`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from hetray.cli.common import address_option, connect, handle_errors
from hetray.cli.lazy import LazyGroup
from hetray.cli.progress import set_quiet
from hetray.core.limits import DEFAULT_LIMITS, parse_limits, raise_limits

F = TypeVar("F", bound=Callable[..., Any])

@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             lazy_commands={
                 "plan": ("hetray.cli.planner:plan_command",
                          "Search a hybrid-parallel plan (HetAuto planner)."),
                 "profile": ("hetray.cli.planner:profile_command",
                             "Time transformer layers here (planner measurements)."),
                 "train": ("hetray.cli.train:train", "Train a system on Ray actors."),
                 "tune": ("hetray.cli.tune:tune_command", "Sweep a system with Ray Tune."),
                 "report": ("hetray.cli.tune:report_command", "Plot sweeps and benchmarks."),
                 "incremental": ("hetray.cli.incremental:incremental",
                                 "Graph incremental learning under structural shift (SSRM)."),
                 "theory": ("hetray.cli.theory:theory_command", "SGD vs ridge excess risk."),
                 "finance": ("hetray.cli.finance:finance", "MTRGL pair trading on price data."),
                 "generate": ("hetray.cli.generate:generate", "Graph generation: GDSS vs SBGD."),
                 "latency": ("hetray.cli.latency:latency", "CDMPP tensor-program latency."),
                 "eval": ("hetray.cli.eval:eval_group", "Re-evaluate finished runs (VCS)."),
             })
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              help="Log level of hetray's own messages.")
@click.option("--limit", "limits", multiple=True, metavar="NAME=VALUE",
              help="Raise a size limit for this command (repeatable), e.g. "
                   "--limit cluster_nodes=50000; limits: " + ", ".join(
                       f"{k} ({v:,})" for k, v in DEFAULT_LIMITS.items()) + ".")
@click.option("--quiet", is_flag=True, help="No progress bars or progress lines (results "
                                            "and errors still print).")
@click.version_option(package_name="hetray")
@handle_errors
def cli(log_level: str, limits: tuple[str, ...], quiet: bool) -> None:
    """hetray: train graph and large models across heterogeneous Ray clusters.

    Every command that needs Ray takes --address; without it hetray starts an embedded
    local Ray for the duration of the command.

    Exit codes: 0 success, 1 runtime failure, 2 bad input (flags, files, values).
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("hetray").setLevel(log_level)
    raise_limits(parse_limits(",".join(limits), "--limit"))
    set_quiet(quiet)


def _connect_and_probe(address: str | None, ship_project: bool) -> tuple[Any, list[Any], list[Any]]:
    from hetray import runtime
    from hetray.actors.probe import probe_nodes

    connection = connect(address, ship_project)
    nodes = runtime.live_nodes()
    return connection, nodes, probe_nodes(nodes)


def _print_cluster(connection: Any, nodes: list[Any], reports: list[Any]) -> None:
    from hetray.cluster.render import devices_table, nodes_table

    click.echo(f"Ray {connection.ray_version} ({connection.mode.value}, {connection.address}), "
               f"namespace {connection.namespace!r}, {len(nodes)} node(s)")
    click.echo()
    click.echo(nodes_table(nodes))
    click.echo()
    click.echo(devices_table([(r.node_id, r.devices) for r in reports]))


@cli.command(epilog="""\b
Examples:
  hetray info                         # the embedded local Ray
  hetray info --address auto          # the cluster started on this machine
  hetray info --address ray://HEAD:10001
""")
@address_option
@handle_errors
def info(address: str | None, ship_project: bool) -> None:
    """Show the Ray connection, its nodes, their devices with specs, and versions."""
    connection, nodes, reports = _connect_and_probe(address, ship_project)
    _print_cluster(connection, nodes, reports)
    click.echo()
    for report in reports:
        versions = ", ".join(f"{k} {v}" for k, v in sorted(report.versions.items()))
        click.echo(f"{report.node_id[:12]} ({report.hostname}): {versions}")


def _link_defaults(intra: tuple[float, float], inter: tuple[float, float],
                   cross: tuple[float, float]) -> Any:
    from hetray.cluster.from_ray import LinkDefaults
    from hetray.cluster.spec import LinkSpec

    return LinkDefaults(intra_node=LinkSpec.from_gbit_per_s(*intra),
                        inter_node=LinkSpec.from_gbit_per_s(*inter),
                        cross_cluster=LinkSpec.from_gbit_per_s(*cross))


def _link_option(name: str, default: tuple[float, float], what: str) -> Callable[[F], F]:
    return click.option(
        f"--{name}", type=(click.FloatRange(min=0, min_open=True),) * 2, default=default,
        show_default=True, metavar="LATENCY_S GBIT_PER_S",
        help=f"Latency (s) and bandwidth (Gbit/s) {what}; Ray cannot measure these.",
    )


@cli.command("cluster-spec", epilog="""\b
Examples:
  hetray cluster-spec cluster_configs/specs/two-cluster-16.yaml     # validate and summarise
  hetray cluster-spec --from-ray --address auto --out my-cluster.yaml
  hetray cluster-spec --from-ray --cross-cluster 0.002 25           # 2 ms, 25 Gbit/s
""")
@click.argument("spec_file", required=False, type=click.Path(path_type=Path))
@click.option("--from-ray", is_flag=True, help="Describe the live Ray cluster instead of a file.")
@address_option
@click.option("--name", default="ray-cluster", show_default=True, help="Name of the written spec.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the spec YAML here (default: print it).")
@_link_option("intra-node", (5e-6, 256.0), "between devices of one node")
@_link_option("inter-node", (1e-5, 100.0), "between nodes of one cluster")
@_link_option("cross-cluster", (1e-3, 10.0), "between clusters")
@handle_errors
def cluster_spec(
    spec_file: Path | None, from_ray: bool, address: str | None, ship_project: bool, name: str,
    out: Path | None,
    intra_node: tuple[float, float], inter_node: tuple[float, float],
    cross_cluster: tuple[float, float],
) -> None:
    """Validate a cluster spec file, or write one for the live Ray cluster (--from-ray).

    With --from-ray, nodes are grouped into clusters by their 'hetray-cluster:<name>'
    resource and into node groups by their 'accel:<MODEL>' resources.
    """
    if from_ray == (spec_file is not None):
        raise click.UsageError("give either SPEC_FILE or --from-ray")
    from hetray.cluster.from_ray import spec_from_ray_nodes
    from hetray.cluster.loader import dump_cluster_spec, load_cluster_spec
    from hetray.cluster.render import spec_summary

    if spec_file is not None:
        spec = load_cluster_spec(spec_file)
        click.echo(spec_summary(spec))
        return
    from hetray import runtime

    runtime.connect(address, ship_project=ship_project)
    defaults = _link_defaults(intra_node, inter_node, cross_cluster)
    spec = spec_from_ray_nodes(runtime.live_nodes(), name=name, links=defaults)
    text = dump_cluster_spec(spec)
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out} ({spec.num_devices} devices in {len(spec.clusters)} cluster(s))")


@cli.command(epilog="""\b
Examples:
  hetray status --address auto
  hetray status --address ray://HEAD:10001
""")
@address_option
@click.option("--timeout-s", default=2.0, show_default=True, type=click.FloatRange(min=0.1),
              help="How long each actor may take to answer.")
@handle_errors
def status(address: str | None, ship_project: bool, timeout_s: float) -> None:
    """List the live hetray actors of the cluster (system, role, index, run) and their health."""
    from hetray.actors.status import hetray_actors
    from hetray.cluster.render import table

    connect(address, ship_project)
    actors = hetray_actors(timeout_s)
    if not actors:
        click.echo("no hetray actors are running")
        return
    click.echo(table(["system", "role", "index", "run", "state"],
                     [[a.system, a.role, a.index, a.group, a.state] for a in actors]))


@cli.command(epilog="""\b
Examples:
  hetray demo                      # what `make demo` runs, on an embedded local Ray
  hetray demo --address auto       # the same on the cluster started on this machine
""")
@address_option
@handle_errors
def demo(address: str | None, ship_project: bool) -> None:
    """Run the main job end to end: the cluster, then a short run of each system.

    Each system's part is its CLI module's ``demo()``: a small run config through the
    system's run API, the same path ``hetray train SYSTEM`` takes.
    """
    from importlib import import_module

    from hetray.cluster.from_ray import LinkDefaults, spec_from_ray_nodes
    from hetray.cluster.loader import dump_cluster_spec
    from hetray.cluster.render import spec_summary, table

    connection, nodes, reports = _connect_and_probe(address, ship_project)
    click.echo("== cluster ==")
    _print_cluster(connection, nodes, reports)
    spec = spec_from_ray_nodes(nodes, name="demo", links=LinkDefaults())
    click.echo()
    click.echo("== planner-ready cluster spec (hetray cluster-spec --from-ray) ==")
    click.echo(dump_cluster_spec(spec), nl=False)
    click.echo()
    click.echo(spec_summary(spec))
    results = []
    for module, title in DEMO_PARTS:
        click.echo()
        click.echo(f"== {title} ==")
        results.append(import_module(module).demo())
    click.echo()
    click.echo("== summary: each system against its baseline ==")
    click.echo(table(["system", "measure", "hetray", "baseline", "result"],
                     [r.row() for r in results]))


#: The systems ``hetray demo`` runs, in order: CLI module (with a ``demo()``) and title.
DEMO_PARTS = (
    ("hetray.cli.heta", "Heta: relation-aggregation-first HGNN on partition holders "
                        "(hetray train heta)"),
    ("hetray.cli.planner", "HetAuto planner: principle-guided MCTS vs baselines (hetray plan)"),
    ("hetray.cli.mspipe", "MSPipe: temporal GNN on memory-store actors (hetray train mspipe)"),
    ("hetray.cli.pipeline", "HetAuto pipeline: Virtual-1F1B on stage actors, slow link "
                            "(hetray train pipeline)"),
)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="hetray")
