"""Lazy name → class registries (a broken optional module never breaks import)."""
import importlib


def load_symbol(spec, package=None):
    """Import ``"module:Name"`` (module may be relative to ``package``)."""
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name, package=package)
    return getattr(module, attr)


def user_class_spec(name):
    """True for ``package.module:ClassName`` specs of user-defined classes."""
    return ":" in name
