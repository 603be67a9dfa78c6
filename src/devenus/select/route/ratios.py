"""Fixed ratios: sort by uncertainty u; annotate the top ``round(rho_a n)``, discard the bottom
``round(rho_d n)``, weak supervision for the rest (the paper's setting: rho_a = 29.3%, rho_d = 42.1%).
An annotation budget caps the annotated count; the overflow (the least uncertain of the top) goes weak."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devenus.config import option
from devenus.select.route.router import RouteConfig, Router, RouteInputs


@dataclass
class RatioConfig(RouteConfig):
    """``route.selector: ratio``: annotate the top rho_a by uncertainty, discard the bottom rho_d, weak between."""

    rho_annotate: float = option(0.293, "share annotated (the most uncertain)", ge=0.0, le=1.0)
    rho_discard: float = option(0.421, "share discarded (the least uncertain)", ge=0.0, le=1.0)
    annotation_budget: int | None = option(None, "cap on annotated questions (overflow -> weak)", ge=0)

    def check(self) -> None:
        if self.rho_annotate + self.rho_discard > 1.0 + 1e-12:
            raise self.error(f"route.rho_annotate + route.rho_discard must be <= 1, got "
                             f"{self.rho_annotate + self.rho_discard}")


def ratio_counts(n: int, rho_annotate: float, rho_discard: float, annotation_budget: int | None = None) -> tuple[int, int]:
    n_a = int(round(rho_annotate * n))
    n_d = min(int(round(rho_discard * n)), n - n_a)
    if annotation_budget is not None:
        if annotation_budget < 0:
            raise ValueError(f"annotation_budget must be >= 0, got {annotation_budget}")
        n_a = min(n_a, annotation_budget)
    return n_a, n_d


def ratio_route(u: np.ndarray, ties: np.ndarray, rho_annotate: float, rho_discard: float,
                annotation_budget: int | None = None) -> np.ndarray:
    """Decisions (``ANNOTATE`` / ``WEAK`` / ``DISCARD`` codes) per question."""
    from devenus.select.route.order import ANNOTATE, DISCARD, WEAK, uncertainty_order

    n = len(u)
    n_a, n_d = ratio_counts(n, rho_annotate, rho_discard, annotation_budget)
    order = uncertainty_order(u, ties)
    out = np.full(n, WEAK, dtype=np.int8)
    out[order[:n_a]] = ANNOTATE
    if n_d:
        out[order[n - n_d:]] = DISCARD
    return out


class RatioRouter(Router):
    """Annotate the most uncertain share, discard the least uncertain share, weak supervision between."""

    name = "ratio"
    config_class = RatioConfig

    def route(self, inputs: RouteInputs, info: dict) -> tuple[np.ndarray, np.ndarray]:
        from devenus.select.route.order import check_scores

        r = inputs.config
        u = self.labeled_rows_sign(inputs, info)
        check_scores(u, inputs.keys, r.signal)
        info.update(rho_annotate=r.rho_annotate, rho_discard=r.rho_discard, annotation_budget=r.annotation_budget)
        return ratio_route(u, inputs.ties, r.rho_annotate, r.rho_discard, r.annotation_budget), u
