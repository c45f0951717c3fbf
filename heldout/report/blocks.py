"""The pieces a report document is made of: what document.py says, in the shapes the
Markdown and HTML renderers lay out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paragraph:
    text: str
    tone: str = "plain"  # plain | verdict | warning | note


@dataclass(frozen=True)
class Subheading:
    text: str


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Figure:
    name: str  # figures/<name>.png
    caption: str


Block = Paragraph | Subheading | Table | Figure


@dataclass(frozen=True)
class Section:
    anchor: str
    title: str
    blocks: list[Block]


@dataclass(frozen=True)
class Document:
    title: str
    sections: list[Section]
