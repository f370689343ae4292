"""The pipeline benchmark as a figure: throughput against activation memory, and the load check.

Reads ``benchmarks/results/pipeline.json`` (``benchmarks/pipeline.py``; run that first) and
writes ``docs/plots/pipeline_memory_and_load.png``. Run: ``python benchmarks/pipeline_plot.py
[--results FILE] [--out PNG]`` (no Ray, a few seconds).

Left: each schedule's tokens/s (slow link on, quiet host) against the most activation bytes a
rank holds, at ``m`` micro-batches per pass and, where the cap forces it, at the ``m'`` that
fits (hollow); the dashed line is the cap (Virtual-1F1B's peak). Right: Virtual-1F1B over
1F1B per measured round, quiet and beside the CPU-bound neighbour, with the band the loaded
median must stay in (within 15 % of the quiet median).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from hetray.experiments.plot_style import MARKERS, PALETTE, style
from hetray.models.gpt_config import GPTConfig
from hetray.pipeline.activation_memory import even_split_chunk_bytes, peak_activation_bytes
from hetray.pipeline.schedules import Schedule

ROOT = Path(__file__).resolve().parent
MIB = 2**20


def capped_peak_bytes(result: dict[str, Any], schedule: Schedule, microbatches: int) -> int:
    """Most activation bytes a rank holds when ``schedule`` (``v = 1``) runs ``microbatches``."""
    config = result["config"]
    chunks = even_split_chunk_bytes(GPTConfig(**config["model"]), 2, config["microbatch_size"])
    return max(peak_activation_bytes(schedule, 2, microbatches, 1, 0, chunks))


def memory_panel(ax: plt.Axes, result: dict[str, Any]) -> None:
    """Tokens/s against peak activation MiB per rank, full batch and under the cap."""
    config, capped = result["config"], result["memory_capped"]
    tokens = config["num_microbatches"] * config["microbatch_size"] * config["model"]["seq_len"]
    m = config["num_microbatches"]
    for i, (name, cell) in enumerate(result["schedules"].items()):
        colour, marker = PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]
        ax.scatter(cell["peak_activation_bytes"] / MIB, tokens / cell["step_s_link_on"],
                   color=colour, marker=marker, s=45, label=f"{name}, m = {m}")
        fit = capped[name]["microbatches_per_pass"]
        if 0 < fit < m:
            peak = capped_peak_bytes(result, Schedule(name), fit)
            ax.scatter(peak / MIB, capped[name]["tokens_per_s"], facecolors="none",
                       edgecolors=colour, marker=marker, s=45,
                       label=f"{name}, {m // fit} passes of {fit}")
    ax.axvline(capped["cap_bytes"] / MIB, color="black", ls="--", lw=1,
               label="cap: Virtual-1F1B's peak")
    ax.set(xlabel="peak activation memory per rank (MiB)", ylabel="throughput (tokens/s)",
           title="Throughput against activation memory\n(slow link on, quiet host)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=7)


def per_round(slow: list[float], fast: list[float]) -> list[float]:
    """``slow[k] / fast[k]`` for every round ``k``."""
    return [s / f for s, f in zip(slow, fast, strict=True)]


def load_panel(ax: plt.Axes, result: dict[str, Any]) -> None:
    """Virtual-1F1B over 1F1B per round, quiet and beside the neighbour, with the 15 % band."""
    schedules, loaded = result["schedules"], result["headline_under_load"]
    quiet = per_round(schedules["1f1b"]["steps_link_on"],
                      schedules["virtual-1f1b"]["steps_link_on"])
    beside = per_round(loaded["steps_loaded"]["1f1b"], loaded["steps_loaded"]["virtual-1f1b"])
    centre = loaded["speedup_v1f1b_over_1f1b_quiet"]
    band = loaded["tolerance"]
    ax.axhspan(centre * (1 - band), centre * (1 + band), color="grey", alpha=0.2,
               label=f"quiet median +-{100 * band:.0f} %")
    for x, values in enumerate((quiet, beside)):
        middle = statistics.median(values)
        ax.scatter([x] * len(values), values, color=PALETTE[x], alpha=0.6, s=18)
        ax.hlines(middle, x - 0.25, x + 0.25, color=PALETTE[x], lw=2.5)
        ax.annotate(f"median {middle:.2f}x", (x + 0.28, middle), fontsize=8, va="center")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks([0, 1], ["quiet", "beside a CPU-bound\nprocess"])
    ax.set_xlim(-0.6, 1.9)
    ax.set(ylabel="Virtual-1F1B speed-up over 1F1B (per round)",
           title=f"Headline under load: {loaded['loaded_over_quiet']:.3f} of quiet\n"
                 f"({len(quiet)} rounds, same rounds for both)")
    ax.legend(loc="lower left", fontsize=7)


def main() -> None:
    """Draw both panels from the results JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results" / "pipeline.json")
    parser.add_argument("--out", type=Path,
                        default=ROOT.parent / "docs" / "plots" / "pipeline_memory_and_load.png")
    args = parser.parse_args()
    result = json.loads(args.results.read_text(encoding="utf-8"))
    with style():
        fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.4))
        memory_panel(left, result)
        load_panel(right, result)
        fig.tight_layout()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.out)
        plt.close(fig)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
