"""``hetray train SYSTEM``: one subcommand per training system, each imported when it runs."""

from __future__ import annotations

import click

from hetray.cli.lazy import LazyGroup

#: The ``--help`` Examples block (``\b`` keeps click from rewrapping it).
EXAMPLES = """\b
Examples:
  hetray train heta --dataset synthetic-mag:100000 --partitions 2 --epochs 2
  hetray train mspipe --dataset synthetic --epochs 1
  hetray train pipeline --cluster local --steps 10
  hetray train heta --print-config > heta.yaml   # edit, then: --config heta.yaml
"""


@click.group(cls=LazyGroup, epilog=EXAMPLES, lazy_commands={
    "heta": ("hetray.cli.heta:heta",
             "Heta: R-GCN / R-GAT on partition holders (RAF or vanilla)."),
    "mspipe": ("hetray.cli.mspipe:mspipe",
               "MSPipe: TGN / JODIE / APAN on memory-store actors (or sequential)."),
    "pipeline": ("hetray.cli.pipeline:pipeline",
                 "HetAuto pipeline: a GPT on pipeline stage actors."),
}, aliases={"hgnn": "heta", "tgnn": "mspipe", "llm": "pipeline"})
def train() -> None:
    """Train a system on the connected Ray cluster (omit --address for an embedded one)."""
