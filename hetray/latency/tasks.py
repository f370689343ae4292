"""Tensor-program tasks: TVM's testing workloads at small shapes plus hetray's own operators.

A :class:`Task` is one operator at one shape; its ``family`` is what the cross-model split
holds out. Shapes are kept small enough (0.01-20 ms per kernel) that a few thousand programs
measure in about an hour on two shared cores. The ``gpt`` family holds the matmul / attention
/ softmax / norm operators of one hetray GPT block (:func:`gpt_layer_ops`), ``tgn`` the GRU and
attention matmuls of hetray's TGN memory updater.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Workload(enum.Enum):
    """A TVM ``te_workload`` builder."""

    MATMUL = "matmul"
    BATCH_MATMUL = "batch_matmul_nkkm"
    CONV1D = "conv1d_nlc"
    CONV2D = "conv2d_nhwc"
    CONV3D = "conv3d_ndhwc"
    DEPTHWISE = "depthwise_conv2d_nhwc"
    TRANSPOSED = "conv2d_transpose_nhwc"
    NORM = "norm_bmn"
    SOFTMAX = "softmax_mn"
    CONV_BN_RELU = "conv2d_nhwc_bn_relu"
    TRANSPOSE_BMM = "transpose_batch_matmul"


@dataclass(frozen=True, slots=True)
class Task:
    """One operator at one shape.

    Attributes:
        name: unique key (``<family>/<shape>``), the dataset's ``task`` column.
        family: workload family, the unit of the cross-model hold-out.
        workload: the TVM builder.
        args: the builder's positional arguments.
    """

    name: str
    family: str
    workload: Workload
    args: tuple[int, ...]


def _tasks(family: str, workload: Workload, shapes: list[tuple[int, ...]]) -> list[Task]:
    return [Task(f"{family}/{'x'.join(map(str, s))}", family, workload, s) for s in shapes]


@dataclass(frozen=True, slots=True)
class GPTShape:
    """One GPT block's sizes: ``tokens = batch * seq``."""

    batch: int = 2
    seq: int = 64
    hidden: int = 128
    heads: int = 4
    ffn: int = 512


def gpt_layer_ops(g: GPTShape) -> list[tuple[Task, int]]:
    """The forward+backward operators of one GPT block as ``(task, count)`` pairs.

    Backward of ``Y = X W`` is two matmuls, ``dX = dY W^T`` and ``dW = X^T dY``; attention's
    backward repeats its two batch matmuls twice each; softmax and layer norm are counted
    once forward and once backward (reconstruction: their backward has the same shape).
    """
    n, h, f, bh, d = g.batch * g.seq, g.hidden, g.ffn, g.batch * g.heads, g.hidden // g.heads
    mm = Workload.MATMUL
    ops = [  # (name, workload, args, count): matmul(n, m, k) is [n,k] x [k,m]
        ("qkv", mm, (n, 3 * h, h), 1), ("qkv_dx", mm, (n, h, 3 * h), 1),
        ("qkv_dw", mm, (h, 3 * h, n), 1), ("proj", mm, (n, h, h), 2), ("proj_dw", mm, (h, h, n), 1),
        ("fc1", mm, (n, f, h), 1), ("fc1_dx", mm, (n, h, f), 1), ("fc1_dw", mm, (h, f, n), 1),
        ("fc2", mm, (n, h, f), 1), ("fc2_dx", mm, (n, f, h), 1), ("fc2_dw", mm, (f, h, n), 1),
        ("scores", Workload.BATCH_MATMUL, (bh, g.seq, g.seq, d), 3),
        ("attn_v", Workload.BATCH_MATMUL, (bh, g.seq, d, g.seq), 3),
        ("softmax", Workload.SOFTMAX, (bh * g.seq, g.seq), 2),
        ("norm", Workload.NORM, (n, 1, h), 4),
    ]
    return [(Task(f"gpt/{name}", "gpt", w, args), c) for name, w, args, c in ops]


def all_tasks() -> list[Task]:
    """Every collection task (about 50), families in a fixed order."""
    w = Workload
    out = (_tasks("matmul", w.MATMUL, [(64, 64, 64), (128, 256, 64), (256, 128, 256),
                                        (512, 64, 128)])
           + _tasks("bmm", w.BATCH_MATMUL, [(4, 64, 64, 64), (8, 128, 32, 64), (2, 256, 256, 32)])
           + _tasks("tbmm", w.TRANSPOSE_BMM, [(1, 128, 4, 64), (1, 64, 8, 32)])
           + _tasks("conv1d", w.CONV1D, [(1, 256, 64, 64, 3, 2, 1), (1, 128, 32, 64, 5, 1, 2),
                                         (1, 64, 128, 128, 3, 1, 1)])
           + _tasks("conv2d", w.CONV2D, [(1, 28, 28, 32, 32, 3, 1, 1), (1, 14, 14, 64, 64, 3, 1, 1),
                                         (1, 56, 56, 16, 32, 1, 1, 0)])
           + _tasks("grouped", w.CONV2D, [(1, 28, 28, 64, 64, 3, 1, 1, 1, 4),
                                          (1, 14, 14, 128, 128, 3, 2, 1, 1, 4)])
           + _tasks("dilated", w.CONV2D, [(1, 28, 28, 32, 32, 3, 1, 2, 2),
                                          (1, 14, 14, 64, 64, 3, 1, 2, 2)])
           + _tasks("conv3d", w.CONV3D, [(1, 4, 14, 14, 16, 16, 3, 1, 1),
                                         (1, 8, 7, 7, 32, 32, 3, 1, 1)])
           + _tasks("depthwise", w.DEPTHWISE, [(1, 56, 56, 32, 3, 1, 1), (1, 28, 28, 64, 3, 2, 1),
                                               (1, 14, 14, 128, 3, 1, 1)])
           + _tasks("transposed", w.TRANSPOSED, [(1, 8, 8, 64, 32, 4, 2, 1),
                                                 (1, 16, 16, 32, 16, 4, 2, 1)])
           + _tasks("norm", w.NORM, [(1, 256, 256), (4, 128, 128), (16, 64, 64)])
           + _tasks("softmax", w.SOFTMAX, [(256, 256), (512, 128), (128, 1024)])
           + _tasks("cbr", w.CONV_BN_RELU, [(1, 28, 28, 32, 32, 3, 1, 1),
                                            (1, 14, 14, 64, 64, 1, 1, 0)])
           + _tasks("tgn", w.MATMUL, [(200, 300, 272), (200, 300, 100), (200, 100, 172)]))
    return out + [task for task, _ in gpt_layer_ops(GPTShape())]


def task_table() -> dict[str, Task]:
    """``name -> Task`` for every collection task."""
    return {t.name: t for t in all_tasks()}

