import pytest

from devenus.records import hide_labels, make_row, validate_rows


def rows(n=50):
    return [
        make_row(data_source="t", index=f"k{i}", source="t", question=f"q{i}", ground_truth=str(i),
                 simulation={"hidden_answer": str(i), "noise": "none"} if i % 2 else None)
        for i in range(n)
    ]


def test_hide_labels_keeps_fraction_moves_truth_and_validates():
    src = rows()
    out = hide_labels(src, 0.1, seed=0)
    validate_rows(out)
    lab = [r for r in out if r["extra_info"]["labeled"]]
    assert len(lab) == 5
    for r in out:
        if not r["extra_info"]["labeled"]:
            assert r["reward_model"]["ground_truth"] == "" and r["extra_info"]["label_source"] == "none"
            assert r["simulation"]["hidden_answer"] == r["extra_info"]["index"][1:]
    assert src[0]["reward_model"]["ground_truth"] == "0"  # input untouched


def test_hide_labels_depends_on_key_not_order():
    a = {r["extra_info"]["index"] for r in hide_labels(rows(), 0.2, seed=3) if r["extra_info"]["labeled"]}
    b = {r["extra_info"]["index"] for r in hide_labels(rows()[::-1], 0.2, seed=3) if r["extra_info"]["labeled"]}
    c = {r["extra_info"]["index"] for r in hide_labels(rows(), 0.2, seed=4) if r["extra_info"]["labeled"]}
    assert a == b and a != c
    assert len(hide_labels(rows(), 0.0)) == 50 and not any(r["extra_info"]["labeled"] for r in hide_labels(rows(), 0.0))


def test_hide_labels_rejects_bad_fraction():
    with pytest.raises(ValueError, match="labeled_fraction"):
        hide_labels(rows(), 1.2)
