"""cosim — co-simulation core: multibody DAE, ODE and LTI integrators behind
communication steps with zero-order-hold inputs (numpy + scipy only)."""
from . import errors
from .errors import CosimError
from .integrators import available_methods, make_integrator
from .models import available_models, load_model
# the functions shadow their modules' names on purpose: cosim.run(spec), cosim.sweep(...)
from .run import RunResult, run, simulate  # noqa: E402
from .spec import SimulationSpec, load_spec  # noqa: E402
from .sweep import sweep  # noqa: E402  (imports dask only when called)

from ._version import DISTRIBUTION, __version__  # noqa: E402


def __getattr__(name):  # lazy: the stepper pulls in more than the core needs
    if name in ("Simulation",):
        from .simulation import Simulation
        return Simulation
    if name == "check_model":
        from .model_check import check_model
        return check_model
    raise AttributeError(f"module 'cosim' has no attribute {name!r}")


__all__ = ["CosimError", "Simulation", "SimulationSpec", "RunResult", "check_model", "load_spec", "run",
           "simulate", "sweep", "available_methods", "available_models", "errors",
           "load_model", "make_integrator"]
