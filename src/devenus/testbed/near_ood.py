"""Held-out splits beside the testbed: a near-OOD split and a second ID half (for 512 ID questions).

**Near-OOD** shares the training skill (column-by-column addition, the same worked-solution format and
prompt wording as ``add``) but not the training distribution. It was chosen before any method ran on
it and is never tuned on:

- ``add_long``: both operands 5 digits. Training draws d in {2, 3, 4} and the SFT warm start d in
  {1, 2, 3, 4}, so no question the model ever saw is this long (solutions stay under 80 tokens, inside
  the testbed's 96-token response budget).
- ``add_mixed``: operands of *different* lengths, each in {1, 2, 3, 4} digits (e.g. ``4821 + 37``).
  The testbed's ``add`` always draws both operands with the same number of digits, so the padded
  columns (``8+0+1=9``) never occur in training or SFT data.

**ID extension** (``test_id_extra``): 256 more ``add`` questions at d=3, drawn like ``test_id`` with
every testbed key (test, dev, train, SFT) excluded, so that ID validation can use 512 questions.

Neither touches the testbed's build or its config key: the files are generated from a fixed seed by
this module and cached in their own folder beside the testbed (``<cache>/testbed/heldout-<key>-v1``),
written atomically under a file lock. Rows follow the record contract (``question_rows`` of the build),
hidden truth in ``simulation``; ``extra_info.family`` names the group (``add_long``, ``add_mixed``,
``add``).
"""

from __future__ import annotations

import fcntl
import json
import random
from collections import Counter
from pathlib import Path

from devenus.testbed import tasks
from devenus.testbed.build import Testbed, question_rows, question_sets

VERSION = 1  # bump when what this module generates changes
LONG_DIGITS = 5
MIXED_DIGITS = (1, 2, 3, 4)
PER_FAMILY = 128
ID_EXTRA = 256
FILES = ("near_ood", "test_id_extra")


def generate(tb_questions: dict[str, list[tasks.Question]], seed: int) -> dict[str, list[tasks.Question]]:
    """The near-OOD and ID-extension questions, deterministic given the testbed's questions and ``seed``."""
    used = {q.key for qs in tb_questions.values() for q in qs}
    rng = random.Random(f"near_ood:{seed}:v{VERSION}")
    out: dict[str, list[tasks.Question]] = {"near_ood": [], "test_id_extra": []}

    def take(make, n: int, bucket: str) -> None:
        got = 0
        for _ in range(200 * n):
            if got == n:
                return
            q = make()
            if q.key in used:
                continue
            used.add(q.key)
            out[bucket].append(q)
            got += 1
        raise ValueError(f"cannot draw {n} distinct questions for {bucket}")

    def long() -> tasks.Question:
        return tasks.add_question("add_long", tasks.operand(rng, LONG_DIGITS), tasks.operand(rng, LONG_DIGITS),
                                  LONG_DIGITS)

    def mixed() -> tasks.Question:
        dx, dy = rng.sample(MIXED_DIGITS, 2)  # two different lengths, in either order
        return tasks.add_question("add_mixed", tasks.operand(rng, dx), tasks.operand(rng, dy), max(dx, dy))

    def id_mid() -> tasks.Question:
        d = tb_questions["test_id"][0].difficulty
        return tasks.add_question("add", tasks.operand(rng, d), tasks.operand(rng, d), d)

    take(long, PER_FAMILY, "near_ood")
    take(mixed, PER_FAMILY, "near_ood")
    take(id_mid, ID_EXTRA, "test_id_extra")
    return out


def heldout_dir(tb: Testbed) -> Path:
    return tb.root.parent / f"heldout-{tb.config.key()}-v{VERSION}"


def build_heldout(tb: Testbed) -> dict[str, Path]:
    """Paths of ``near_ood.parquet`` and ``test_id_extra.parquet`` for this testbed, generated once."""
    from devenus.records import write_records
    from devenus.atomic import atomic_dir

    folder = heldout_dir(tb)
    paths = {name: folder / f"{name}.parquet" for name in FILES}
    if all(p.exists() for p in paths.values()):
        return paths
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".lock-{folder.name}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(p.exists() for p in paths.values()):
            return paths
        qs = generate(question_sets(tb.config), tb.config.seed)
        with atomic_dir(folder) as tmp:  # a partial folder from an older layout is replaced whole
            for name in FILES:
                write_records(question_rows(qs[name], name), tmp / f"{name}.parquet")
            counts = {name: dict(Counter(q.family for q in qs[name])) for name in FILES}
            (tmp / "manifest.json").write_text(json.dumps({"version": VERSION, "testbed": tb.config.key(),
                                                           "seed": tb.config.seed, "counts": counts}, indent=1))
    return paths
