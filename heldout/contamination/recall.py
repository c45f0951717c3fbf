"""The recall probe: does a model complete an evaluation task verbatim from its first part?

Decontamination (the rest of this room) finds a task's text in training data one can read; a
checkpoint trained on data nobody can read is asked instead. Each text of a task (its prompt,
and its prompt followed by its reference solution, which continues it) is cut at a whitespace
boundary near a share of its characters (`cut`); the model is sent the first part at
temperature 0, and the task counts as recalled for that text when its continuation reproduces
the held-back part verbatim, whitespace runs aside (`reproduces`). A softer measure beside it:
the share of the held-back text the continuation matches from its start (`common_prefix_share`).

Pure functions and records: the requests are the caller's (cli/recall.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from heldout.tasks.record import Task

SCHEMA = "heldout.recall/1"
TEXTS = ("prompt", "reference")
TextKind = Literal["prompt", "reference"]
MIN_WORDS = 8  # fewer words than this, and a verbatim continuation proves nothing: not probed
CONTINUATION_KEPT = 500  # characters of the model's continuation kept in a row
INSTRUCTION = ("Continue this text exactly, from the point where it stops. Reply with the "
               "continuation only: no repetition of the text, no commentary, no code fence.")


@dataclass(frozen=True)
class Cut:
    """A text split in two: what the model is shown, and what it must reproduce."""

    prefix: str
    held_back: str


def task_texts(task: Task) -> dict[str, str]:
    """The texts probed for a task: its prompt, and (when it has one) the prompt followed by
    its reference solution; a reference that does not continue the prompt (another kind's
    patch or program) is probed alone."""
    texts = {"prompt": task.prompt}
    if task.reference and task.reference.strip():
        continues = task.kind == "python-function"
        texts["reference"] = task.prompt + task.reference if continues else task.reference
    return texts


def cut(text: str, share: float) -> Cut | None:
    """`text` cut at the end of a word: the last word end at or before `share` of its
    characters, else the first after. None for a text of fewer than MIN_WORDS words (too short
    for a verbatim continuation to mean anything). The prefix ends with a word, the held-back
    part starts with the whitespace after it."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"the prefix share must be strictly between 0 and 1, got {share}")
    if len(text.split()) < MIN_WORDS:
        return None
    ends = [i for i in range(1, len(text))
            if text[i].isspace() and not text[i - 1].isspace()]
    # The held-back part must hold a word: the last word end before only trailing whitespace
    # is no cut.
    ends = [i for i in ends if text[i:].strip()]
    target = round(len(text) * share)
    before = [i for i in ends if i <= target]
    at = before[-1] if before else min(i for i in ends if i > target)
    return Cut(text[:at], text[at:])


def normalize_whitespace(text: str) -> str:
    """Every whitespace run one space; none at either end."""
    return " ".join(text.split())


def reproduces(continuation: str, held_back: str) -> bool:
    """Whether the continuation starts with the held-back text, whitespace runs aside (what it
    writes after is not held against it)."""
    return normalize_whitespace(continuation).startswith(normalize_whitespace(held_back))


def common_prefix_share(continuation: str, held_back: str) -> float:
    """The share of the held-back text (whitespace-normalized characters) the continuation
    matches from its start: 1.0 when it reproduces all of it."""
    said, kept = normalize_whitespace(continuation), normalize_whitespace(held_back)
    if not kept:
        return 0.0
    same = 0
    for a, b in zip(said, kept, strict=False):
        if a != b:
            break
        same += 1
    return same / len(kept)


def chat_continuation(reply: str, prefix: str) -> str:
    """A chat model's reply as a continuation: a code fence around it taken off, and a
    repetition of the text it was shown taken off its start."""
    text = reply.strip("\n")
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rstrip()
        text = text[:-4] if text.endswith("\n```") else text.removesuffix("```")
    said, shown = normalize_whitespace(text), normalize_whitespace(prefix)
    if shown and (said == shown or said.startswith(shown + " ")):
        # Drop the repetition: the words of the prefix, counted in the normalized text.
        words = len(shown.split())
        parts = text.split(maxsplit=words)
        return " " + parts[words] if len(parts) > words else ""
    return text


def max_tokens_for(held_back: str) -> int:
    """Enough tokens for the held-back text whatever the tokenizer: a byte-level BPE token is
    at least one byte of UTF-8, plus a margin for what a model writes first."""
    return len(held_back.encode("utf-8")) + 16


@dataclass(frozen=True)
class RecallRow:
    """One text of one task, probed."""

    task_id: str
    text: TextKind
    prefix_chars: int
    held_back_chars: int
    max_tokens: int
    recalled: bool = False
    prefix_share: float = 0.0  # common_prefix_share
    continuation: str = ""  # the first CONTINUATION_KEPT characters
    error: str | None = None  # the request failed: the row is not counted

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def judged(task_id: str, text: TextKind, piece: Cut, max_tokens: int,
           continuation: str) -> RecallRow:
    """The row for a continuation the model gave."""
    return RecallRow(task_id, text, len(piece.prefix), len(piece.held_back), max_tokens,
                     recalled=reproduces(continuation, piece.held_back),
                     prefix_share=round(common_prefix_share(continuation, piece.held_back), 6),
                     continuation=continuation[:CONTINUATION_KEPT])


@dataclass(frozen=True)
class TextSummary:
    """One text kind over the split: how many tasks were probed and recalled, the share with
    its Clopper-Pearson (exact) 95% interval, and the ids recalled."""

    probed: int
    recalled: int
    failed: int
    share: float | None
    interval: tuple[float, float] | None
    mean_prefix_share: float | None
    recalled_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["interval"] = None if self.interval is None else list(self.interval)
        return record


def summarize(rows: list[RecallRow], confidence: float = 0.95) -> dict[str, TextSummary]:
    """A TextSummary per text kind; a failed request is counted apart, not as a task probed."""
    from scipy.stats import binomtest

    summaries = {}
    for kind in TEXTS:
        mine = [row for row in rows if row.text == kind]
        done = [row for row in mine if row.error is None]
        hits = sorted(row.task_id for row in done if row.recalled)
        share = interval = mean = None
        if done:
            share = len(hits) / len(done)
            bounds = binomtest(len(hits), len(done)).proportion_ci(confidence, method="exact")
            interval = (float(bounds.low), float(bounds.high))
            mean = sum(row.prefix_share for row in done) / len(done)
        summaries[kind] = TextSummary(len(done), len(hits), len(mine) - len(done), share,
                                      interval, mean, hits)
    return summaries
