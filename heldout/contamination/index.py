"""The eval splits' fingerprints, indexed for one pass over training data, and the matching of
one training item against them: which eval items it overlaps, and by what evidence.

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

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from datasketch import MinHash, MinHashLSH

from heldout.canonical import sha256_hex
from heldout.contamination.code import CODE_NORMALIZATION, CodeFingerprint, code_fingerprint
from heldout.contamination.config import DecontaminateConfig
from heldout.contamination.fingerprints import PROGRAM
from heldout.contamination.sources import TrainingItem
from heldout.contamination.text import (
    MINHASH,
    NGRAM_HASH,
    NORMALIZATION,
    minhash,
    minhash_from_signature,
    normalize_text,
    shingle_count,
    window_hashes,
    word_hashes,
)
from heldout.errors import StageError

METHODS = ("exact", "normalized", "ngram", "minhash", "code", "group")
JOINED_VIEW = "all"  # a training item's fields joined, when it has several
SNIPPET_CHARS = 120


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
        exact = [_Evidence("exact", slot, view, 1.0, snippet(text))
                 for slot in self.exact.get(sha256_hex(text), ())]
        already = {evidence.slot for evidence in exact}
        normalized = self.normalized.get(sha256_hex(" ".join(words)), ())
        return exact + [_Evidence("normalized", slot, view, 1.0, snippet(text))
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
                return snippet(" ".join(words[start : start + self.n]))
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
                                       snippet(text)))
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
        return [_Evidence("code", (key, PROGRAM), view, score, snippet(text))
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
    for method, ((split, eval_id), eval_field), view, score, training_snippet in found:
        key = (method, (split, eval_id))
        if key not in best or score > best[key].score:
            best[key] = Match(method, item.source, item.id, split, eval_id, eval_field, view,
                              round(score, 4), training_snippet, item.line)
    return list(best.values())


def snippet(text: str) -> str:
    """The text on one line, cut to SNIPPET_CHARS: enough to read the evidence in a report."""
    collapsed = " ".join(text.split())
    return collapsed if len(collapsed) <= SNIPPET_CHARS else collapsed[: SNIPPET_CHARS - 1] + "…"

