"""Decontamination: which training items overlap which evaluation items, and by what evidence.

The evaluation side is only ever its fingerprints (heldout.fingerprints), so the test split is
never opened. They are small, so they are what gets indexed; training items stream past the
index one at a time, and memory does not grow with the training data (10^6 items and more).

Methods, each reported separately:
- exact / normalized: a training text equal to an eval field, raw or after normalize_text;
- ngram: the share of an eval field's word n-grams found in one training item (containment,
  so a partial copy inside a longer document counts); n-grams shared by several eval items
  are template text and are not evidence about any one of them;
- minhash: near-duplicates by MinHash LSH (datasketch) at a Jaccard threshold;
- code: the rename-invariant code fingerprint: an eval function that a training item holds
  whole, or the share of the eval functions' bodies whose top-level statements it holds;
- group: the same group key in training and in an eval split (impossible after a group split
  for the train split; a training corpus may name groups too: repositories, templates).
"""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import islice
from multiprocessing.pool import AsyncResult
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
from datasketch import MinHash, MinHashLSH
from pydantic import BaseModel, ConfigDict, Field

from heldout.canonical import sha256_hex
from heldout.errors import HeldoutError, InputFileError, Problem, StageError
from heldout.fingerprints import (
    CODE_NORMALIZATION,
    MINHASH,
    NGRAM_HASH,
    NORMALIZATION,
    PROGRAM,
    CodeFingerprint,
    LiteralMode,
    code_fingerprint,
    minhash,
    minhash_from_signature,
    normalize_text,
    shingle_count,
    window_hashes,
    word_hashes,
)
from heldout.tasks.record import Task

METHODS = ("exact", "normalized", "ngram", "minhash", "code", "group")
TRAIN_SPLIT_SOURCE = "train-split"
JOINED_VIEW = "all"  # a training item's fields joined, when it has several
SNIPPET_CHARS = 120
Policy = Literal["flag", "drop", "fail"]


class TrainingCorpus(BaseModel):
    """One JSONL file the team trains on: which fields hold the text, which the id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1)
    fields: list[str] = Field(min_length=1)
    id_field: str = "id"
    group_field: str | None = None


class DecontaminateConfig(BaseModel):
    """`params.decontaminate`. The n-gram length is `split.ngram`, read from the fingerprints."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Policy = "flag"
    ngram_threshold: float = Field(default=0.5, gt=0, le=1)
    boilerplate_items: int = Field(default=3, ge=2, description="n-grams and code shared by "
                                   "this many eval items are template, not evidence")
    jaccard_threshold: float = Field(default=0.4, gt=0, le=1)
    minhash_min_shingles: int = Field(default=10, ge=1)
    code_threshold: float = Field(default=0.8, gt=0, le=1)
    code_min_nodes: int = Field(default=12, ge=1)
    code_literals: LiteralMode = "keep"
    training_corpora: list[TrainingCorpus] = []
    workers: int = Field(default=1, ge=1, description="processes scanning training items; "
                         "the report does not depend on it")


class ContaminationError(HeldoutError):
    """Policy `fail` and a training corpus holds copies of evaluation items."""


@dataclass(frozen=True)
class TrainingItem:
    source: str
    id: str
    fields: dict[str, str]
    group: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class Match:
    """One training item overlapping one eval item by one method, with the best evidence."""

    method: str
    source: str
    training_id: str
    eval_split: str
    eval_id: str
    eval_field: str
    training_view: str
    score: float
    training_snippet: str
    training_line: int | None = None


@dataclass
class SourceScan:
    """What scanning one training source found."""

    source: str
    items: int = 0
    code_unparsable: int = 0
    matches: list[Match] = field(default_factory=list)

    @property
    def matched_ids(self) -> set[str]:
        return {m.training_id for m in self.matches}


# LSH bands chosen to miss few pairs above the threshold: a missed candidate is a missed leak,
# a false candidate costs one signature comparison. At 0.4: 31 bands of 3 rows, a pair at
# Jaccard 0.5 is proposed 98% of the time (datasketch's even weights: 87%).
_LSH_WEIGHTS = (0.2, 0.8)
EvalKey = tuple[str, str]  # (split, id)
Slot = tuple[EvalKey, str]  # (eval item, field)


