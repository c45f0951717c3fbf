"""The report of a sweep: an experiment of `dvc exp run` does not open the test split, so its
report is the val selection it made and says why there is no verdict, in place of the last
access's report (which describes another selection)."""

from __future__ import annotations

from typing import Any

from heldout.report.blocks import Document, Paragraph, Section
from heldout.report.document import selection_table
from heldout.report.render import render_html, render_markdown


def sweep_document(experiment: str, selection: dict[str, Any]) -> Document:
    metric = selection.get("metric", "score")
    curse = selection.get("winners_curse")
    return Document(f"Experiment {experiment}: the val selection, no test verdict", [Section(
        "sweep", "No test verdict in a sweep",
        [Paragraph(f"This experiment of `dvc exp run` ({experiment}) ran the pipeline to "
                   "`select`; the test split stayed closed, so nothing here compares the "
                   "candidate with the base on the test split.", "verdict"),
         Paragraph(f"Chosen on val: {selection['chosen']} by rule {selection['rule']}. "
                   f"{selection.get('note', '')}".strip()),
         selection_table(selection["table"], selection["chosen"], metric,
                         selection.get("pick_stability", {}).get("shares")),
         # A selection.json from before issue 41 has no winner's curse to state.
         *([Paragraph(curse["note"])] if curse else []),
         Paragraph(f"To run the test in an experiment, name it: dvc exp run -n {experiment} "
                   f"-S test.experiment={experiment}", "note")])])


def sweep_report_files(experiment: str, selection: dict[str, Any]) -> dict[str, bytes]:
    """report.md and report.html, by name."""
    document = sweep_document(experiment, selection)
    return {"report.md": render_markdown(document).encode(),
            "report.html": render_html(document, {}).encode()}
