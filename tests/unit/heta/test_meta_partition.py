from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetray.core.errors import ConfigError
from hetray.heta.meta_partition import SchemaStats, meta_partition

TYPES = ["t0", "t1", "t2", "t3", "t4"]


@st.composite
def schemas(draw):
    rels = draw(st.lists(st.tuples(st.sampled_from(TYPES), st.sampled_from(TYPES)),
                         min_size=1, max_size=10, unique=True))
    relations = [(s, f"r{i}", d) for i, (s, d) in enumerate(rels)]
    relations.append(("t1", "into_root", "t0"))
    return SchemaStats(
        target_type="t0",
        num_nodes={t: draw(st.integers(1, 1000)) for t in TYPES},
        num_edges={r: draw(st.integers(1, 10_000)) for r in relations},
        row_bytes={t: 4 * draw(st.integers(1, 64)) for t in TYPES})


@given(stats=schemas(), depth=st.integers(1, 3), data=st.data())
@settings(max_examples=60, deadline=None)
def test_meta_partition_invariants(stats, depth, data):
    root_rels = [r for r in stats.num_edges if r[2] == "t0"]
    k = data.draw(st.integers(1, len(root_rels)))
    plan = meta_partition(stats, k, depth)
    # every root subtree goes to exactly one partition
    assigned = sorted(i for p in plan.partitions for i in p.subtrees)
    assert assigned == list(range(len(root_rels)))
    # every relation of the metatree is held by a partition whose subtree contains it
    tree_rels = {v.relation for v in plan.tree.walk() if v.relation is not None}
    assert tree_rels == set().union(*(p.relations for p in plan.partitions))
    for p in plan.partitions:  # a subtree's root edge lives with the subtree
        assert all(plan.subtrees[i].node.relation in p.relations for i in p.subtrees)
    # ownership is unique and covers every used type
    owned = [t for p in plan.partitions for t in p.owned_types]
    assert len(owned) == len(set(owned))
    assert set(owned) == set().union(*(p.node_types for p in plan.partitions))
    assert "t0" in plan.partitions[0].owned_types
    # balance: LPT is within 4/3 of optimal, so within 4/3 * max(mean, heaviest subtree)
    heaviest = max(s.weight for s in plan.subtrees)
    mean = sum(s.weight for s in plan.subtrees) / k
    assert max(p.weight for p in plan.partitions) <= 4 / 3 * max(mean, heaviest) + 1e-9
    assert plan.report()["imbalance"] == pytest.approx(plan.imbalance)


def test_mag_schema_report():
    rels = [("paper", "cites", "paper"), ("author", "writes", "paper"),
            ("paper", "rev_writes", "author"), ("paper", "has_topic", "fos"),
            ("fos", "rev_has_topic", "paper"), ("author", "affiliated_with", "inst"),
            ("inst", "rev_affiliated_with", "author")]
    stats = SchemaStats(target_type="paper", num_nodes={"paper": 100, "author": 150, "fos": 10,
                                                        "inst": 5},
                        num_edges=dict.fromkeys(rels, 300),
                        row_bytes={"paper": 512, "author": 768, "fos": 768, "inst": 768})
    plan = meta_partition(stats, 3, 2)
    assert [c.relation[1] for c in plan.tree.children] == ["cites", "rev_has_topic", "writes"]
    report = plan.report()
    assert len(report["partitions"]) == 3
    assert all(p["num_edges"] > 0 and p["num_bytes"] > 0 for p in report["partitions"])
    with pytest.raises(ConfigError, match=r"num_partitions.*1 \.\. 3"):
        meta_partition(stats, 4, 2)
