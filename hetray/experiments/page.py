"""A report page as a list of blocks, written out as Markdown and as standalone HTML.

The report builds the page once (:class:`Heading`, :class:`Text`, :class:`Image`,
:class:`Table`, :class:`Verdicts`) and :func:`to_markdown` / :func:`to_html` write the same
content twice. Text may hold ```code``` spans; everything else is escaped in HTML.

Example:
    >>> blocks = [Heading(1, "r"), Table(("a", "b"), (("1", "x|y"),))]
    >>> print(to_markdown(blocks))
    # r
    <BLANKLINE>
    | a | b |
    |---|---|
    | 1 | x/y |
    <BLANKLINE>
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)

CODE = re.compile(r"`([^`]+)`")
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 68rem; margin: 2rem auto;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .6rem 0 1.2rem; font-size: .9rem; }
th, td { border: 1px solid #ccc; padding: .25rem .55rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; } caption { text-align: left; font-weight: 600; padding: .3rem 0; }
code { background: #f3f3f3; padding: 0 .2rem; border-radius: 3px; }
img { max-width: 100%; border: 1px solid #eee; margin: .4rem 0 1rem; }
ul.verdicts { list-style: none; padding-left: 0; }
.holds { color: #00734f; font-weight: 600; } .misses { color: #b24400; font-weight: 600; }
.info { color: #666; font-weight: 600; }
.smoke { background: #D55E00; color: white; padding: .1rem .4rem; font-weight: 600; }
"""


@dataclass(frozen=True, slots=True)
class Heading:
    """A section title (level 1-3)."""

    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Text:
    """A paragraph; ``smoke`` draws it as the smoke-run warning."""

    text: str
    smoke: bool = False


@dataclass(frozen=True, slots=True)
class Image:
    """A PNG next to the page (``name`` is relative to the page)."""

    name: str
    alt: str


@dataclass(frozen=True, slots=True)
class Table:
    """A table of pre-formatted cells; the first column is left-aligned in HTML."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One interpreted result: ``holds`` True (target met), False (missed), None (no target)."""

    text: str
    holds: bool | None


@dataclass(frozen=True, slots=True)
class Verdicts:
    """A list of :class:`Verdict` lines."""

    items: tuple[Verdict, ...]


Block = Heading | Text | Image | Table | Verdicts
MARKS = {True: "holds", False: "misses", None: "info"}


def _md_cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _md(block: Block) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {block.text}"
    if isinstance(block, Text):
        return f"**{block.text}**" if block.smoke else block.text
    if isinstance(block, Image):
        return f"![{block.alt}]({block.name})"
    if isinstance(block, Verdicts):
        return "\n".join(f"- **{MARKS[v.holds]}**: {v.text}" for v in block.items)
    lines = [f"*{block.caption}*", ""] if block.caption else []
    lines += ["| " + " | ".join(map(_md_cell, block.columns)) + " |",
              "|" + "---|" * len(block.columns)]
    lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in block.rows]
    return "\n".join(lines)


def to_markdown(blocks: Sequence[Block]) -> str:
    """GitHub-flavoured Markdown of ``blocks`` (one blank line between blocks)."""
    return "".join(_md(b) + "\n\n" for b in blocks).rstrip("\n") + "\n"


def _inline(text: str) -> str:
    """Escaped text with ```code``` spans as ``<code>``."""
    parts = CODE.split(text)
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p)
                   for i, p in enumerate(parts))


def _html_table(block: Table) -> str:
    head = "".join(f"<th>{_inline(c)}</th>" for c in block.columns)
    body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>"
                   for row in block.rows)
    caption = f"<caption>{_inline(block.caption)}</caption>" if block.caption else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html(block: Block) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{_inline(block.text)}</h{block.level}>"
    if isinstance(block, Text):
        return (f'<p><span class="smoke">{_inline(block.text)}</span></p>' if block.smoke
                else f"<p>{_inline(block.text)}</p>")
    if isinstance(block, Image):
        return (f'<img src="{html.escape(block.name, quote=True)}" '
                f'alt="{html.escape(block.alt, quote=True)}">')
    if isinstance(block, Verdicts):
        items = "".join(f'<li><span class="{MARKS[v.holds]}">{MARKS[v.holds]}</span>: '
                        f"{_inline(v.text)}</li>" for v in block.items)
        return f'<ul class="verdicts">{items}</ul>'
    return _html_table(block)


def to_html(blocks: Sequence[Block], title: str) -> str:
    """A standalone HTML page of ``blocks`` (inline CSS, images by relative path)."""
    body = "\n".join(_html(b) for b in blocks)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")
