"""Lazy name → class registries (a broken optional module never breaks import)."""
import importlib


def load_symbol(spec, package=None):
    """Import ``"module:Name"`` (module may be relative to ``package``).  A module part
    that names a file (``x.py``, a path) is refused before any import: ``import x.py``
    would run ``x`` first."""
    module_name, _, attr = spec.partition(":")
    if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
        raise ImportError(f"{spec!r} names a file, not an importable module (nothing was imported)")
    module = importlib.import_module(module_name, package=package)
    return getattr(module, attr)


def user_class_spec(name):
    """True for ``package.module:ClassName`` specs of user-defined classes."""
    return ":" in name