class _Evidence(NamedTuple):
    method: str
    slot: Slot
    view: str
    score: float
    snippet: str


class EvalIndex:
    """The fingerprints of the eval splits, indexed for one pass over training data."""

    def __init__(self, fingerprints: Iterable[dict[str, Any]], config: DecontaminateConfig):
        self.config = config
        files = list(fingerprints)
        self.n = _agreed_settings(files)
        self.exact: dict[str, list[Slot]] = defaultdict(list)
        self.normalized: dict[str, list[Slot]] = defaultdict(list)
        self.groups: dict[str, list[EvalKey]] = defaultdict(list)
        # n-gram hash -> indices into ngram_slots; a slot's size is its evidence n-grams.
        self.ngrams: dict[int, list[int]] = defaultdict(list)
        self.ngram_slots: list[Slot] = []
        self.ngram_sizes: list[int] = []
        # LSH keys are indices into minhash_slots.
        self.lsh = MinHashLSH(threshold=config.jaccard_threshold, num_perm=MINHASH["num_perm"],
                              weights=_LSH_WEIGHTS)
        self.minhash_slots: list[Slot] = []
        self.signatures: list[MinHash] = []
        # Code hash -> eval items holding that function whole; statement hash -> (eval item,
        # nodes) for the top-level statements of its functions, whose total is body_nodes.
        self.functions: dict[int, list[EvalKey]] = defaultdict(list)
        self.statements: dict[int, list[tuple[EvalKey, int]]] = defaultdict(list)
        self.body_nodes: Counter[EvalKey] = Counter()
        items = [((f["split"], item["id"]), item) for f in files for item in f["items"]]
        codes = {key: self._code_of(item) for key, item in items}
        template_ngrams = _shared_by(
            ({g for fp in item["fields"].values() for g in fp["ngrams"]} for _, item in items),
            config.boilerplate_items)
        template_code = _shared_by(
            ({*c.functions, *(h for h, _ in c.statements if h)} for c in codes.values() if c),
            config.boilerplate_items)
        for key, item in items:
            self._add_text(key, item, template_ngrams)
            if codes[key] is not None:
                self._add_code(key, codes[key], template_code)
        self.ngram_keys = np.array(sorted(self.ngrams), dtype=np.uint64)

    def _code_of(self, item: dict[str, Any]) -> CodeFingerprint | None:
        """The item's code evidence: functions and top-level statements big enough that
        sharing one means something (`return x` is everywhere); small statements keep only
        their size, which counts in the body's total."""
        code = item[PROGRAM]["code"]
        if code is None:
            return None
        fingerprint = CodeFingerprint.from_json(code[self.config.code_literals])
        least = self.config.code_min_nodes
        return CodeFingerprint(
            functions={h: n for h, n in fingerprint.functions.items() if n >= least},
            subtrees={},
            statements=[(h if n >= least else None, n) for h, n in fingerprint.statements],
        )

    def _add_text(self, key: EvalKey, item: dict[str, Any], template: set[int]) -> None:
        self.groups[item["group"]].append(key)
        texts = {**item["fields"], PROGRAM: item[PROGRAM]}
        for name, fingerprint in texts.items():
            self.exact[fingerprint["sha256"]].append((key, name))
            self.normalized[fingerprint["normalized_sha256"]].append((key, name))
            evidence = set(fingerprint.get("ngrams", ())) - template
            if evidence:
                for gram in evidence:
                    self.ngrams[gram].append(len(self.ngram_slots))
                self.ngram_slots.append((key, name))
                self.ngram_sizes.append(len(evidence))
            sketch = fingerprint.get("minhash")
            if sketch and sketch["shingles"] >= self.config.minhash_min_shingles:
                signature = minhash_from_signature(sketch["signature"])
                self.lsh.insert(len(self.minhash_slots), signature)
                self.minhash_slots.append((key, name))
                self.signatures.append(signature)

    def _add_code(self, key: EvalKey, code: CodeFingerprint, template: set[int]) -> None:
        for digest in code.functions.keys() - template:
            self.functions[digest].append(key)
        for digest, nodes in code.statements:
            self.body_nodes[key] += nodes
            if digest is not None and digest not in template:
                self.statements[digest].append((key, nodes))

    def scan(self, item: TrainingItem) -> tuple[list[Match], bool]:
        """Every eval item this training item overlaps (the best evidence per method and eval
        item), and whether it holds code that does not parse (only its text was compared)."""
        views = {name: text for name, text in item.fields.items() if text.strip()}
        if not views:
            return [], False
        words = {name: normalize_text(text).split() for name, text in views.items()}
        hashes = {name: word_hashes(words[name]) for name in views}
        if len(views) > 1:
            # Normalization folds the joining newline, so the joined words are the fields'.
            words[JOINED_VIEW] = [word for name in views for word in words[name]]
            hashes[JOINED_VIEW] = np.concatenate([hashes[name] for name in views])
            views[JOINED_VIEW] = "\n".join(views.values())
        whole = JOINED_VIEW if JOINED_VIEW in views else next(iter(views))
        found: list[_Evidence] = []
        for view, text in views.items():
            found += self._exact(view, text, words[view])
            # Resemblance field by field: a near copy of a whole task is one of each field,
            # and a field compared alone is not diluted by the others.
            if view != JOINED_VIEW:
                found += self._near_duplicates(view, text, hashes[view])
        found += self.ngram_overlap(whole, words[whole], hashes[whole])
        code_evidence, unparsable = self._code(views, whole)
        found += code_evidence
        if item.group is not None:
            found += [_Evidence("group", (key, "group"), "group", 1.0, item.group)
                      for key in self.groups.get(item.group, ())]
        return _best_per_method(item, found), unparsable

    def _exact(self, view: str, text: str, words: list[str]) -> list[_Evidence]:
        exact = [_Evidence("exact", slot, view, 1.0, _snippet(text))
                 for slot in self.exact.get(sha256_hex(text), ())]
        already = {evidence.slot for evidence in exact}
        normalized = self.normalized.get(sha256_hex(" ".join(words)), ())
        return exact + [_Evidence("normalized", slot, view, 1.0, _snippet(text))
                        for slot in normalized if slot not in already]

    def ngram_overlap(self, view: str, words: list[str], hashes: np.ndarray) -> list[_Evidence]:
        """The n-gram method alone (benchmarks/ compares it with all-pairs comparison)."""
        grams = np.unique(window_hashes(hashes, self.n))
        # A sorted array and a binary search: no Python-level work for the n-grams of a clean
        # item, which is nearly all of them.
        positions = np.searchsorted(self.ngram_keys, grams) % max(1, len(self.ngram_keys))
        shared = grams[self.ngram_keys[positions] == grams] if len(self.ngram_keys) else grams[:0]
        counts: Counter[int] = Counter()
        for gram in shared.tolist():
            counts.update(self.ngrams[gram])
        return [
            _Evidence("ngram", self.ngram_slots[slot], view, count / self.ngram_sizes[slot],
                      self._first_shared_ngram(words, hashes, slot))
            for slot, count in counts.items()
            if count / self.ngram_sizes[slot] >= self.config.ngram_threshold
        ]

    def _first_shared_ngram(self, words: list[str], hashes: np.ndarray, slot: int) -> str:
        """The training text's first n-gram that the eval field holds: the evidence to read."""
        for start, gram in enumerate(window_hashes(hashes, self.n).tolist()):
            if slot in self.ngrams.get(gram, ()):
                return _snippet(" ".join(words[start : start + self.n]))
        return ""

    def _near_duplicates(self, view: str, text: str, hashes: np.ndarray) -> list[_Evidence]:
        if shingle_count(len(hashes)) < self.config.minhash_min_shingles:
            return []
        signature = minhash(hashes)
        found = []
        for slot in self.lsh.query(signature):
            # LSH only proposes candidates; the signatures' own estimate decides.
            jaccard = signature.jaccard(self.signatures[slot])
            if jaccard >= self.config.jaccard_threshold:
                found.append(_Evidence("minhash", self.minhash_slots[slot], view, jaccard,
                                       _snippet(text)))
        return found

    def _code(self, views: dict[str, str], whole: str) -> tuple[list[_Evidence], bool]:
        """Code evidence, and whether there was code (a `def`) but none of it parsed. The
        fields joined come first (a prompt and its completion make one program), then each."""
        order = [whole, *(view for view in views if view != whole)]
        candidates = [view for view in order if "def " in views[view]]
        for view in candidates:
            fingerprint = code_fingerprint(views[view], self.config.code_literals,
                                           self.config.code_min_nodes)
            if fingerprint is not None:
                return self._code_matches(view, views[view], fingerprint), False
        return [], bool(candidates)

    def _code_matches(self, view: str, text: str, code: CodeFingerprint) -> list[_Evidence]:
        """Score 1 for an eval function the training item holds whole; otherwise the share of
        the eval functions' bodies (in nodes) whose top-level statements the training item
        holds anywhere in its code: a copy with statements added around it still scores."""
        whole_function = {key for h in code.functions for key in self.functions.get(h, ())}
        held: Counter[EvalKey] = Counter()
        for digest in code.subtrees:
            for key, nodes in self.statements.get(digest, ()):
                held[key] += nodes
        scores = {key: nodes / self.body_nodes[key] for key, nodes in held.items()}
        scores |= {key: 1.0 for key in whole_function}
        return [_Evidence("code", (key, PROGRAM), view, score, _snippet(text))
                for key, score in scores.items() if score >= self.config.code_threshold]


