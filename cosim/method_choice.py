"""The default integration method: one rule, used by ``Simulation``, specs and
scenarios, ``cosim simulate``, the FMU builder and the ROS node.  An explicit
method always wins; ``"auto"`` (or no method) asks for this rule.

The rule (measured with ``benchmarks/work_precision.py --all-methods --quick``,
``--models andrews crank_slider``, ``benchmarks/driven_loop.py`` and
``benchmarks/fixed_step_default.py``;
docs/methods/index.md has the tables and commands):

* LTI state space: ``state-transition`` (exact zero-order hold);
* other first-order ODEs: ``dopri5``;
* multibody, **fixed step** ``h``: ``rk4`` when it is stable at h — h·max|λ| <= 2,
  λ the eigenvalues of the linearisation at the initial state
  (:func:`largest_rate`) — else ``generalized-alpha`` (implicit and numerically
  damped: stable at a fixed h on stiff models).  Measured with
  ``benchmarks/fixed_step_default.py`` (h 0.25-10 ms, inputs 0.1): where rk4 is
  stable its error is 10^3-10^7 times smaller than generalized-alpha's at a
  similar or lower cost per step (panda at 1 ms: 3.2e-06 against 9.8e-02;
  ur5, three_link, pendulum, two_link alike); on a stiff model (three_link with
  joint damping 20, h·max|λ| = 5.3 at 2 ms; crank_slider; andrews) rk4 is
  refused and generalized-alpha runs.  ``fixed_step=True`` (h unknown), a
  model that cannot be made here, or one above ``MAX_ESTIMATED_COORDINATES``
  coordinates (the estimate, O(n_q⁴), is not made): ``generalized-alpha``.  A
  robot whose Python equations call pinocchio is evaluated through its compiled
  kernels where a compiled run can happen (numba present, backend not
  "python"), so the estimate imports nothing such a run does not;
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

So a multibody plant runs ``dopri5`` unless a fixed step is given (then rk4 where it
is stable at that step, else generalized-alpha), driven or not.
"""
from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager

from .errors import CosimError

AUTO = "auto"

# RK4's stability function R(z) = 1 + z + z²/2 + z³/6 + z⁴/24 has |R| <= 1 on the
# negative real axis down to z = -2.785 and on the imaginary axis up to |z| = 2.828;
# the half-disc |z| <= 2.6 in Re z <= 0 lies inside (its nearest boundary point, at
# |z| = 2.62).  The rule keeps a margin: rk4 when h·max|λ| <= 2 (the linearisation is
# taken at one state).
RK4_STABLE_H_LAMBDA = 2.0

# The estimate costs 2n_q + 1 solves of eq. 10 (a dense LU of size n_q + m each) and
# the eigenvalues of a 2n_q × 2n_q matrix, O(n_q⁴).  benchmarks/chain_model.py chains
# (python, on a loaded machine): n_q = 63 (m = 42) 43-61 ms, n_q = 96 (m = 64) 0.09-2.6 s,
# n_q = 258 (m = 172) 87 s.  Above this size it is not made (set-up stays well under a
# second, with nothing to announce) and the rule takes generalized-alpha.
MAX_ESTIMATED_COORDINATES = 64


@contextmanager
def _compiled_equations(model, backend):
    """While the estimate runs: M and Q of a model whose Python equations have a
    reference implementation of their own (a URDF robot: pinocchio) are the compiled
    kernels a compiled run binds, where such a run can happen (numba present,
    ``backend`` not "python", the kernels describing the model), so the estimate
    imports nothing that run does not (cosim.models.urdf); the setting is restored."""
    use = getattr(model, "use_compiled_kernels", None)
    if use is not None and str(backend).strip().lower() != "python":
        from . import jit
        from .integrators.model_functions import compiled_functions, compiled_unsupported
        if jit.numba_available() and compiled_unsupported(model) is None:
            compiled_functions(model)   # loaded from the cache (or compiled) as the run binds them
            previous = use(True)
            try:
                yield
            finally:
                use(previous)
            return
    yield


def too_large_to_estimate(model):
    """Whether :func:`largest_rate` does not estimate ``model`` (more than
    ``MAX_ESTIMATED_COORDINATES`` coordinates)."""
    return model.n_q > MAX_ESTIMATED_COORDINATES


