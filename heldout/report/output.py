"""A report's outputs: its files (report.md, report.html, report.json, figures/*.png, all or
none) and its headline as text for a terminal."""

from __future__ import annotations

from pathlib import Path

from heldout.files import StagedOutputs, json_bytes, staged_outputs
from heldout.report.core import Report
from heldout.report.document import report_document
from heldout.report.figures import draw_figures
from heldout.report.render import figure_path, markdown_block, render_html, render_markdown


def stage_report(report: Report, out_dir: Path, outputs: StagedOutputs) -> list[Path]:
    """Stage the report's files into `outputs`, so a pipeline stage can commit them together
    with its other outputs (metrics/test.json: `report.metrics`). Returns their paths."""
    out_dir = Path(out_dir)
    figures = draw_figures(report)
    document = report_document(report, figures)
    files = {
        out_dir / "report.md": render_markdown(document).encode(),
        out_dir / "report.html": render_html(document, figures).encode(),
        out_dir / "report.json": json_bytes(report.to_json()),
        **{out_dir / figure_path(name): png for name, png in figures.items()},
    }
    for path, data in files.items():
        outputs.write_bytes(path, data)
    return list(files)


def write_report(report: Report, out_dir: Path) -> list[Path]:
    """Write the report's files into `out_dir` atomically; returns their paths."""
    with staged_outputs() as outputs:
        return stage_report(report, out_dir, outputs)


def headline_markdown(report: Report) -> str:
    """The headline section alone, as Markdown, for a terminal (what `heldout compare` and the
    report stage print): the verdict line first, as it is, then the rest of the section."""
    headline = report_document(report, figures=()).sections[0]
    verdict, *rest = headline.blocks
    return "\n\n".join([verdict.text, *("\n".join(markdown_block(block)) for block in rest)])
