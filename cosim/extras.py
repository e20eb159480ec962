"""Optional dependencies and the extras that bring them (``pyproject.toml``).

A feature whose extra is missing says so in one line naming the extra and the
pip command (:class:`~cosim.errors.MissingExtraError`, a :class:`CosimError` and
an :class:`ImportError`); the ``cosim`` command prints it as ``cosim: error: …``
and exits with status 2.  This module imports nothing heavy.
"""
from __future__ import annotations

import importlib

from ._version import install_hint
from .errors import MissingExtraError

# top-level module -> the extra that installs it
EXTRA_OF = {
    "numba": "fast", "llvmlite": "fast",
    "pythonfmu": "fmu", "fmpy": "fmu", "libcosimpy": "fmu",
    "rclpy": "ros", "rcl_interfaces": "ros", "sensor_msgs": "ros", "std_msgs": "ros",
    "std_srvs": "ros", "rosgraph_msgs": "ros", "diagnostic_msgs": "ros",
    "builtin_interfaces": "ros",
    "pinocchio": "robots", "example_robot_data": "robots",
    "dask": "sweep", "distributed": "sweep", "pyarrow": "sweep",
    "pandas": "pandas",
    "sphinx": "docs", "myst_parser": "docs",
}


def message(module, what, extra=None):
    """``WHAT needs the 'EXTRA' extra (MODULE is not installed): pip install …``."""
    top = str(module).split(".")[0]
    extra = extra or EXTRA_OF.get(top, top)
    return f"{what} needs the '{extra}' extra ({top} is not installed): {install_hint(extra)}"


def require(module, what, extra=None):
    """Import ``module`` or raise :class:`MissingExtraError` naming its extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = exc.name or module
        top = missing.split(".")[0]
        if top not in EXTRA_OF and top != module.split(".")[0]:
            raise  # a dependency of a dependency is broken: not a missing extra
        raise MissingExtraError(message(module, what, extra or EXTRA_OF.get(top))) from None


def missing_extra(exc, what):
    """The one-line message for an ImportError of a known optional module, else None."""
    if isinstance(exc, MissingExtraError):
        return str(exc)
    name = getattr(exc, "name", None)
    if not name or name.split(".")[0] not in EXTRA_OF:
        return None
    return message(name, what)
