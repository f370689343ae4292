"""Print the nodes and devices of a Ray cluster through hetray, and place one actor per device kind.

Run locally (embedded Ray):          python examples/hello_cluster.py
Submit to a cluster:                 ray job submit --address http://HEAD:8265 -- \
                                         python examples/hello_cluster.py --address auto
From a Ray client session:           python examples/hello_cluster.py --address ray://HEAD:10001
"""

from __future__ import annotations

import argparse

import ray
from hetray.actors.probe import probe_nodes

from hetray import runtime
from hetray.accel.resources import accel_counts, actor_options
from hetray.cluster.render import devices_table, nodes_table
from hetray.core.ray_args import add_ray_arguments


@ray.remote
def node_of_this_task() -> str:
    """The node id a task runs on."""
    return ray.get_runtime_context().get_node_id()


def main() -> None:
    """Connect, print nodes and devices, place one task per device kind."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_ray_arguments(parser)
    args = parser.parse_args()

    connection = runtime.connect(args.address, ship_project=args.ship_project)
    nodes = runtime.live_nodes()
    reports = probe_nodes(nodes)
    print(f"connected: {connection.mode.value} {connection.address}, {len(nodes)} node(s)")
    print(nodes_table(nodes))
    print(devices_table([(r.node_id, r.devices) for r in reports]))

    models = sorted({model for node in nodes for model in accel_counts(node.resources)})
    for model in models:
        options = actor_options(model, num_devices=1, num_cpus=0)
        ran_on = ray.get(node_of_this_task.options(**options).remote(), timeout=120)
        print(f"placed: accel:{model} -> node {ran_on}")
    print(f"HELLO_CLUSTER_OK nodes={len(nodes)} models={','.join(models)}")


if __name__ == "__main__":
    main()