def _agreed_settings(files: list[dict[str, Any]]) -> int:
    """The n-gram length both fingerprint files were made with. Refuses files hashed another
    way than this heldout hashes training items: their hashes could never match."""
    ns = {f["ngram_n"] for f in files}
    if len(ns) != 1:
        raise StageError(f"the fingerprint files disagree on ngram_n ({sorted(ns)}); "
                         "re-run the split stage (dvc repro)")
    expected = {"normalization": NORMALIZATION, "ngram_hash": NGRAM_HASH, "minhash": MINHASH,
                "code_normalization": CODE_NORMALIZATION}
    for f in files:
        differ = [name for name, value in expected.items() if f.get(name) != value]
        if differ:
            raise StageError(
                f"the {f['split']} fingerprints were made by another version of heldout "
                f"({', '.join(differ)} differ); re-run the split stage (dvc repro)"
            )
    return ns.pop()


def _shared_by(evidence_per_item: Iterable[set[int]], min_items: int) -> set[int]:
    """Hashes that at least `min_items` eval items share: template text (a test harness's
    comments, an import line) or a common code idiom, which says nothing about any one item."""
    counts: Counter[int] = Counter()
    for evidence in evidence_per_item:
        counts.update(evidence)
    return {digest for digest, count in counts.items() if count >= min_items}


