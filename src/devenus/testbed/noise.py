"""Noisy-label simulation at ratio rho, in the two regimes of the OLR experiments.

- ``inactive``: the noisy target is one the policy never produces. Testbed answers are non-negative
  integers and no worked solution ever writes a minus sign, so a negative number of the same size is
  unreachable by construction (a test checks that the base model never samples it).
- ``active``: the noisy target is a wrong answer the base policy actually produces, sampled once from
  it. Noisy rows are drawn among questions for which such an answer was observed, so every active
  label is realisable; this biases active noise towards questions the model finds harder (documented
  in docs/testbed.md), which is also where real annotation errors tend to sit.

The true answer stays in ``simulation.hidden_answer``; ``simulation.noise`` records the regime. From a
method's point of view a noisy row looks exactly like a clean one (labeled, label_source ``gold``).
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from typing import Mapping, Sequence

REGIMES = ("inactive", "active")


def inactive_target(true_answer: str, rng: random.Random) -> str:
    digits = max(1, len(true_answer.lstrip("-")))
    lo = 0 if digits == 1 else 10 ** (digits - 1)
    return "-" + str(rng.randint(max(lo, 1), 10**digits - 1))


def most_common_wrong(wrong: Sequence[str], rng: random.Random) -> str:
    counts = Counter(wrong).most_common()
    top = [a for a, c in counts if c == counts[0][1]]
    return rng.choice(sorted(top))


def inject_noise(
    rows: Sequence[dict],
    rho: float,
    regime: str,
    seed: int,
    wrong_answers: Mapping[str, Sequence[str]] | None = None,
) -> list[dict]:
    """Copy of ``rows`` with ``round(rho * n_labeled)`` labeled targets replaced by wrong ones.

    ``wrong_answers`` (active regime only) maps a row's ``extra_info.index`` to the wrong answers the
    base policy produced for it (see :func:`sample_wrong_answers`).
    """
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"rho must lie in [0, 1], got {rho}")
    if regime not in REGIMES:
        raise ValueError(f"unknown noise regime {regime!r}; known: {REGIMES}")
    if regime == "active" and wrong_answers is None:
        raise ValueError("active noise needs wrong_answers sampled from the base policy")
    rng = random.Random(f"noise:{regime}:{rho}:{seed}")
    out = [copy.deepcopy(r) for r in rows]
    labeled = [i for i, r in enumerate(out) if r["extra_info"]["labeled"]]
    n_noisy = round(rho * len(labeled))
    eligible = labeled
    if regime == "active":
        eligible = [i for i in labeled if wrong_answers.get(out[i]["extra_info"]["index"])]  # type: ignore[union-attr]
        if len(eligible) < n_noisy:
            raise ValueError(
                f"active noise at rho={rho} needs {n_noisy} questions with an observed wrong answer, "
                f"only {len(eligible)} have one: sample more (n_samples) or lower rho"
            )
    for i in sorted(rng.sample(eligible, n_noisy)):
        row = out[i]
        truth = row["reward_model"]["ground_truth"]
        if regime == "inactive":
            target = inactive_target(truth, rng)
        else:
            target = most_common_wrong(wrong_answers[row["extra_info"]["index"]], rng)  # type: ignore[index]
        row["reward_model"]["ground_truth"] = target
        sim = dict(row.get("simulation") or {})
        sim.setdefault("hidden_answer", truth)
        sim["noise"] = regime
        row["simulation"] = sim
    return out


#: questions per sampling call; each call shows as one step of the progress bar
SAMPLE_CHUNK = 256


def sample_wrong_answers(model, tokenizer, rows: Sequence[dict], n_samples: int = 8, seed: int = 0,
                         max_new_tokens: int = 96, progress: bool | None = None) -> dict[str, list[str]]:
    """Wrong (parseable, non-equivalent) answers the policy samples at T=1, keyed by sample key.

    Questions are sampled in chunks of :data:`SAMPLE_CHUNK`, chunk ``i`` with seed
    ``seed * 1_000_003 + i``, so the result depends on (seed, rows) only and a progress bar
    (``progress``: None = when stderr is a terminal) can follow the minutes this takes.
    """
    from tqdm import tqdm

    from devenus.testbed.sampling import sample
    from devenus.verify import extract_answer, get_default_verifier

    verifier = get_default_verifier()
    questions = [r["prompt"][-1]["content"] for r in rows]
    comps = []
    with tqdm(total=len(questions), desc="sampling", unit=" questions", mininterval=0.5, leave=False,
              disable=None if progress is None else not progress) as bar:
        for i, start in enumerate(range(0, len(questions), SAMPLE_CHUNK)):
            chunk = questions[start : start + SAMPLE_CHUNK]
            comps += sample(model, tokenizer, chunk, n_samples, 1.0, max_new_tokens, seed=seed * 1_000_003 + i)
            bar.update(len(chunk))
    out: dict[str, list[str]] = {}
    for row, cs in zip(rows, comps):
        truth = (row.get("simulation") or {}).get("hidden_answer") or row["reward_model"]["ground_truth"]
        wrong = []
        for c in cs:
            a = extract_answer(c.text, truncated=c.truncated)
            if a is not None and not verifier.equivalent(a, truth):
                wrong.append(a)
        out[row["extra_info"]["index"]] = wrong
    return out
