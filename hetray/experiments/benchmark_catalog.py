"""What each committed benchmark measures, its headline numbers and the targets its issue set.

One :class:`Benchmark` per file of ``benchmarks/results/`` (by file stem). The targets are
the "Done when" bounds of the issue that built the benchmark (issue 3: planner, issue 4:
pipeline, issue 5: Heta, issue 6: MSPipe); the meaning of every key is in the module
docstring of ``benchmarks/<name>.py`` and in ``docs/<name>.md``. A benchmark file the catalog
does not describe is still rendered, as plain grouped tables
(:func:`~hetray.experiments.benchmark_views.generic_tables`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hetray.experiments.benchmark_views import (
    Column,
    Compare,
    FieldsView,
    Headline,
    MatrixRow,
    MatrixView,
    RecordView,
    Target,
    Unit,
    View,
    gap_points,
    quotient,
)

logger = logging.getLogger(__name__)

U = Unit
AT_LEAST, AT_MOST, ABOVE = Compare.AT_LEAST, Compare.AT_MOST, Compare.ABOVE


@dataclass(frozen=True, slots=True, kw_only=True)
class Counts:
    """A bar chart of counts per category stored as ``{category: count}`` at ``path``."""

    path: str
    filename: str
    title: str
    labels: tuple[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Benchmark:
    """How to read one benchmark JSON.

    Attributes:
        title: section title. question: what the benchmark answers.
        script: the command that writes the file. headlines: the numbers to read first.
        views: the tables. counts: bar charts of category counts.
    """

    title: str
    question: str
    script: str
    headlines: tuple[Headline, ...]
    views: tuple[View, ...]
    counts: tuple[Counts, ...] = ()


PLAN_COLUMNS = (Column("tokens_per_s", "predicted throughput (tokens/s)", U.COUNT),
                Column("step_time_s", "step time", U.SECONDS),
                Column("evaluations", "plans evaluated", U.COUNT),
                Column("search_s", "search time", U.SECONDS),
                Column("mcts_ratio", "MCTS / this method", U.RATIO))

PLANNER = Benchmark(
    title="Planner: MCTS against exhaustive search and the baselines",
    question="Does principle-guided MCTS reach the exhaustive optimum with a few percent of "
             "its evaluations, beat the uniform and Metis-style greedy plans on a "
             "736-device cluster, and does the random forest correct the analytical cost "
             "model on real timings?",
    script="python benchmarks/planner.py",
    headlines=(
        Headline(name="MCTS gap to the exhaustive optimum (two-cluster-16)", unit=U.PERCENT,
                 key="small.mcts_gap_pct", meaning="0 % = MCTS found the optimum",
                 target=Target(AT_MOST, 3.0, "issue 3")),
        Headline(name="MCTS evaluations / exhaustive's (two-cluster-16)", unit=U.SHARE,
                 key="small.eval_fraction", meaning="the search's cost next to exhaustive's",
                 target=Target(AT_MOST, 0.05, "issue 3")),
        Headline(name="search time on four-cluster-736", unit=U.SECONDS, key="large.search_s",
                 meaning="wall seconds on this 2-core machine",
                 target=Target(AT_MOST, 60.0, "issue 3")),
        Headline(name="predicted throughput, MCTS / uniform plan (736 devices)", unit=U.RATIO,
                 key="large.ratio_vs_uniform", meaning="> 1: MCTS's plan is faster",
                 target=Target(AT_LEAST, 1.3, "issue 3")),
        Headline(name="predicted throughput, MCTS / greedy plan (736 devices)", unit=U.RATIO,
                 key="large.ratio_vs_greedy", meaning=">= 1: never worse than greedy",
                 target=Target(AT_LEAST, 1.0, "issue 3")),
        Headline(name="held-out error, analytical MAPE / RF-corrected MAPE", unit=U.RATIO,
                 derive=quotient("costmodel.mape_analytical", "costmodel.mape_rf"),
                 meaning="2x = the RF halves the error",
                 target=Target(AT_LEAST, 2.0, "issue 3")),
    ),
    views=(
        FieldsView(title="Cost model on held-out real layer timings", fields=(
            Column("costmodel.mape_analytical", "analytical model MAPE", U.PERCENT),
            Column("costmodel.mape_rf", "RF-corrected MAPE", U.PERCENT),
            Column("costmodel.num_train", "training measurements", U.COUNT),
            Column("costmodel.num_holdout", "held-out measurements", U.COUNT),
            Column("costmodel.device", "device timed", U.TEXT))),
        RecordView(title="small: two-cluster-16, global batch 128 (each method's best plan)",
                   pattern="small.models.*.*", keys=("model", "method"), columns=PLAN_COLUMNS),
        RecordView(title="large: four-cluster-736, global batch 512 (each method's best plan)",
                   pattern="large.models.*.*", keys=("model", "method"), columns=PLAN_COLUMNS),
    ),
)

PIPELINE = Benchmark(
    title="Pipeline: Virtual-1F1B across a slow cross-cluster link",
    question="Does Virtual-1F1B hide a 20 ms, 1 Gbit/s cross-cluster link better than GPipe, "
             "1F1B and interleaved schedules on the same stage actors, and does the "
             "simulator predict the measured step times?",
    script="python benchmarks/pipeline.py",
    headlines=(
        Headline(name="step time, 1F1B / Virtual-1F1B (link on)", unit=U.RATIO,
                 key="speedup_v1f1b_over_1f1b", meaning="> 1: Virtual-1F1B is faster",
                 target=Target(AT_LEAST, 1.3, "issue 4")),
        Headline(name="step time, interleaved / Virtual-1F1B", unit=U.RATIO,
                 key="speedup_v1f1b_over_interleaved", meaning="> 1: Virtual-1F1B is faster"),
        Headline(name="step time, GPipe / Virtual-1F1B", unit=U.RATIO,
                 key="speedup_v1f1b_over_gpipe",
                 meaning="< 1: GPipe is faster here (it holds every activation)"),
        Headline(name="link time hidden by Virtual-1F1B", unit=U.SHARE,
                 key="link_hidden_fraction", meaning="1 - exposed link time / link time",
                 target=Target(AT_LEAST, 0.8, "issue 4")),
        Headline(name="simulator error on the link-on runs (MAPE)", unit=U.PERCENT,
                 key="simulator_mape_pct", meaning="mean |simulated - measured| / measured",
                 target=Target(AT_MOST, 15.0, "issue 4")),
    ),
    views=(
        RecordView(title="Per schedule: median step times and the link", pattern="schedules.*",
                   keys=("schedule",), columns=(
                       Column("step_s_link_on", "step, link on", U.SECONDS),
                       Column("step_s_link_off", "step, link off", U.SECONDS),
                       Column("predicted_s_link_on", "simulated, link on", U.SECONDS),
                       Column("link_time_s", "link time", U.SECONDS),
                       Column("exposed_link_s", "exposed link time", U.SECONDS),
                       Column("link_hidden_fraction", "link time hidden", U.SHARE),
                       Column("extra_warmup", "extra warm-up forwards", U.COUNT))),
        FieldsView(title="Setup", fields=(
            Column("config.num_stages", "stages p", U.COUNT),
            Column("config.num_microbatches", "micro-batches m", U.COUNT),
            Column("config.microbatch_size", "sequences per micro-batch", U.COUNT),
            Column("config.model.num_layers", "GPT layers", U.COUNT),
            Column("config.model.hidden", "GPT width", U.COUNT),
            Column("config.model.seq_len", "tokens per sequence", U.COUNT),
            Column("config.link_latency_s", "link latency", U.SECONDS),
            Column("config.link_bandwidth_bytes_per_s", "link bandwidth", U.BYTES_PER_S),
            Column("message_overhead_s", "fitted per-message overhead", U.SECONDS),
            Column("config.steps", "measured steps per schedule", U.COUNT),
            Column("config.cpu_count", "CPU cores", U.COUNT),
            Column("config.wall_s", "benchmark wall time", U.SECONDS))),
    ),
)


def _pair(label: str, unit: Unit, stem: str, suffix: str = "") -> MatrixRow:
    """The RAF and vanilla keys ``synthetic.<stem>_raf<suffix>`` and ``..._vanilla...``."""
    return MatrixRow(label, unit, (f"synthetic.{stem}_raf{suffix}",
                                   f"synthetic.{stem}_vanilla{suffix}"))


HETA = Benchmark(
    title="Heta: relation-aggregation-first (RAF) against vanilla distributed HGNN training",
    question="On a 1M-edge synthetic MAG graph split over 2 holders, does RAF send far fewer "
             "bytes and finish epochs sooner than vanilla (DistDGL-style) training at the "
             "same accuracy, and does Heta's cache lower the weighted miss cost?",
    script="python benchmarks/heta.py",
    headlines=(
        Headline(name="bytes sent per epoch, vanilla / RAF", unit=U.RATIO,
                 key="synthetic.bytes_ratio", meaning="> 1: RAF sends less",
                 target=Target(AT_LEAST, 10.0, "issue 5")),
        Headline(name="epoch time, vanilla / RAF (10 Gbit/s, 50 us link)", unit=U.RATIO,
                 key="synthetic.time_ratio", meaning="> 1: RAF's epochs are shorter",
                 target=Target(AT_LEAST, 2.0, "issue 5")),
        Headline(name="epoch time, vanilla / RAF (shared memory)", unit=U.RATIO,
                 key="synthetic.time_ratio_local", meaning="the same without the link emulated"),
        Headline(name="test accuracy gap, RAF vs vanilla", unit=U.POINTS,
                 derive=gap_points("synthetic.acc_raf", "synthetic.acc_vanilla"),
                 meaning="0 pt = the same accuracy", target=Target(AT_MOST, 0.5, "issue 5")),
        Headline(name="weighted miss cost, type-agnostic / hetero-aware cache", unit=U.RATIO,
                 key="cache.weighted_miss_cost_ratio", meaning="> 1: Heta's cache misses less",
                 target=Target(ABOVE, 1.0, "issue 5")),
    ),
    views=(
        MatrixView(title="Synthetic MAG graph: RAF vs vanilla", columns=("RAF", "vanilla"),
                   ratio="vanilla / RAF", rows=(
                       _pair("bytes sent per epoch", U.BYTES, "bytes"),
                       _pair("epoch time, emulated link (min)", U.SECONDS, "epoch_time"),
                       _pair("epoch time, emulated link (median)", U.SECONDS,
                             "epoch_time_median"),
                       _pair("epoch time, shared memory (min)", U.SECONDS, "epoch_time",
                             "_local"),
                       _pair("link seconds per holder per epoch", U.SECONDS, "link_s_per_epoch"),
                       _pair("test accuracy", U.SCORE, "acc"))),
        MatrixView(title="Caches at the same byte budget", columns=("hetero-aware (Heta)",
                                                                    "type-agnostic"), rows=(
            MatrixRow("weighted miss cost (offline)", U.SECONDS,
                      ("cache.hetero_weighted_miss_cost_s", "cache.agnostic_weighted_miss_cost_s")),
            MatrixRow("hit rate (offline)", U.SHARE,
                      ("cache.hetero_hit_rate", "cache.agnostic_hit_rate")),
            MatrixRow("vanilla epoch time with the cache", U.SECONDS,
                      ("cache.vanilla_hetero_cache.epoch_time",
                       "cache.vanilla_agnostic_cache.epoch_time")),
            MatrixRow("vanilla bytes per epoch with the cache", U.BYTES,
                      ("cache.vanilla_hetero_cache.bytes_per_epoch",
                       "cache.vanilla_agnostic_cache.bytes_per_epoch")),
            MatrixRow("live hit rate", U.SHARE, ("cache.vanilla_hetero_cache.hit_rate",
                                                 "cache.vanilla_agnostic_cache.hit_rate")))),
        MatrixView(title="Accuracy on real graphs: hetray R-GCN (RAF on holders) vs stock DGL",
                   columns=("hetray test", "DGL test", "hetray validation", "DGL validation"),
                   rows=tuple(MatrixRow(name, U.SCORE, tuple(f"{key}.{field}" for field in (
                       "test_acc", "dgl_test_acc", "val_acc", "dgl_val_acc")))
                       for name, key in (("ACM", "acm"), ("DBLP", "dblp")))),
        RecordView(title="Meta-partitions of the synthetic graph",
                   pattern="synthetic.meta_partition.partitions.*", keys=("partition",),
                   columns=(Column("num_nodes", "nodes", U.COUNT),
                            Column("num_edges", "edges", U.COUNT),
                            Column("num_bytes", "bytes held", U.BYTES),
                            Column("replica_bytes", "replicated bytes", U.BYTES))),
        FieldsView(title="Setup", fields=(
            Column("synthetic.num_edges", "edges", U.COUNT),
            Column("synthetic.partitions", "partition holders", U.COUNT),
            Column("synthetic.model", "model", U.TEXT),
            Column("synthetic.epochs", "epochs", U.COUNT),
            Column("synthetic.batch_size", "seed nodes per step", U.COUNT),
            Column("synthetic.hidden_dim", "hidden dimension", U.COUNT),
            Column("wall_s", "benchmark wall time", U.SECONDS))),
    ),
)

STAGES = ("sample", "feature", "memory_store", "train")

MSPIPE = Benchmark(
    title="MSPipe: staleness-bounded pipelined temporal GNN training",
    question="Does MSPipe's pipeline (sampler, feature and memory-store actors overlapped "
             "with bounded staleness) reach the speed-up its own stage times allow over the "
             "sequential trainer, without losing AP?",
    script="python benchmarks/mspipe.py",
    headlines=(
        Headline(name="share of MSPipe's ideal speed-up reached (TGN, CollegeMsg)",
                 unit=U.SHARE, key="tgn.fraction_of_ideal",
                 meaning="speed-up / (sequential time per batch / MSPipe's slowest stage)",
                 target=Target(AT_LEAST, 0.9, "issue 6")),
        Headline(name="events/s, MSPipe / sequential (TGN)", unit=U.RATIO, key="tgn.speedup",
                 meaning="> 1: MSPipe trains faster",
                 target=Target(AT_LEAST, 1.3, "issue 6", expected=True)),
        Headline(name="ideal speed-up from MSPipe's own stage times", unit=U.RATIO,
                 key="tgn.ideal_speedup", meaning="< 1.3x: 2 shared cores leave little to overlap"),
        Headline(name="test AP gap, MSPipe vs sequential (TGN)", unit=U.POINTS,
                 derive=gap_points("tgn.ap_mspipe", "tgn.ap_sequential"),
                 meaning="0 pt: staleness cost no AP", target=Target(AT_MOST, 0.5, "issue 6")),
        Headline(name="TGN test AP on CollegeMsg vs the published reference", unit=U.POINTS,
                 derive=gap_points("collegemsg.tgn_ap", "collegemsg.reference_ap"),
                 meaning="reference: DyGLib (NeurIPS 2023), AP 0.9234",
                 target=Target(AT_MOST, 3.0, "issue 6")),
    ),
    views=(
        RecordView(title="Every dataset and model (one pair of runs per cell)",
                   pattern="grid.*.*", keys=("dataset", "model"), columns=(
                       Column("events_per_s_sequential", "sequential (events/s)", U.COUNT),
                       Column("events_per_s_mspipe", "MSPipe (events/s)", U.COUNT),
                       Column("speedup", "speed-up", U.RATIO),
                       Column("ideal_speedup", "ideal", U.RATIO),
                       Column("fraction_of_ideal", "of ideal", U.SHARE),
                       Column("ap_sequential", "AP sequential", U.SCORE),
                       Column("ap_mspipe", "AP MSPipe", U.SCORE),
                       Column("mspipe_slowest_stage", "slowest stage", U.TEXT))),
        MatrixView(title="Headline TGN: time per training batch by stage",
                   columns=("sequential", "MSPipe"), rows=(
                       *(MatrixRow(stage.replace("_", " "), U.MILLISECONDS,
                                   (f"tgn.sequential_stage_ms_per_batch.{stage}",
                                    f"tgn.mspipe_stage_ms_per_batch.{stage}"))
                         for stage in STAGES),
                       MatrixRow("whole batch (wall)", U.MILLISECONDS,
                                 ("tgn.sequential_ms_per_batch", "tgn.mspipe_ms_per_batch")))),
        FieldsView(title="Setup and reference", fields=(
            Column("settings.headline", "headline cell", U.TEXT),
            Column("settings.headline_epochs", "headline epochs at most", U.COUNT),
            Column("settings.batch_size", "events per batch", U.COUNT),
            Column("settings.memory_dim", "memory dimension", U.COUNT),
            Column("settings.pipeline.max_staleness", "staleness bound at most", U.COUNT),
            Column("settings.memory_store_shards", "memory-store shards", U.COUNT),
            Column("settings.cpu_count", "CPU cores", U.COUNT),
            Column("collegemsg.tgn_ap", "TGN test AP, CollegeMsg", U.SCORE),
            Column("collegemsg.reference_ap", "published reference AP", U.SCORE),
            Column("collegemsg.reference_source", "reference", U.TEXT),
            Column("wall_s", "benchmark wall time", U.SECONDS))),
    ),
    counts=(Counts(path="tgn.staleness_histogram_mspipe", filename="benchmark_mspipe_staleness.png",
                   title="How stale were MSPipe's memory reads? (headline TGN run)",
                   labels=("staleness of a memory read (versions behind)", "memory reads")),),
)

PIPELINE_MEASUREMENTS = Benchmark(
    title="Pipeline step measurements (the planner's random-forest training data)",
    question="What did each measured pipeline step take, next to the analytical cost model's "
             "prediction? (`hetray plan --measurements` refits the forest from these.)",
    script="python benchmarks/pipeline.py",
    headlines=(),
    views=(RecordView(title="Measured steps", pattern="records.*", keys=("record",), columns=(
        Column("device_model", "device", U.TEXT),
        Column("num_stages", "stages", U.COUNT),
        Column("num_microbatches", "micro-batches", U.COUNT),
        Column("num_chunks", "chunks", U.COUNT),
        Column("bubble_fraction", "bubble", U.SHARE),
        Column("analytical_s", "analytical prediction", U.SECONDS),
        Column("measured_s", "measured", U.SECONDS))),),
)

#: Every described benchmark, by the stem of its file in ``benchmarks/results/``.
BENCHMARKS: dict[str, Benchmark] = {
    "planner": PLANNER, "pipeline": PIPELINE, "heta": HETA, "mspipe": MSPIPE,
    "pipeline_measurements": PIPELINE_MEASUREMENTS}
