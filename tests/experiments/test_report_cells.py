"""The report's cells say how many runs they rest on; the picture's axis is not set by 2-run intervals."""

from devenus.experiments.plot import _limits
from devenus.experiments.runner import _fmt


def test_a_cell_on_fewer_runs_than_its_row_says_so():
    d = {"mean": 0.165, "half_width": 0.019, "n": 2, "level": 0.95}
    assert _fmt(d, n=3) == "+0.165 ± 0.019 (n=2)"
    assert _fmt({**d, "n": 3}, n=3) == "+0.165 ± 0.019"
    assert _fmt(d) == "+0.165 ± 0.019" and _fmt(None, n=3) == "-"


def test_axis_limits_cover_the_intervals_given_and_the_points():
    lo, hi = _limits([{"mean": 0.01, "half_width": 0.03}], points=[0.16, -0.02])
    assert lo < -0.02 and 0.16 < hi < 0.2  # a 2-run interval of ±0.3 around 0.16 is not given: not covered
    lo, hi = _limits([{"mean": 0.2, "half_width": float("nan")}])
    assert lo < 0 < 0.2 < hi  # 0 always on the axis; a one-run cell has no interval
    assert _limits([]) is None
