"""Lay out a report Document as Markdown (figures as files beside it) or as one HTML file that
carries its figures inline and needs no network to read."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping

from heldout.report.blocks import Block, Document, Figure, Paragraph, Subheading, Table

FIGURE_DIR = "figures"


def figure_path(name: str) -> str:
    return f"{FIGURE_DIR}/{name}.png"


# --------------------------------------------------------------------------------------------
# Markdown


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_block(block: Block) -> list[str]:
    match block:
        case Paragraph(text, "verdict"):
            return [f"**{text}**"]
        case Paragraph(text, "warning"):
            return [f"> **Warning:** {text}"]
        case Paragraph(text, "note"):
            return [f"> {text}"]
        case Paragraph(text):
            return [text]
        case Subheading(text):
            return [f"### {text}"]
        case Table(header, rows):
            return [
                "| " + " | ".join(map(_markdown_cell, header)) + " |",
                "|" + "---|" * len(header),
                *("| " + " | ".join(map(_markdown_cell, row)) + " |" for row in rows),
            ]
        case Figure(name, caption):
            return [f"![{caption}]({figure_path(name)})"]
    raise TypeError(f"no Markdown for {block!r}")


def render_markdown(document: Document) -> str:
    lines = [f"# {document.title}", ""]
    for section in document.sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            lines += [*markdown_block(block), ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# HTML

STYLE = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1f24;
       margin: 0; background: #f6f7f9; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 32px 64px; background: #fff; }
h1 { font-size: 1.7em; margin: 0.2em 0 0.4em; }
h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: 0.8em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f0f2f5; }
td { overflow-wrap: anywhere; }
#headline td { white-space: nowrap; }
p.verdict { font-size: 14px; font-weight: 600; padding: 8px 12px; background: #eef5ff;
            border-left: 4px solid #2f6fdd; }
p.warning { padding: 8px 12px; background: #fff4e5; border-left: 4px solid #d97706; }
p.note { padding: 6px 12px; background: #f3f4f6; border-left: 4px solid #9ca3af; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #e5e7eb; }
.interval { white-space: nowrap; }
figcaption { color: #57606a; font-size: 0.9em; }
"""


# An interval, "[+14.3, +40.1]" or "[16.8%, 35.5%]": never broken across lines.
INTERVAL = re.compile(r"\[[^\[\],]{1,40}, [^\[\],]{1,40}\]")


def _text(text: str) -> str:
    """Escaped text whose intervals do not wrap."""
    return INTERVAL.sub(lambda found: f'<span class="interval">{found.group()}</span>',
                        html.escape(text))


def _html_block(block: Block, figures: Mapping[str, bytes]) -> str:
    escape = html.escape
    match block:
        case Paragraph(text, "plain"):
            return f"<p>{_text(text)}</p>"
        case Paragraph(text, tone):
            return f'<p class="{tone}">{_text(text)}</p>'
        case Subheading(text):
            return f"<h3>{escape(text)}</h3>"
        case Table(header, rows):
            head = "".join(f"<th>{escape(cell)}</th>" for cell in header)
            body = "".join(
                "<tr>" + "".join(f"<td>{_text(cell)}</td>" for cell in row) + "</tr>"
                for row in rows
            )
            return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        case Figure(name, caption):
            data = base64.b64encode(figures[name]).decode("ascii")
            return (
                f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{escape(caption)}</figcaption></figure>"
            )
    raise TypeError(f"no HTML for {block!r}")


def render_html(document: Document, figures: Mapping[str, bytes]) -> str:
    """One self-contained page: style and figures inline, no script, nothing fetched."""
    escape = html.escape
    nav = " ".join(
        f'<a href="#{section.anchor}">{escape(section.title)}</a>'
        for section in document.sections
    )
    sections = "\n".join(
        f'<section id="{section.anchor}"><h2>{escape(section.title)}</h2>\n'
        + "\n".join(_html_block(block, figures) for block in section.blocks)
        + "\n</section>"
        for section in document.sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>heldout: {escape(document.title)}</title><style>{STYLE}</style></head>\n"
        f"<body><main><h1>{escape(document.title)}</h1><nav>{nav}</nav>\n{sections}\n"
        "</main></body></html>\n"
    )
