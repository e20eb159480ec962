"""``cosim warmup [MODEL …]``: compile the numba kernels ahead of time.

A first run of a model on the compiled backend compiles its kernels (tens of
seconds) and caches them on disk; warming up does that once, e.g. in a
container build or before a real-time session, and prints what it did.
"""
import sys
import time

from ..errors import CosimError


def warm_up(model_names=None):
    """Compile (or load from the disk cache) every compiled method for the
    given library models (default: all with kernels).  Returns rows of
    (model, method, seconds, backend)."""
    from ..integrators import COMPILED_REGISTRY, make_integrator, resolve_backend
    from ..models import available_models, load_model
    names = list(model_names) if model_names else available_models()
    models = [(name, load_model(name)) for name in names]
    if not model_names:
        models += _urdf_robots()
    rows = []
    for name, model in models:
        for method in COMPILED_REGISTRY:
            if resolve_backend(method, model, "auto") != "numba":
                if model_names:
                    rows.append((name, method, 0.0, "python (no kernels)"))
                continue
            t0 = time.perf_counter()
            integ = make_integrator(model, method, backend="numba", h=1e-4)
            integ.initialize()
            integ.advance(1e-4)        # compiles (or loads) the step loop
            integ.restart()            # … and the restart path (same entry)
            rows.append((name, method, time.perf_counter() - t0, "numba"))
    return rows


def _urdf_robots():
    """URDF robots share one kernel set (cosim.models.rigid_body): warming the
    project's two-link URDF compiles it for every robot (needs pinocchio)."""
    from pathlib import Path  # noqa: PLC0415
    try:
        from ..models.urdf import load_urdf  # noqa: PLC0415
        cls = load_urdf(Path(__file__).resolve().parents[1] / "data" / "urdf" / "two_link.urdf")
    except CosimError:  # pinocchio not installed: no URDF robots to warm
        return []
    return [("urdf robots", cls())]


def _cmd(args):
    from ..jit import numba_available, unavailable_reason
    if not numba_available():
        raise CosimError(f"numba is not importable ({unavailable_reason()}); "
                         "install the extra: pip install 'cosim[fast]'")
    for model, method, seconds, backend in warm_up(args.models):
        print(f"{model:>24s}  {method:<20s} {backend:<20s} {seconds:7.2f} s")
    sys.stdout.flush()
    return 0


def register(sub):
    p = sub.add_parser("warmup", help="compile the numba kernels of library models ahead of time")
    p.add_argument("models", nargs="*", metavar="MODEL", help="library models (default: all with kernels)")
    p.set_defaults(func=_cmd)
