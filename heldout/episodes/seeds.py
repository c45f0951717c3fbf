"""Seeds of episodes: common random numbers across checkpoints."""

from __future__ import annotations

import hashlib


def episode_seed(harness_seed: int, task_id: str, sample: int, rerun: int = 0) -> int:
    """The seed of one episode: a function of (harness seed, task, sample, rerun) and never of
    the checkpoint, so every checkpoint draws the same random numbers on the same episode."""
    key = f"{harness_seed}\x00{task_id}\x00{sample}\x00{rerun}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") >> 1