def _best_per_method(item: TrainingItem, found: list[_Evidence]) -> list[Match]:
    best: dict[tuple[str, EvalKey], Match] = {}
    for method, ((split, eval_id), eval_field), view, score, snippet in found:
        key = (method, (split, eval_id))
        if key not in best or score > best[key].score:
            best[key] = Match(method, item.source, item.id, split, eval_id, eval_field, view,
                              round(score, 4), snippet, item.line)
    return list(best.values())


def _snippet(text: str) -> str:
    collapsed = " ".join(text.split())
    return collapsed if len(collapsed) <= SNIPPET_CHARS else collapsed[: SNIPPET_CHARS - 1] + "…"


def scan_source(
    index: EvalIndex, source: str, items: Iterable[TrainingItem], workers: int = 1
) -> SourceScan:
    """Scan a stream of training items; with workers > 1, in that many processes. The stream
    is read as it is scanned, so a source of any size fits in memory."""
    scan = SourceScan(source)
    for matches, unparsable in _scan_all(index, items, workers):
        scan.items += 1
        scan.code_unparsable += unparsable
        scan.matches += matches
    return scan


_CHUNK = 1000  # items per task sent to a worker: large enough to amortize the round trip
_worker_index: EvalIndex | None = None


def _scan_all(
    index: EvalIndex, items: Iterable[TrainingItem], workers: int
) -> Iterator[tuple[list[Match], bool]]:
    if workers == 1:
        yield from map(index.scan, items)
        return
    # spawn, not fork: the stage runs inside MLflow's and Prefect's threads, and forking a
    # threaded process can deadlock the child on a lock some thread held.
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_start_worker, initargs=(index,)) as pool:
        pending: deque[AsyncResult] = deque()
        for chunk in _chunks(items, _CHUNK):
            pending.append(pool.apply_async(_scan_chunk, (chunk,)))
            # A bounded queue: the reader never runs far ahead of the workers.
            if len(pending) > 2 * workers:
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()


