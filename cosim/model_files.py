"""User models from a file named on the command line: ``path/to/file.py:Class``.

A URDF file ``robot.urdf`` (:mod:`cosim.models.urdf`) is read the same way.
Only the ``cosim`` CLI (whose arguments the user types) loads files; specs
from scenario files, FMU configurations and ROS parameters go through
:func:`cosim.models.model_class`, which refuses file paths.  Loading imports
exactly the named file (as a module of its own, ``cosim_user.<stem>``) and
nothing else.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import zlib

from .errors import InvalidInputError, UnknownModelError


def is_file_spec(spec):
    """True for ``something.py:Class`` (a path; the module part may contain '/' or '\\')."""
    if not isinstance(spec, str) or ":" not in spec:
        return False
    path = spec.rpartition(":")[0]
    return path.endswith(".py")


def load_model_file(spec):
    """The Model subclass ``Class`` defined in ``file.py`` of ``file.py:Class``."""
    from .models import Model

    path, _, attr = spec.rpartition(":")
    if not attr.isidentifier():
        raise UnknownModelError(f"{spec!r}: expected path/to/file.py:ClassName")
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise UnknownModelError(f"cannot load user model {spec!r}: no file {full!r}")
    stem = os.path.splitext(os.path.basename(full))[0]
    name = f"cosim_user.{stem if stem.isidentifier() else 'model'}_{zlib.crc32(full.encode()):08x}"
    module = sys.modules.get(name)
    if module is None or getattr(module, "__file__", None) != full:
        loader_spec = importlib.util.spec_from_file_location(name, full)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module  # dataclasses and pickling look modules up by name
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    cls = getattr(module, attr, None)
    if cls is None:
        found = sorted(k for k, v in vars(module).items()
                       if isinstance(v, type) and issubclass(v, Model) and v.__module__ == name)
        raise UnknownModelError(f"{full!r} defines no {attr!r} (Model classes there: "
                                f"{', '.join(found) or 'none'})")
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise UnknownModelError(f"{spec!r} is not a cosim Model subclass")
    return cls


def resolve_cli_model(spec, frames=(), position_limits=None):
    """What the CLI passes on to Simulation/check_model: a class for a file spec
    (``file.py:Class`` or a URDF file ``robot.urdf``, with its ``frames`` and
    ``position_limits`` options; None: the default, stops on), else the spec."""
    from .models import is_urdf_spec

    if isinstance(spec, str) and is_urdf_spec(spec):
        from .models.urdf import load_urdf
        return load_urdf(spec, frames, True if position_limits is None else bool(position_limits))
    if frames or position_limits is not None:
        raise InvalidInputError(f"--frame/--[no-]position-limits apply to a robot from URDF (ROBOT.urdf), "
                                f"not to {spec!r}")
    return load_model_file(spec) if is_file_spec(spec) else spec
