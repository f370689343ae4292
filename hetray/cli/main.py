"""The ``hetray`` command line.

Exit codes: 0 success, 1 runtime failure (e.g. Ray unreachable), 2 usage errors (bad
flags, bad config files).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from hetray.cli.render import devices_table, nodes_table, spec_summary
from hetray.cluster.from_ray import LinkDefaults, spec_from_ray_nodes
from hetray.cluster.loader import dump_cluster_spec, load_cluster_spec
from hetray.cluster.spec import LinkSpec
from hetray.core.errors import ConfigError, HetrayError
from hetray.core.units import gbit_per_s_to_bytes_per_s

F = TypeVar("F", bound=Callable[..., Any])

ADDRESS_HELP = (
    "Ray to use: omit for an embedded local Ray; 'auto' for the cluster started on this "
    "machine (or $RAY_ADDRESS); 'host:port' for a cluster's GCS; 'ray://host:port' for a "
    "Ray client session. Token auth: export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN_PATH."
)


def address_option(func: F) -> F:
    """The ``--address`` flag every command that talks to Ray takes."""
    return click.option("--address", default=None, metavar="ADDRESS", help=ADDRESS_HELP)(func)


def ship_option(func: F) -> F:
    """The ``--ship-project`` flag: upload this hetray to a cluster that lacks it."""
    return click.option(
        "--ship-project", is_flag=True,
        help="Upload this hetray package to the cluster with the job (runtime_env py_modules) "
             "for clusters where it is not installed.",
    )(func)


def handle_errors(func: F) -> F:
    """Turn hetray errors into one clear line and the right exit code."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)
        except HetrayError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              help="Log level of hetray's own messages.")
@click.version_option(package_name="hetray")
def cli(log_level: str) -> None:
    """hetray: train graph and large models across heterogeneous Ray clusters.

    Every command that needs Ray takes --address; without it hetray starts an embedded
    local Ray for the duration of the command.
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("hetray").setLevel(log_level)


def _connect_and_probe(address: str | None, ship_project: bool) -> tuple[Any, list[Any], list[Any]]:
    from hetray import runtime
    from hetray.actors.probe import probe_nodes

    connection = runtime.connect(address, ship_project=ship_project)
    nodes = runtime.live_nodes()
    return connection, nodes, probe_nodes(nodes)


def _print_cluster(connection: Any, nodes: list[Any], reports: list[Any]) -> None:
    click.echo(f"Ray {connection.ray_version} ({connection.mode.value}, {connection.address}), "
               f"namespace {connection.namespace!r}, {len(nodes)} node(s)")
    click.echo()
    click.echo(nodes_table(nodes))
    click.echo()
    click.echo(devices_table([(r.node_id, r.devices) for r in reports]))


@cli.command()
@address_option
@ship_option
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
                   cross: tuple[float, float]) -> LinkDefaults:
    def link(pair: tuple[float, float]) -> LinkSpec:
        return LinkSpec(latency_s=pair[0], bandwidth_bytes_per_s=gbit_per_s_to_bytes_per_s(pair[1]))

    return LinkDefaults(intra_node=link(intra), inter_node=link(inter), cross_cluster=link(cross))


def _link_option(name: str, default: tuple[float, float], what: str) -> Callable[[F], F]:
    return click.option(
        f"--{name}", type=(click.FloatRange(min=0, min_open=True),) * 2, default=default,
        show_default=True, metavar="LATENCY_S GBIT_PER_S",
        help=f"Latency (s) and bandwidth (Gbit/s) {what}; Ray cannot measure these.",
    )


@cli.command("cluster-spec")
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
    spec_file: Path | None, from_ray: bool, address: str | None, name: str, out: Path | None,
    intra_node: tuple[float, float], inter_node: tuple[float, float],
    cross_cluster: tuple[float, float],
) -> None:
    """Validate a cluster spec file, or write one for the live Ray cluster (--from-ray).

    With --from-ray, nodes are grouped into clusters by their 'hetray-cluster:<name>'
    resource and into node groups by their 'accel:<MODEL>' resources.
    """
    if from_ray == (spec_file is not None):
        raise click.UsageError("give either SPEC_FILE or --from-ray")
    if spec_file is not None:
        spec = load_cluster_spec(spec_file)
        click.echo(spec_summary(spec))
        return
    from hetray import runtime

    runtime.connect(address)
    defaults = _link_defaults(intra_node, inter_node, cross_cluster)
    spec = spec_from_ray_nodes(runtime.live_nodes(), name=name, links=defaults)
    text = dump_cluster_spec(spec)
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out} ({spec.num_devices} devices in {len(spec.clusters)} cluster(s))")


@cli.command()
@address_option
@ship_option
@handle_errors
def demo(address: str | None, ship_project: bool) -> None:
    """Run the main job end to end: connect, detect devices, print the cluster and a spec."""
    connection, nodes, reports = _connect_and_probe(address, ship_project)
    click.echo("== cluster ==")
    _print_cluster(connection, nodes, reports)
    spec = spec_from_ray_nodes(nodes, name="demo", links=LinkDefaults())
    click.echo()
    click.echo("== planner-ready cluster spec (hetray cluster-spec --from-ray) ==")
    click.echo(dump_cluster_spec(spec), nl=False)
    click.echo()
    click.echo(spec_summary(spec))
    click.echo()
    click.echo("== heterogeneous GNN: relation-aggregation-first on partition holders ==")
    from hetray.cli.hgnn import demo_raf

    demo_raf()
    click.echo()
    click.echo("== planning: principle-guided MCTS vs baselines (hetray plan) ==")
    from hetray.cli.plan import demo_planning_step

    demo_planning_step(Path(__file__).resolve().parents[2] / "cluster_configs" / "specs"
                       / "two-cluster-16.yaml")
    click.echo()
    click.echo("== temporal GNN: MSPipe on memory-store actors (hetray train tgnn) ==")
    from hetray.cli.tgnn import demo_mspipe

    demo_mspipe()
    click.echo()
    click.echo("== LLM pipeline: Virtual-1F1B on stage actors, slow link (hetray train llm) ==")
    from hetray.cli.llm import demo_llm

    demo_llm()


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="hetray")


def _register_subcommands() -> None:
    from hetray.cli.hgnn import train
    from hetray.cli.llm import llm
    from hetray.cli.plan import plan_command, profile_command
    from hetray.cli.tgnn import tgnn
    from hetray.cli.tune import report_command, tune_command

    tgnn.callback = handle_errors(tgnn.callback)
    train.add_command(tgnn)
    llm.callback = handle_errors(llm.callback)
    train.add_command(llm)
    cli.add_command(train)
    for command in (plan_command, profile_command, tune_command, report_command):
        command.callback = handle_errors(command.callback)
        cli.add_command(command)


_register_subcommands()
