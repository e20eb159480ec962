"""Integration methods.  ``make_integrator(model, "generalized-alpha", rtol=...)``."""
from .. import jit
from .._registry import load_symbol
from ..errors import UnknownMethodError
from .base import STAT_KEYS, Integrator, MultibodyIntegrator

# name -> "module:Class" relative to this package; imported on first use so a
# method under construction never breaks the others.
METHOD_REGISTRY = {
    "generalized-alpha": ".generalized_alpha:GeneralizedAlpha",
    "generalized-alpha-i2": ".generalized_alpha:GeneralizedAlphaIndex2",
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


# every method has one implementation, run compiled (numba) or as plain Python; its
# module's ``supports(model)`` says why the compiled one cannot run a model and its
# ``compiled_entry()`` compiles (or loads) it once per machine
ONE_IMPLEMENTATION = frozenset(METHOD_REGISTRY)
COMPILED_REGISTRY = METHOD_REGISTRY


def compiled_unavailable(method, model):
    """Why ``method`` cannot run ``model`` on the numba backend (None: it can)."""
    if not jit.numba_available():
        return f"numba is not importable ({jit.unavailable_reason()})"
    # each method's module says which models it runs compiled (supports(model))
    supports = load_symbol(COMPILED_REGISTRY[method].split(":")[0] + ":supports", package=__name__)
    return supports(model)


def compile_method(method):
    """Compile (or load from the disk cache) a one-implementation method's compiled
    entry, independent of any model; returns its module's name (methods sharing an
    entry, e.g. generalized-alpha and -i2, return the same)."""
    module = METHOD_REGISTRY[method].split(":")[0]
    load_symbol(module + ":compiled_entry", package=__name__)()
    try:   # the FMU binary's C entry (methods that have one)
        native_step = load_symbol(module + ":compiled_native_step", package=__name__)
    except AttributeError:
        native_step = None
    if native_step is not None:
        native_step()
    return module


def resolve_backend(method, model, backend="auto"):
    """The backend a run of ``method`` on ``model`` gets: "numba" or "python"
    (with an announcement when "numba" was asked for and cannot run)."""
    backend = jit.check_backend(backend)
    if backend == "python":
        return "python"
    reason = compiled_unavailable(method, model)
    if reason is None:
        return "numba"
    return jit.fall_back(backend, reason)


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


def make_integrator(model, method, backend="python", **options):
    """An integrator of ``method`` for ``model``; ``backend`` "python" (the
    reference, default here), "numba" or "auto" (see :mod:`cosim.jit`)."""
    cls = method_class(method)
    return cls(model, backend=resolve_backend(method, model, backend), **options)


__all__ = ["STAT_KEYS", "Integrator", "MultibodyIntegrator", "METHOD_REGISTRY", "COMPILED_REGISTRY",
           "ONE_IMPLEMENTATION", "compile_method", "compiled_unavailable", "resolve_backend",
           "available_methods", "make_integrator", "method_class"]
