"""The default integration method: one rule, used by ``Simulation``, specs and
scenarios, ``cosim simulate``, the FMU builder and the ROS node.  An explicit
method always wins; ``"auto"`` (or no method) asks for this rule.

The rule (measured with ``benchmarks/work_precision.py --all-methods --quick``,
``--models andrews crank_slider`` and ``benchmarks/driven_loop.py``;
docs/methods/index.md has the tables and commands):

* LTI state space: ``state-transition`` (exact zero-order hold);
* other first-order ODEs: ``dopri5``;
* multibody, **fixed step** (``h`` given): ``generalized-alpha`` — implicit and
  numerically damped (stable at a fixed h on stiff models: real time), one
  Newton iteration per step with the LU kept;
* multibody, adaptive, **driven** (the inputs change at every communication step:
  an FMU, the ROS node, discrete blocks or input signals in the spec):
  ``dopri5`` — the least steps and the least error of generalized-alpha, bdf and
  dopri5 on pendulum, two_link, crank_slider, andrews, ur5 and panda
  (``benchmarks/driven_loop.py --models … --backend auto``, rtol 1e-6: pendulum
  500 steps against generalized-alpha's 707 and bdf's 505; crank_slider
  14 691 against 36 880 and 63 449; andrews (30 ms) 94 against 6150 and 696;
  ur5 501 against 3076 and 553). A new input costs dopri5 one derivative (its
  first stage, FSAL, is recomputed: 7 per step, not 6); bdf solves eq. 10 four
  times to carry its history across it;
* multibody, adaptive, inputs held (``cosim simulate``, a spec without blocks or
  signals, ``Simulation`` without blocks): ``dopri5`` (with constraint
  projection) — the least wall time with err/rtol <= 10 in 14 of 15 rows (andrews,
  pendulum, crank_slider, two_link, ur5 at rtol 1e-4, 1e-6, 1e-8; the exception:
  crank_slider at 1e-4, generalized-alpha), 2-8 times less than bdf, which is
  the method to ask for on a stiff model.

So a multibody plant runs ``dopri5`` unless a fixed step is given, driven or not.
"""
from __future__ import annotations

from collections.abc import Mapping

from .errors import CosimError

AUTO = "auto"


def _plant(model):
    """A model instance, or its class when it cannot be made with defaults."""
    from .models import Model, model_class
    from .models.base import MultibodyModel
    if isinstance(model, Model):
        return model
    if isinstance(model, Mapping) and "urdf_text" not in model:
        return MultibodyModel   # {"urdf": path} not read yet: a robot, no closed loops known
    cls = model if isinstance(model, type) else model_class(model)
    try:
        return cls()
    except (CosimError, TypeError, ValueError):
        return cls


def default_method_and_reason(model, *, fixed_step=False, driven=False):
    """(method, one-line reason) of the rule above for ``model`` (a name, a
    class, an instance or a ``{"urdf_text": …}`` mapping)."""
    from .models.lti import LTIModel
    plant = _plant(model)
    cls = plant if isinstance(plant, type) else type(plant)
    if cls.kind != "multibody":
        if issubclass(cls, LTIModel):
            return "state-transition", "an LTI model: exact zero-order hold"
        return "dopri5", "a first-order ODE"
    if fixed_step:
        return "generalized-alpha", "multibody, fixed step"
    if driven:
        return "dopri5", "multibody, adaptive step, inputs changing at every communication step"
    return "dopri5", "multibody, adaptive step, inputs held"


def default_method(model, *, fixed_step=False, driven=False):
    """The method of :func:`default_method_and_reason`."""
    return default_method_and_reason(model, fixed_step=fixed_step, driven=driven)[0]


def wants_default(method):
    """Whether ``method`` asks for the rule (None or "auto")."""
    return method is None or method == AUTO


def resolve_method(method, model, *, fixed_step=False, driven=False):
    """``method`` as given, or the rule's choice when it is None or "auto"."""
    if wants_default(method):
        return default_method(model, fixed_step=fixed_step, driven=driven)
    return str(method)
