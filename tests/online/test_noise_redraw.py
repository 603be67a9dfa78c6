"""The OLR reference's active ("strong") noise, redrawn online (devenus.online.noise) on hand-built batches."""

import numpy as np
import pytest

from batches import rollouts
from devenus.online.method import OnlineMethod
from devenus.online.noise import REDRAW_FIELD, draw, redraw_marks, wrong_candidates
from devenus.online.rollouts import RolloutBatch
from devenus.online.step import StepRules
from devenus.verify import UNMATCHABLE


class Plain(OnlineMethod):
    """GRPO's step: no surface of its own."""

    name = "test_plain"


class Seer(OnlineMethod):
    """Records what its S_y sees."""

    name = "test_seer"

    def construct_targets(self, b):
        self.seen = (b.target.copy(), dict(b.fields))
        return None


def batch(preds, groups, marks, step=3) -> RolloutBatch:
    return rollouts(preds, groups, labeled=True, target=[UNMATCHABLE if m else "5" for m in marks], step=step,
                    response=[f"so \\boxed{{{p}}}" if p is not None else "no answer" for p in preds],
                    fields={REDRAW_FIELD: np.array([{"hidden": "5", "seed": 0} if m else None for m in marks],
                                                   dtype=object)})


PREDS = ["5", "7", "7", "9", "5", "4", "5", "5"]
GROUPS = [0, 0, 0, 0, 1, 1, 1, 1]


def test_only_marked_rows_get_a_wrong_answer_of_their_own_rollouts_and_are_regraded():
    marks = [True] * 4 + [False] * 4
    rules = StepRules(Plain())
    out = rules.targets(batch(PREDS, GROUPS, marks))
    t = out.view.target
    assert t[0] in {"7", "9"} and len(set(t[:4])) == 1  # never the hidden "5"; one target per group
    assert list(t[4:]) == ["5"] * 4  # the clean group keeps its label and verl's scores
    assert list(out.view.score[:4]) == [float(p == t[0]) for p in PREDS[:4]]
    assert list(out.regraded) == marks and not out.view.constructed.any()  # written back, not S_y's
    assert rules.metrics["devenus/noise/redrawn"] == 1 and rules.metrics["devenus/noise/no_wrong_answer"] == 0


def test_the_draw_is_seeded_by_seed_step_and_key_and_varies_across_visits():
    cands = ["11", "12", "13", "14"]
    assert draw(cands, 0, 3, "k0") == draw(cands, 0, 3, "k0")
    assert len({draw(cands, 0, s, "k0") for s in range(40)}) == 4  # redrawn at every visit
    marks = [True] * 4 + [False] * 4
    a = StepRules(Plain()).targets(batch(PREDS, GROUPS, marks)).view.target
    b = StepRules(Plain()).targets(batch(PREDS, GROUPS, marks)).view.target
    assert list(a) == list(b)


def test_no_wrong_answer_keeps_the_unmatchable_sentinel_as_the_reference_does():
    preds = ["5", "5", None, "5.0"]  # only the hidden answer (in two forms) and an abstention
    rules = StepRules(Plain())
    out = rules.targets(batch(preds, [0] * 4, [True] * 4))
    assert list(out.view.target) == [UNMATCHABLE] * 4 and not out.view.score.any()
    assert rules.metrics["devenus/noise/no_wrong_answer"] == 1 and rules.metrics["devenus/noise/redrawn"] == 0
    assert wrong_candidates(["5", "5.0", "6", "6", "7"], "5") == ["6", "7"]


def test_the_method_sees_the_redrawn_label_as_given_and_never_the_simulation_field():
    m = Seer()
    StepRules(m).targets(batch(PREDS, GROUPS, [True] * 4 + [False] * 4))
    targets, fields = m.seen
    assert targets[0] in {"7", "9"} and REDRAW_FIELD not in fields
    v = batch(PREDS, GROUPS, [True] * 8)
    StepRules(Plain()).row_surfaces(v)
    assert REDRAW_FIELD not in v.fields


def test_marks_come_from_the_simulation_column_and_a_broken_mark_is_one_clear_error():
    sim = [{"noise": "redraw", "hidden_answer": "3", "noise_seed": 2}, {"noise": "none", "hidden_answer": "4"}, None]
    m = redraw_marks(sim)
    assert m[0] == {"hidden": "3", "seed": 2} and m[1] is None and m[2] is None
    assert redraw_marks([{"noise": "sentinel", "hidden_answer": "3"}]) is None
    with pytest.raises(ValueError, match="row 0: simulation.noise is 'redraw'.*noise_seed"):
        redraw_marks([{"noise": "redraw", "hidden_answer": "3"}])


def test_a_probe_is_a_visit_its_label_redrawn_and_the_field_never_reaches_the_method():
    pytest.importorskip("verl")
    from devenus.online.probe import probe_evidence

    class Observer(OnlineMethod):
        name = "test_observer"

        def observe(self, b):
            self.seen = (b.target.copy(), dict(b.fields))

    m = Observer()
    probe_evidence(m, batch(PREDS, GROUPS, [True] * 4 + [False] * 4))
    targets, fields = m.seen
    assert targets[0] in {"7", "9"} and REDRAW_FIELD not in fields
