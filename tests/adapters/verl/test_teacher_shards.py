"""The EMA teacher's checkpoint is per-rank FSDP shards: a resume at another GPU count is refused in one
line that says what to do, by rank count and by shard shape, not only by parameter names."""

import pytest

pytest.importorskip("verl")

from devenus.adapters.verl.teacher import check_shards  # noqa: E402

ACTOR = {"w": (64, 32), "b": (64,)}


def test_the_same_sharding_resumes():
    check_shards("/c/devenus_teacher/rank_0.pt", dict(ACTOR), ACTOR, saved_ranks=8, world=8)


def test_another_gpu_count_is_refused_with_the_count_that_wrote_it():
    with pytest.raises(ValueError) as e:
        check_shards("/c/devenus_teacher/rank_0.pt", {"w": (32, 32), "b": (32,)}, ACTOR, saved_ranks=16, world=8)
    msg = str(e.value)
    assert "saved by 16 ranks, this run has 8" in msg and "= 16" in msg and "\n" not in msg


def test_same_names_other_shapes_are_refused():
    with pytest.raises(ValueError, match=r"1 teacher shard\(s\) differ in shape .*w: saved \(32, 32\), actor \(64, 32\)"):
        check_shards("/c/devenus_teacher/rank_0.pt", {"w": (32, 32), "b": (64,)}, ACTOR, saved_ranks=8, world=8)


def test_other_parameter_names_are_refused():
    with pytest.raises(ValueError, match=r"other parameters than the actor's \(missing \['b'\], extra \['c'\]\)"):
        check_shards("/c/devenus_teacher/rank_0.pt", {"w": (64, 32), "c": (64,)}, ACTOR, saved_ranks=8, world=8)
