"""scipy's LAPACK functions (``scipy.linalg.lapack.dgetrf`` …) without importing
``scipy.linalg``.

The initial-condition analysis of every multibody start calls three LAPACK
routines (``dgetrf``/``dgetrs`` for its projections and accelerations, ``dgeqp3``
for the constraint rank).  Importing ``scipy.linalg`` for them takes ~0.15 s
(it imports most of numpy's optional submodules through scipy's array-API
layer): about a third of a warm ``Simulation(...)``.  The functions themselves
live in one compiled extension, ``scipy.linalg._flapack``, which needs only numpy;
:func:`function` loads that extension alone (a few ms) and registers it under
its own name, so a later ``import scipy.linalg`` uses the same module and every
call is the same function on the same library as ``scipy.linalg.lapack``'s —
the same numbers.  Where the extension is not found as expected (another scipy
layout), it imports ``scipy.linalg.lapack`` as before.
"""
import sys

_NAME = "scipy.linalg._flapack"
_module = []   # the loaded extension, once


def _load_alone():
    """``scipy.linalg._flapack`` loaded from its file without running
    ``scipy/linalg/__init__.py``; None where it is not a single extension file."""
    import importlib.machinery  # noqa: PLC0415
    import importlib.util  # noqa: PLC0415
    import os  # noqa: PLC0415

    import scipy  # noqa: PLC0415  (light: numba imports it too)
    folder = os.path.join(os.path.dirname(scipy.__file__), "linalg")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_flapack" + suffix)
        if os.path.isfile(path):
            break
    else:
        return None
    spec = importlib.util.spec_from_file_location(_NAME, path)
    if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[_NAME] = module   # ``import scipy.linalg`` later finds and keeps it
    return module


def _flapack():
    if not _module:
        module = sys.modules.get(_NAME)
        if module is None and "scipy.linalg" not in sys.modules:
            try:
                module = _load_alone()
            except Exception:  # noqa: BLE001 - any surprise: scipy's own import below
                module = None
        if module is None:
            from scipy.linalg import lapack  # noqa: PLC0415
            module = lapack
        _module.append(module)
    return _module[0]


def function(name):
    """The LAPACK wrapper ``name`` (e.g. ``"dgetrf"``) of ``scipy.linalg.lapack``."""
    return getattr(_flapack(), name)
