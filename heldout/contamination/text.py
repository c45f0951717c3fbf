"""How texts are compared, hashed one way on the eval and the training side: normalization,
word n-gram hashes, and MinHash signatures of word shingles."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

import numpy as np
from datasketch import MinHash

# Versions of the hashing below. A fingerprint file records them, and the index refuses one made
# another way: its hashes could never match the training side's.
NORMALIZATION = "nfkc-casefold-alnum-v1"
NGRAM_HASH = "blake2b-64-words-fold64-v1"
MINHASH = {
    "num_perm": 128,
    "seed": 1,
    "scheme": "affine32",
    "shingle_words": 5,
    "shingle_hash": "blake2b-64-words-fold64-high32-v1",
}

_NOT_WORD = re.compile(r"[^\w]+")


def normalize_text(text: str) -> str:
    """Fold Unicode forms, case, whitespace and every non-word character, so that copies that
    differ only in formatting or punctuation normalize to the same string."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NOT_WORD.sub(" ", folded).split())


@lru_cache(maxsize=1 << 20)
def _word_hash(word: str) -> int:
    return hash64(word)


def hash64(text: str) -> int:
    """The 64-bit hash that words and normalized code are hashed with."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def word_hashes(words: list[str]) -> np.ndarray:
    """64-bit hashes of the words: each word hashed once, n-grams and shingles folded from them
    with numpy, an order of magnitude cheaper than hashing the text of every n-gram."""
    return np.fromiter(map(_word_hash, words), dtype=np.uint64, count=len(words))


# Odd, so folding by multiply-and-add keeps every word's bits (uint64 arithmetic wraps: the
# intended modulo 2**64).
_FOLD = np.uint64(0x9E3779B97F4A7C15)


def window_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """A 64-bit hash of each run of n consecutive words, from their word hashes. A text shorter
    than n words is one window of all its words, so short items can still be matched rather
    than silently never compared."""
    if not len(hashes):
        return hashes
    n = min(n, len(hashes))
    count = len(hashes) - n + 1
    windows = hashes[:count].copy()
    for offset in range(1, n):
        windows = windows * _FOLD + hashes[offset : offset + count]
    return windows


def ngram_hashes(words: list[str], n: int) -> set[int]:
    """Hashes of the word n-grams (see window_hashes)."""
    return set(window_hashes(word_hashes(words), n).tolist())


# Shared by every signature: datasketch would otherwise draw the permutations per MinHash.
_PERMUTATIONS = MinHash(
    num_perm=MINHASH["num_perm"], seed=MINHASH["seed"], scheme=MINHASH["scheme"]
).permutations


def _identity(value: int) -> int:
    return value


def shingle_count(word_count: int) -> int:
    return max(0, word_count - MINHASH["shingle_words"] + 1) if word_count else 0


def minhash(hashes: np.ndarray) -> MinHash | None:
    """The MinHash of a text's word shingles, from its word hashes (None for an empty text).
    The shingle hashes are the top 32 bits of the window hashes, which depend on every word."""
    if not len(hashes):
        return None
    shingles = np.unique(window_hashes(hashes, MINHASH["shingle_words"]) >> np.uint64(32))
    signature = MinHash(
        num_perm=MINHASH["num_perm"], seed=MINHASH["seed"], scheme=MINHASH["scheme"],
        hashfunc=_identity, permutations=_PERMUTATIONS,
    )
    signature.update_batch(shingles.astype(np.uint32).tolist())
    return signature


def minhash_from_signature(signature: Iterable[int]) -> MinHash:
    return MinHash(
        seed=MINHASH["seed"], scheme=MINHASH["scheme"], hashfunc=_identity,
        hashvalues=list(signature), permutations=_PERMUTATIONS,
    )
