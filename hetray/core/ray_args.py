"""The two Ray flags of every driver script (``examples/``): ``--address``, ``--ship-project``.

They mean what the ``hetray`` commands' flags mean (:func:`hetray.runtime.connect`): no
``--address`` joins ``$RAY_ADDRESS`` when it is set (``ray job submit`` sets it), else starts
an embedded local Ray.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_ray_arguments(parser)
    >>> args = parser.parse_args(["--address", "auto"])
    >>> args.address, args.ship_project
    ('auto', False)
"""

from __future__ import annotations

import argparse

#: ``--address`` help, shared by every driver script.
ADDRESS_HELP = ("Ray to use: omit for $RAY_ADDRESS when set (as in a 'ray job submit' job), "
                "else an embedded local Ray; 'local', 'auto', 'host:port' or 'ray://host:port'")


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--address`` and ``--ship-project`` to ``parser``."""
    parser.add_argument("--address", default=None, help=ADDRESS_HELP)
    parser.add_argument("--ship-project", action="store_true",
                        help="upload hetray with the job (for clusters without it installed)")
