"""What every router shares: the decision codes, the seeded tie-breaker and the uncertainty order."""

from __future__ import annotations

import hashlib
from operator import methodcaller

import numpy as np

DISCARD, WEAK, ANNOTATE, KEEP = 0, 1, 2, 3
DECISIONS = ("discard", "weak", "annotate", "keep")


def tiebreak(keys, seed: int) -> np.ndarray:
    """A seeded, order-independent tie-breaker per key (uint64 from sha1(seed, key): the first 8 bytes
    of the digest, little-endian)."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    # map() over built-in callables: the hashing runs without a Python-level step per key
    s = f"{seed}\0".encode()
    digests = b"".join(map(methodcaller("digest"), map(hashlib.sha1, map(s.__add__, map(str.encode, keys)))))
    return np.frombuffer(digests, dtype=np.uint8).reshape(n, 20)[:, :8].copy().view("<u8").ravel().astype(np.uint64)


def uncertainty_order(u: np.ndarray, ties: np.ndarray) -> np.ndarray:
    """Indices from the most to the least uncertain (equal scores ordered by ``ties``)."""
    return np.lexsort((ties, -np.asarray(u, dtype=np.float64)))


def check_scores(u: np.ndarray, keys, name: str) -> None:
    bad = np.flatnonzero(~np.isfinite(u))
    if bad.size:
        raise ValueError(f"routing signal {name!r} is missing for {bad.size} question(s), e.g. {keys[int(bad[0])]!r} "
                         "(accuracy needs a label; model signals need the score stage to compute them)")
