"""The headline for a person (issue 39 item 1): one verdict line of at most 160 characters,
the same in the terminal, report.md and report.html; each method once; and in a real browser
at 1280 × 720, the verdict and the intervals on the first screen, no interval broken."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from heldout.report import build_report, headline_markdown, write_report
from heldout.report.verdict_words import VERDICT_LINE_LIMIT, verdict_line
from tests.chromium import render
from tests.report.test_report import rollouts

# Measures the headline as laid out and writes the figures into the page, which --dump-dom
# returns: how many lines each text box takes, and where the verdict and the table end.
PROBE = """<script>
function lines(node) {
  const range = document.createRange(); range.selectNodeContents(node);
  return new Set([...range.getClientRects()].map(rect => Math.round(rect.top))).size;
}
const verdict = document.querySelector('#headline p.verdict');
const table = document.querySelector('#headline table');
const found = {
  verdict_lines: lines(verdict),
  verdict_overflows: verdict.scrollWidth > verdict.clientWidth,
  cell_lines: [...table.querySelectorAll('td')].map(lines),
  interval_lines: [...document.querySelectorAll('#headline .interval')].map(lines),
  bottom: Math.max(verdict.getBoundingClientRect().bottom, table.getBoundingClientRect().bottom),
};
document.body.insertAdjacentHTML('beforeend', '<pre id="probe">' + JSON.stringify(found)
                                 + '</pre>');
</script>"""


def report_of(base_name: str, candidate_name: str, groups: bool):
    rng = np.random.default_rng(39)
    tasks = [f"t{i:03d}" for i in range(164)]
    base = rollouts(base_name, {task: list(rng.random(24) < 0.4) for task in tasks})
    candidate = rollouts(candidate_name, {task: list(rng.random(24) < 0.6) for task in tasks})
    return build_report(base, candidate,
                        groups={task: f"repo{i // 2}" for i, task in enumerate(tasks)}
                        if groups else None)


def laid_out(report, folder: Path) -> dict:
    write_report(report, folder)
    page = folder / "probe.html"
    page.write_text((folder / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    dom = render(page.as_uri(), window=(1280, 720), screenshot=folder / "first-screen.png").dom
    return json.loads(re.search(r'<pre id="probe">(\{.*?)</pre>', dom).group(1))


@pytest.mark.parametrize(("names", "groups", "one_line"), [
    (("base", "step_80"), False, True),
    # The longest line the limit allows: long names, groups, 24 episodes.
    (("base-checkpoint-2026-11-30", "candidate-step-8000-rl-final"), True, False),
], ids=["short-names", "long-names"])
def test_the_verdict_and_the_intervals_fit_the_first_screen(tmp_path, names, groups, one_line):
    report = report_of(*names, groups)
    line = verdict_line(report.names, report.headline.pass_at_1, report.headline.decision)
    assert len(line) <= VERDICT_LINE_LIMIT
    assert line.startswith(f"Better: {names[1]} 61.0% vs {names[0]} 40.2%, +20.8 points [")
    assert line.endswith("164 tasks" + (" in 82 groups" if groups else "") + " × 24 episodes")
    # The terminal's first line, report.md's and report.html's are that line.
    assert headline_markdown(report).splitlines()[0] == line
    write_report(report, tmp_path / "report")
    assert f"**{line}**" in (tmp_path / "report" / "report.md").read_text()
    found = laid_out(report, tmp_path / "report")
    if one_line:
        assert found["verdict_lines"] == 1
    assert not found["verdict_overflows"]
    assert found["interval_lines"] and set(found["interval_lines"]) == {1}
    assert set(found["cell_lines"]) == {1}, "a cell of the headline table wraps"
    assert found["bottom"] <= 720, "the verdict or the table is below the first screen"


def test_each_method_is_stated_once_in_the_headline():
    report = report_of("base", "step_80", groups=True)
    text = headline_markdown(report)
    deciding = report.headline.decision.test.method
    assert text.count(deciding) == 1
    # The interval is the deciding bootstrap-t's, widened to the betting test's: named, not
    # described again; the p once with its resolution, once short in the verdict line.
    assert "interval: the bootstrap-t's, widened to the betting test's" in text
    assert text.count("20,000") == 1 and text.count("betting over 82 groups") == 1
    assert text.count("p < 0.0002 (Monte Carlo, 9,999 draws)") == 1
