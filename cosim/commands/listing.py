"""``cosim models`` and ``cosim methods``: what exists, one line each."""
from .._registry import load_symbol
from ..integrators import METHOD_REGISTRY
from ..models import MODEL_REGISTRY


def _list(registry, package):
    for name, spec in registry.items():
        try:
            cls = load_symbol(spec, package=package)
        except (ImportError, AttributeError):
            continue
        print(f"{name:26s} {cls.description}")
    return 0


def register(sub):
    p = sub.add_parser("models", help="list the model library")
    p.set_defaults(func=lambda args: _list(MODEL_REGISTRY, "cosim.models"))
    p = sub.add_parser("methods", help="list the integration methods")
    p.set_defaults(func=lambda args: _list(METHOD_REGISTRY, "cosim.integrators"))
