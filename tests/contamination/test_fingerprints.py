from __future__ import annotations

from heldout.contamination.fingerprints import split_fingerprints
from heldout.contamination.text import ngram_hashes, normalize_text
from heldout.tasks.sources import load_tasks


def test_normalization_folds_case_whitespace_punctuation_and_unicode_forms():
    a = "def  Add(a,b):\n\treturn a+b  # ok"
    b = "def add( a, b ):  return A + B # OK"
    assert normalize_text(a) == normalize_text(b) == "def add a b return a b ok"
    assert normalize_text("ﬁle") == normalize_text("FILE")
    assert normalize_text("a b") != normalize_text("a c")


def test_ngrams_overlap_exactly_on_shared_windows():
    words = ["one", "two", "three", "four", "five", "six"]
    assert len(ngram_hashes(words, 3)) == 4
    assert ngram_hashes(words[:4], 3) <= ngram_hashes(words, 3)
    assert ngram_hashes(["x", "y"], 13) != ngram_hashes(["x", "z"], 13)
    assert len(ngram_hashes(["x", "y"], 13)) == 1, "short texts still get one n-gram"
    assert ngram_hashes([], 13) == set()


def test_split_fingerprints_hold_hashes_not_text():
    tasks = load_tasks("humaneval")[:3]
    fingerprints = split_fingerprints("test", "d" * 64, tasks, 13)
    assert fingerprints["ngram_n"] == 13 and fingerprints["digest"] == "d" * 64
    item = fingerprints["items"][0]
    assert set(item["fields"]) == {"prompt", "reference", "tests"}
    assert all(isinstance(h, int) for h in item["fields"]["prompt"]["ngrams"])
    assert tasks[0].prompt[:30] not in str(fingerprints)
