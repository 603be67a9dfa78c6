"""The testbed's candidate pool for active selection: unlabeled addition questions of 1-6 digits.

The base model was fine-tuned on 1-4 digits, so its pass rate runs from near 1 (1 digit) to near 0
(5-6 digits): difficulty varies enough for selection to matter. Questions never repeat the testbed's
own splits (train, test, dev, SFT). Rows are unlabeled (``label_source=none``, empty target); the
answer is kept as simulation truth (``simulation.hidden_answer``), which only the "simulation"
annotation source and diagnostics read.

Built once per (testbed config, pool config) and cached beside the testbed, as a dataset version
(Parquet + manifest). It lives here, not in the testbed's config, so the testbed's cache key (and
everyone's built testbed) does not change.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

POOL_VERSION = 1


@dataclass(frozen=True)
class PoolConfig:
    size: int = 1024
    digits: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    seed: int = 0

    def key(self, testbed_key: str) -> str:
        blob = json.dumps({"v": POOL_VERSION, "testbed": testbed_key, "cfg": dataclasses.asdict(self)},
                          sort_keys=True, default=list)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def pool_rows(testbed_config=None, config: PoolConfig | None = None) -> list[dict]:
    """The pool's record rows (unlabeled; difficulty and family in ``extra_info``)."""
    from devenus.records.labels import hide_labels
    from devenus.testbed import TestbedConfig
    from devenus.testbed import tasks
    from devenus.testbed.build import question_sets, question_rows

    tcfg = testbed_config or TestbedConfig()
    cfg = config or PoolConfig()
    used = {q.key for qs in question_sets(tcfg).values() for q in qs}
    qs = tasks.generate("add", tuple(cfg.digits), cfg.size, seed=f"{tcfg.seed}:pool:{cfg.seed}", exclude=used)
    return hide_labels(question_rows(qs, "pool"), 0.0)


def build_pool(testbed_config=None, config: PoolConfig | None = None, cache_dir: str | Path | None = None) -> Path:
    """Path of the cached pool Parquet, built first if missing (a file lock serialises builders)."""
    from devenus.records.versions import write_version
    from devenus.testbed import TestbedConfig, default_cache_dir

    tcfg = testbed_config or TestbedConfig()
    cfg = config or PoolConfig()
    root = Path(cache_dir or default_cache_dir()) / "select_pool"
    root.mkdir(parents=True, exist_ok=True)
    key = cfg.key(tcfg.key())
    out = root / f"pool-{key}.parquet"
    with open(root / f".lock-{key}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            write_version(pool_rows(tcfg, cfg), out, rule="select-testbed-pool",
                          config={"pool": dataclasses.asdict(cfg), "testbed_key": tcfg.key()})
    return out
