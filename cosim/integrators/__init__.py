"""Integration methods.  ``make_integrator(model, "generalized-alpha", rtol=...)``."""
from .._registry import load_symbol
from ..errors import UnknownMethodError
from .base import STAT_KEYS, Integrator, MultibodyIntegrator

# name -> "module:Class" relative to this package; imported on first use so a
# method under construction never breaks the others.
METHOD_REGISTRY = {
    "generalized-alpha": ".generalized_alpha:GeneralizedAlpha",
    "generalized-alpha-i2": ".generalized_alpha_i2:GeneralizedAlphaIndex2",
    "bdf": ".bdf:BDFIndex3",
    "bdf-i2": ".bdf:BDFIndex2",
    "bdf-i1": ".bdf:BDFIndex1",
    "dopri5": ".explicit:DormandPrince",
    "rk4": ".explicit:RK4",
    "rkc-penalty": ".rkc:RKCPenalty",
    "state-transition": ".state_transition:StateTransition",
    "local-index1": ".local_index1:LocalEquivalentIndex1",
    "spark": ".symplectic:PreadjustedSPARK",
    "block-lstable": ".block:LStableBlock",
}


def method_class(name):
    if name not in METHOD_REGISTRY:
        raise UnknownMethodError(
            f"unknown method {name!r} (available: {', '.join(available_methods())})")
    try:
        return load_symbol(METHOD_REGISTRY[name], package=__name__)
    except (ImportError, AttributeError) as exc:
        raise UnknownMethodError(f"method {name!r} is not available: {exc}") from None


def available_methods():
    names = []
    for name, spec in METHOD_REGISTRY.items():
        try:
            load_symbol(spec, package=__name__)
        except (ImportError, AttributeError):
            continue
        names.append(name)
    return names


def make_integrator(model, method, **options):
    return method_class(method)(model, **options)


__all__ = ["STAT_KEYS", "Integrator", "MultibodyIntegrator", "METHOD_REGISTRY",
           "available_methods", "make_integrator", "method_class"]
