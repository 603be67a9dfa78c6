"""Training-time refinement: methods that filter, reweight or correct supervision as training goes
(TraPO, TraPO v2, OLR, NL-OLR v2). Shared non-method code: :mod:`.common`."""

from devenus.online.refine import nl_olr2, olr, trapo, trapo2  # noqa: F401  (registration)
