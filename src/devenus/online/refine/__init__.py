"""Training-time refinement: methods that filter, reweight or correct supervision as training goes
(TraPO, TraPO v2, GeoMin, OLR, NL-OLR v2). Their base class and its bounded per-sample visit history:
:mod:`.method`."""

from devenus.online.refine import geomin, nl_olr2, olr, trapo, trapo2  # noqa: F401  (registration)
