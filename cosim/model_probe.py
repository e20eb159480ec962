"""Probe a model once at set-up (issue 14): every term the integrators and the
co-simulation call is evaluated at the given state with float overflow raised,
its shape compared with the model's declared sizes, and its values checked
finite.  A parameter of 1e300 (or a user model returning the wrong shape) then
fails at ``Simulation(...)``/``set_parameter`` with one error naming the model,
the method that failed and the time -- not later as an OverflowError, a NaN
state or a numpy broadcasting error deep inside Newton.

Multibody terms M, Q, C, C_q, C_t, γ (seed 000 eq. 1, 5), first-order
f(t, x, u) (seed 001 eq. 1), outputs and switching functions for both.
"""
from __future__ import annotations

import numpy as np

from .errors import InvalidInputError, ModelDefinitionError, SingularMatrixError


def _terms(model, t, y, u):
    n_out, n_ev = len(model.outputs), len(model.events)
    if model.kind == "multibody":
        q, v = model.split(y)
        n, m = model.n_q, model.n_c
        yield "mass(q, t)", lambda: model.mass(q, t), (n, n)
        yield "forces(q, v, t, u)", lambda: model.forces(q, v, t, u), (n,)
        if m:
            yield "constraints(q, t)", lambda: model.constraints(q, t), (m,)
            yield "constraint_jacobian(q, t)", lambda: model.constraint_jacobian(q, t), (m, n)
            yield "constraint_dt(q, t)", lambda: model.constraint_dt(q, t), (m,)
            yield "gamma(q, v, t)", lambda: model.gamma(q, v, t), (m,)
    else:
        yield "rhs(t, x, u)", lambda: model.rhs(t, y, u), (model.n_y,)
    yield "output_values(t, y, u)", lambda: model.output_values(t, y, u), (n_out,)
    if n_ev:
        yield "event_functions(t, y, u)", lambda: model.event_functions(t, y, u), (n_ev,)


def probe_model(model, t, y, u, where="the initial state"):
    """Evaluate each term once at ``(t, y, u)``; raise a clear error on overflow
    (:class:`InvalidInputError`: the parameters or the state are out of range) or on a
    wrong shape / non-finite value (:class:`ModelDefinitionError`, worded as
    :func:`cosim.ic.check_terms`)."""
    label = f"model {model.name!r}"
    for name, call, shape in _terms(model, t, y, u):
        try:
            with np.errstate(over="raise"):
                value = np.asarray(call(), dtype=float)
        except (OverflowError, FloatingPointError, ZeroDivisionError) as exc:
            raise InvalidInputError(
                f"{label}: {name} overflows at t={t!r} ({where}; {type(exc).__name__}: {exc}): "
                f"parameters or state out of range") from None
        except (TypeError, ValueError) as exc:
            if isinstance(exc, InvalidInputError):
                raise
            raise ModelDefinitionError(f"{label}: {name} at t={t!r} ({where}) does not return "
                                       f"numbers ({type(exc).__name__}: {exc})") from None
        if value.shape != shape:
            raise ModelDefinitionError(f"{label}: {name} returned shape {value.shape} at t={t!r}, "
                                       f"expected {shape} ({where})")
        if not np.all(np.isfinite(value)):
            raise ModelDefinitionError(f"{label}: {name} returned non-finite values at t={t!r} "
                                       f"({where}): {value.ravel()[:6].tolist()} -- parameters "
                                       f"or state out of range?")


def probe_parameters(model, t, y, u, where="the current state"):
    """New parameter values checked against the state a run continues from (a tunable
    change after the start, a restored state that carries other values): every term as
    :func:`probe_model`, and for a constrained multibody model the matrix every method
    solves with, [[M, C_qᵀ], [C_q, 0]] (seed 000 eq. 10), regular there -- else the first
    step would fail on it (a mass of 1e12 against unit constraint rows).  ``model``: the
    model the integrator works on (its kept constraint rows)."""
    probe_model(model, t, y, u, where)
    if model.kind == "multibody" and (model.n_c or len(getattr(model, "nonholonomic_names", ()))):
        from .integrators.common import consistent_accelerations  # noqa: PLC0415
        q, v = model.split(np.asarray(y, dtype=float))
        try:
            consistent_accelerations(model, t, q, v, u)
        except SingularMatrixError as exc:
            raise InvalidInputError(f"model {model.name!r}: {exc} ({where})") from None