def _start_worker(index: EvalIndex) -> None:
    global _worker_index
    _worker_index = index


def _scan_chunk(chunk: list[TrainingItem]) -> list[tuple[list[Match], bool]]:
    assert _worker_index is not None, "the pool's initializer sets the index"
    return [_worker_index.scan(item) for item in chunk]


def _chunks(items: Iterable[TrainingItem], size: int) -> Iterator[list[TrainingItem]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


# --- Training sources ----------------------------------------------------------------------


def task_items(tasks: Iterable[Task]) -> Iterator[TrainingItem]:
    """The train split as training items: every text a task holds, and its group."""
    for task in tasks:
        texts = {"prompt": task.prompt, "reference": task.reference or "", "tests": task.tests}
        yield TrainingItem(TRAIN_SPLIT_SOURCE, task.id, texts, task.group)


def corpus_items(path: Path, corpus: TrainingCorpus) -> Iterator[TrainingItem]:
    """A training corpus, one item a line, streamed. A missing or null text field is empty;
    bad lines are all reported at once at the end, naming line and field."""
    problems: list[Problem] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                problems.append(Problem(number, None, f"invalid JSON: {error.msg}"))
                continue
            item = _corpus_item(record, number, corpus, problems)
            if item is not None:
                yield item
    if problems:
        raise InputFileError(path, problems, hint=(
            f"params.yaml decontaminate.training_corpora names the text fields "
            f"{corpus.fields} and the id field '{corpus.id_field}' of this file."))


def _corpus_item(record: Any, number: int, corpus: TrainingCorpus,
                 problems: list[Problem]) -> TrainingItem | None:
    if not isinstance(record, dict):
        problems.append(Problem(number, None, "expected a JSON object"))
        return None
    identifier = record.get(corpus.id_field)
    if not isinstance(identifier, str | int) or isinstance(identifier, bool):
        problems.append(Problem(number, corpus.id_field, "missing, or not a string or integer"))
        return None
    texts = {}
    for name in corpus.fields:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            problems.append(Problem(number, name, "expected a string"))
            return None
        texts[name] = value or ""
    group = record.get(corpus.group_field) if corpus.group_field else None
    return TrainingItem(corpus.path, str(identifier), texts,
                        None if group is None else str(group), number)


# --- Report ----------------------------------------------------------------------------------


def eval_items_matched(scans: list[SourceScan]) -> dict[str, list[str]]:
    """Eval item ids, per split, that some training *corpus* overlaps. Train-split matches are
    not among them: those training items are removed, so they no longer reach training."""
    matched: dict[str, set[str]] = {"val": set(), "test": set()}
    for scan in scans:
        if scan.source != TRAIN_SPLIT_SOURCE:
            for match in scan.matches:
                matched.setdefault(match.eval_split, set()).add(match.eval_id)
    return {split: sorted(ids) for split, ids in matched.items()}


def build_report(
    config: DecontaminateConfig,
    scans: list[SourceScan],
    fingerprint_digests: dict[str, str],
    val_tasks: dict[str, Task],
) -> dict[str, Any]:
    """The report: every match with its evidence, counts per method and split, the eval items
    a corpus leaked and what the policy does with them. Snippets show the val side only: a
    training text that matches a test item *is* test text, and the report is read widely."""
    matches = sorted((m for scan in scans for m in scan.matches),
                     key=lambda m: (m.eval_split, m.eval_id, m.method, m.source, m.training_id))
    counts = {method: Counter() for method in METHODS}
    for match in matches:
        counts[match.method][match.eval_split] += 1
    flagged = eval_items_matched(scans)
    return {
        "policy": config.policy,
        "config": config.model_dump(exclude={"training_corpora", "workers"}),
        "fingerprints": fingerprint_digests,
        "sources": [
            {"source": s.source, "items": s.items, "matched": len(s.matched_ids),
             "code_unparsable": s.code_unparsable}
            for s in scans
        ],
        "counts": {method: {split: counts[method][split] for split in ("val", "test")}
                   for method in METHODS},
        "flagged_eval_ids": flagged,
        "excluded_eval_ids": excluded_eval_ids(config.policy, flagged),
        "removed_train_ids": sorted(next((s.matched_ids for s in scans
                                          if s.source == TRAIN_SPLIT_SOURCE), set())),
        "matches": [_match_record(m, val_tasks) for m in matches],
    }


def excluded_eval_ids(policy: Policy, flagged: dict[str, list[str]]) -> dict[str, list[str]]:
    return flagged if policy == "drop" else {split: [] for split in flagged}


def _match_record(match: Match, val_tasks: dict[str, Task]) -> dict[str, Any]:
    record = asdict(match)
    if match.eval_split == "val" and match.eval_id in val_tasks:
        task = val_tasks[match.eval_id]
        text = {PROGRAM: task.prompt + (task.reference or ""), "group": task.group}.get(
            match.eval_field, getattr(task, match.eval_field, None) or "")
        record["eval_snippet"] = _snippet(text)
    else:
        record["training_snippet"] = record["eval_snippet"] = None
    return record


def report_table(report: dict[str, Any]) -> str:
    """The report as the stage's log shows it: what was read, counts per method and split, one
    line per match, and what the policy does."""
    sources = ", ".join(f"{s['source']} {s['items']}" for s in report["sources"])
    unparsable = sum(s["code_unparsable"] for s in report["sources"])
    lines = [f"training items: {sources}; {unparsable} hold code that does not parse "
             "(compared as text only)", "", f"{'method':<12}{'val':>5}{'test':>6}"]
    counts = report["counts"]
    lines += [f"{m:<12}{counts[m]['val']:>5}{counts[m]['test']:>6}" for m in METHODS]
    lines += ["", f"{'eval item':<22}{'method':<12}{'score':>5}  {'eval field':<12}training item"]
    lines += [f"{m['eval_split'] + '/' + m['eval_id']:<22}{m['method']:<12}{m['score']:>5.2f}  "
              f"{m['eval_field']:<12}{m['source']}:{m['training_id']}" for m in report["matches"]]
    listed = {split: ", ".join(ids) or "none" for split, ids in report["flagged_eval_ids"].items()}
    removed = ", ".join(report["removed_train_ids"]) or "none"
    lines += ["", f"removed from the train split: {removed}",
              f"leaked by a training corpus (policy {report['policy']}): val {listed['val']}; "
              f"test {listed['test']}"]
    return "\n".join(lines)


def describe_leaks(report: dict[str, Any]) -> str:
    by_item = defaultdict(set)
    for m in report["matches"]:
        if m["source"] != TRAIN_SPLIT_SOURCE:
            by_item[f"{m['eval_split']}/{m['eval_id']}"].add(f"{m['method']} ({m['source']}:"
                                                              f"{m['training_id']})")
    lines = [f"  {item}: {', '.join(sorted(how))}" for item, how in sorted(by_item.items())]
    return ("training corpora hold copies of evaluation items (decontaminate.policy is fail):\n"
            + "\n".join(lines) + "\nRemove those training items, or set the policy to drop to "
            "score without these eval items.")