def largest_rate(model, t=0.0, u=None, backend="auto"):
    """max |λ| (1/s) of the Jacobian of y' = (v, q''(q, v)) at the model's initial
    state (q'' of seed 000 eq. 10, the index-1 form rk4 integrates; forward
    differences, then the eigenvalues of the 2n_q × 2n_q matrix).  Directions off
    the constraints add zero eigenvalues; a stiff spring, damper or constraint a
    large one.  inf when the accelerations cannot be computed there, or when the
    model is too large to estimate (:func:`too_large_to_estimate`; nothing is
    evaluated).  ``backend``: the run's requested backend (a URDF robot is evaluated
    through its compiled kernels unless it is "python")."""
    import numpy as np

    from .derivatives import forward_jacobian
    from .integrators.common import consistent_accelerations
    def rhs(y):
        return np.concatenate([y[n:], consistent_accelerations(model, t, y[:n], y[n:], u)[0]])

    try:
        if too_large_to_estimate(model):
            return float("inf")
        q0, v0 = (np.asarray(a, dtype=float) for a in model.initial_state())
        n = q0.size
        u = model.default_inputs() if u is None else np.asarray(u, dtype=float)
        with _compiled_equations(model, backend):
            jac = forward_jacobian(rhs, np.concatenate([q0, v0]))
        rates = np.abs(np.linalg.eigvals(jac))
    except Exception:   # noqa: BLE001 — the model fails here: no estimate (the run says why)
        return float("inf")
    return float(np.max(rates)) if rates.size and np.all(np.isfinite(rates)) else float("inf")


def _plant(model, params=None):
    """A model instance (with ``params``), or its class when it cannot be made."""
    from .models import Model, model_class
    from .models.base import MultibodyModel
    if isinstance(model, Model):
        return model
    if isinstance(model, Mapping) and "urdf_text" not in model:
        return MultibodyModel   # {"urdf": path} not read yet: a robot, no closed loops known
    cls = model if isinstance(model, type) else model_class(model)
    for kwargs in ((dict(params),) if params else ()) + ({},):
        try:
            return cls(**kwargs)
        except (CosimError, TypeError, ValueError):   # e.g. a block's parameter among params
            pass
    return cls


def fixed_step_size(fixed_step):
    """h in s of ``fixed_step`` (a positive finite number), else None (False, None,
    True for a fixed step of unknown size, or a value the caller will refuse)."""
    import math
    from numbers import Real
    if isinstance(fixed_step, bool) or not isinstance(fixed_step, Real):
        return None
    h = float(fixed_step)
    return h if math.isfinite(h) and h > 0.0 else None


def default_method_and_reason(model, *, fixed_step=False, driven=False, params=None,
                              backend="auto"):
    """(method, one-line reason) of the rule above for ``model`` (a name, a
    class, an instance or a ``{"urdf_text": …}`` mapping; ``params`` for a name or
    class).  ``fixed_step``: False or None (adaptive), the step h in s, or True (a
    fixed step of unknown size).  ``backend``: the run's requested backend (for
    the estimate, :func:`largest_rate`)."""
    from .models.lti import LTIModel
    plant = _plant(model, params)
    cls = plant if isinstance(plant, type) else type(plant)
    if cls.kind != "multibody":
        if issubclass(cls, LTIModel):
            return "state-transition", "an LTI model: exact zero-order hold"
        return "dopri5", "a first-order ODE"
    if fixed_step is not None and fixed_step is not False:
        h = fixed_step_size(fixed_step)
        if h is None or isinstance(plant, type):
            return "generalized-alpha", "multibody, fixed step (its stiffness not known here)"
        if too_large_to_estimate(plant):
            return "generalized-alpha", (f"multibody, fixed step h={h:g}: too large to estimate "
                                         f"at set-up: n_q = {plant.n_q} > "
                                         f"{MAX_ESTIMATED_COORDINATES}")
        z = h * largest_rate(plant, backend=backend)
        if z <= RK4_STABLE_H_LAMBDA:
            return "rk4", (f"multibody, fixed step h={h:g}: rk4 stable there "
                           f"(h·max|λ| = {z:.2g} <= {RK4_STABLE_H_LAMBDA:g})")
        return "generalized-alpha", (f"multibody, fixed step h={h:g}: stiff for rk4 "
                                     f"(h·max|λ| = {z:.2g} > {RK4_STABLE_H_LAMBDA:g})")
    if driven:
        return "dopri5", "multibody, adaptive step, inputs changing at every communication step"
    return "dopri5", "multibody, adaptive step, inputs held"


def default_method(model, *, fixed_step=False, driven=False, params=None, backend="auto"):
    """The method of :func:`default_method_and_reason`."""
    return default_method_and_reason(model, fixed_step=fixed_step, driven=driven, params=params,
                                     backend=backend)[0]


def wants_default(method):
    """Whether ``method`` asks for the rule (None or "auto")."""
    return method is None or method == AUTO


def resolve_method(method, model, *, fixed_step=False, driven=False, params=None,
                   backend="auto"):
    """``method`` as given, or the rule's choice when it is None or "auto"."""
    if wants_default(method):
        return default_method(model, fixed_step=fixed_step, driven=driven, params=params,
                              backend=backend)
    return str(method)
