import numpy as np
import pytest

from batches import rollouts
from devenus.online.rollouts import RolloutBatch


def batch():
    return rollouts(["1", "2", None, "3", "4"], ["a", "a", "b", "b", "c"], key=["ka", "ka", "kb", "kb", "kc"],
                    labeled=[True, True, False, False, False], score=[1.0, 0.0, 0.0, 0.0, 0.0],
                    response_length=[5, 6, 7, 8, 9], truncated=[False, False, True, False, False],
                    response=["r0", "r1", "r2", "r3", "r4"],
                    fields={"vote_only": np.array([False, True, False, True, False]), "tag": np.arange(5)})


def test_groups_in_order_of_first_appearance():
    b = batch()
    assert [g.tolist() for g in b.groups()] == [[0, 1], [2, 3], [4]]
    assert b.group_ids().tolist() == [0, 0, 1, 1, 2]


def test_select_keeps_every_field_aligned_and_copies_mutables():
    b = batch()
    s = b.select([4, 2, 0])
    assert s.key.tolist() == ["kc", "kb", "ka"] and s.pred == ["4", None, "1"]
    assert s.response == ["r4", "r2", "r0"] and s.fields["tag"].tolist() == [4, 2, 0]
    assert s.truncated.tolist() == [False, True, False] and s.response_length.tolist() == [9, 7, 5]
    assert "vote_only" not in s.fields
    s.target[2] = "changed"
    s.score[0] = 9.0
    assert b.target[0] == "1" and b.score[4] == 0.0  # the selection does not alias the source


def test_misaligned_fields_are_rejected():
    with pytest.raises(ValueError, match="pred has 2 rows"):
        RolloutBatch(uid=np.array(["a", "a", "b"]), key=np.array(["k"] * 3), labeled=np.zeros(3, bool),
                     target=np.array([""] * 3), pred=[None, None], score=np.zeros(3),
                     response_length=np.ones(3), truncated=np.zeros(3, bool))
