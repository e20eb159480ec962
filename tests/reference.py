"""Independent reference solutions for the test suite.

Computed WITHOUT any cosim integrator: scipy ``solve_ivp`` (DOP853 or Radau,
rtol = atol = 1e-12 by default) on the index-1 formulation

    q' = v,   [[M, C_qᵀ], [C_q, 0]] [v'; λ] = [Q; γ]

which uses only the model equations (M, Q, C_q, γ of seed 000 eq. 1-5).
Position/velocity drift of this formulation stays at the 1e-12 level over
the short horizons used in tests (checked where it matters).

Import from a test file (pytest puts ``tests/`` on ``sys.path`` because
``tests/`` has no ``__init__.py``)::

    from reference import andrews_reference, index1_reference, index1_trajectory

Results are cached in memory (``functools.lru_cache``) per model name,
parameter set, horizon, tolerance and input, so repeated use is free.
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.linalg as sla
from scipy.integrate import solve_ivp

from cosim.models import MultibodyModel, Parameter, Signal, load_model


class Oscillator(MultibodyModel):
    """q'' = −ω² q (M = 1, ω = 2) from q = 1 at rest: the closed-form flow
    q = q0 cos ωt + v0/ω sin ωt (tests/test_fixed_step.py, benchmarks/fixed_step_accuracy.py)."""

    name = "oscillator"
    coordinates = ("x",)
    parameters = (Parameter("omega", 2.0, "rad/s"),)

    def mass(self, q, t):
        return np.eye(1)

    def forces(self, q, v, t, u):
        return np.array([-self.params["omega"] ** 2 * q[0]])

    def initial_state(self):
        return np.array([1.0]), np.array([0.0])


class ForcedOscillator(MultibodyModel):
    """x'' = −40 x − 0.5 x' + u from x = 0.1 at rest, M and Q only, one input (an input
    jump: tests/test_block.py, benchmarks/input_jump.py)."""

    name = "forced_oscillator"
    coordinates = ("x",)
    inputs = (Signal("force", "N"),)

    def mass(self, q, t):
        return np.eye(1)

    def forces(self, q, v, t, u):
        return np.array([-40.0 * q[0] - 0.5 * v[0] + u[0]])

    def initial_state(self):
        return np.array([0.1]), np.array([0.0])


def index1_rhs(model, u):
    """f(t, y) of the index-1 ODE for a multibody ``model`` with inputs ``u``."""
    n = model.n_q
    u = np.asarray(u, dtype=float)

    def rhs(t, y):
        q, v = y[:n], y[n:]
        M = model.mass(q, t)
        Q = model.forces(q, v, t, u)
        if model.n_c == 0:
            a = np.linalg.solve(M, Q)
        else:
            Cq = model.constraint_jacobian(q, t)
            m = Cq.shape[0]
            K = np.zeros((n + m, n + m))
            K[:n, :n] = M
            K[:n, n:] = Cq.T
            K[n:, :n] = Cq
            a = sla.solve(K, np.concatenate([Q, model.gamma(q, v, t)]))[:n]
        return np.concatenate([v, a])

    return rhs


def _key(model, t_end, rtol, atol, u, method):
    params = tuple(sorted(model.params.items()))
    atol = tuple(float(x) for x in np.ravel(atol)) if np.ndim(atol) else float(atol)
    uu = tuple(float(x) for x in (model.default_inputs() if u is None else np.ravel(u)))
    return (model.name, params, float(t_end), float(rtol), atol, uu, method)


@functools.lru_cache(maxsize=64)
def _solve_cached(name, params, t_end, rtol, atol, u, method):
    model = load_model(name, **dict(params))
    y0 = model.initial_y()
    if model.kind == "multibody":
        rhs = index1_rhs(model, np.array(u))
    else:
        uu = np.array(u)
        rhs = lambda t, x: model.rhs(t, x, uu)  # noqa: E731
    atol = np.array(atol) if isinstance(atol, tuple) else atol
    sol = solve_ivp(rhs, (0.0, t_end), y0, method=method, rtol=rtol, atol=atol,
                    dense_output=True)
    if not sol.success:
        raise RuntimeError(f"reference solve failed for {name}: {sol.message}")
    return sol


def index1_solution(model, t_end, rtol=1e-12, atol=1e-12, u=None, method="DOP853"):
    """The cached scipy OdeResult (with ``.sol`` dense output) from the model's
    initial state over [0, t_end].  ``model`` is a library model instance or
    name; inputs ``u`` are held constant (default: the model's defaults)."""
    if isinstance(model, str):
        model = load_model(model)
    return _solve_cached(*_key(model, t_end, rtol, atol, u, method))


def index1_reference(model, t_end, rtol=1e-12, atol=1e-12, u=None, method="DOP853"):
    """(q, v) at ``t_end`` for a multibody model (x for a first-order model)."""
    if isinstance(model, str):
        model = load_model(model)
    y = index1_solution(model, t_end, rtol, atol, u, method).y[:, -1].copy()
    if model.kind != "multibody":
        return y
    n = model.n_q
    return y[:n], y[n:]


def index1_trajectory(model, times, rtol=1e-12, atol=1e-12, u=None, method="DOP853"):
    """(Q, V) arrays of shape (len(times), n_q) from the dense output of the cached
    solution over [0, max(times)] (DOP853's 7th-order interpolant; the end
    point is the integrated value).  First-order models: X of shape (len(times), n)."""
    if isinstance(model, str):
        model = load_model(model)
    times = np.atleast_1d(np.asarray(times, dtype=float))
    t_end = float(times.max())
    sol = index1_solution(model, t_end, rtol, atol, u, method)
    Y = sol.sol(times).T
    Y[times == t_end] = sol.y[:, -1]
    if model.kind != "multibody":
        return Y
    n = model.n_q
    return Y[:, :n], Y[:, n:]


def held_input_trajectory(model, times, inputs, y0=None, rtol=1e-12, atol=1e-12, method="DOP853"):
    """(Q, V) of shape (len(times) − 1, n_q) at times[1:] of a multibody ``model`` (an
    instance or a name) under a zero-order-hold input: ``inputs[k]`` (the model's input
    vector) held over [times[k], times[k+1]], from ``y0`` (default: the model's initial
    state) at times[0].  One solve_ivp per held interval, each started from the end of
    the one before: the jumps of q'' at the input's changes are interval ends, never
    inside a step of the reference (not cached)."""
    if isinstance(model, str):
        model = load_model(model)
    times = np.asarray(times, dtype=float)
    if len(inputs) != len(times) - 1:
        raise ValueError(f"{len(times) - 1} held intervals need as many inputs, got {len(inputs)}")
    y = model.initial_y() if y0 is None else np.array(y0, dtype=float)
    out = []
    for k, u in enumerate(inputs):
        sol = solve_ivp(index1_rhs(model, u), (times[k], times[k + 1]), y, method=method,
                        rtol=rtol, atol=atol)
        if not sol.success:
            raise RuntimeError(f"held-input reference failed for {model.name} on interval {k}: {sol.message}")
        y = sol.y[:, -1]
        out.append(y)
    Y = np.array(out)
    n = model.n_q
    return Y[:, :n], Y[:, n:]


# -- named references ------------------------------------------------------------------
def andrews_reference(t_end=0.03):
    """(q, v) of Andrews' squeezer (default data, torque 0.033 N·m) at t_end.

    At t = 0.03 this agrees with the IVP test-set reference (PSIDE, tol 1e-14)
    to a relative 1e-8 in q and v (see tests/test_models.py)."""
    return index1_reference(load_model("andrews"), t_end)


def pendulum_reference(t_end, **params):
    """(q, v) of the Cartesian pendulum with the given parameters, zero inputs."""
    return index1_reference(load_model("pendulum", **params), t_end)


def two_link_reference(t_end, **params):
    """(q, v) of the two-link manipulator (default: seed 004 set), zero torques."""
    return index1_reference(load_model("two_link", **params), t_end)


def double_pendulum_reference(t_end, **params):
    """(q, v) of the natural-coordinate double pendulum of seed 003 §5."""
    return index1_reference(load_model("double_pendulum_natural", **params), t_end)


# typical magnitudes of the crank-slider state (elastic coordinates ~1e-5 m)
CRANK_SLIDER_SCALE = (1, 1, 1, 1e-4, 1e-4, 1e-5, 1e-5, 100, 100, 10, 1e-1, 1e-2, 1e-3, 1e-3)


def crank_slider_reference(t_end=0.1, rtol=1e-10):
    """(q, v) of the flexible crank-slider (default data, consistent test-set state).

    DOP853 with atol = rtol·(typical magnitude) per component: the elastic
    coordinates are ~1e-5 m, so a scalar atol would not resolve them.  The
    axial mode makes the problem mildly stiff (~4000 DOP853 steps over 0.1 s,
    8-20 s of CPU); at rtol 1e-11 vs 1e-12 the end states agree to 2e-8
    relative.  Against the IVP test-set reference at t = 0.1: φ2, x3 to 2e-10,
    φ2', x3' to 1e-7, elastic q to 4e-6 and their rates to 1e-3 relative
    (absolute: 3e-11 m and 6e-7 m/s)."""
    atol = tuple(rtol * s for s in CRANK_SLIDER_SCALE)
    return index1_reference(load_model("crank_slider"), t_end, rtol=rtol, atol=atol)


def lti_zoh_reference(A, B, x0, u, h):
    """Exact x(h) of x' = A x + B u with u held constant: expm of the
    augmented matrix [[A, B], [0, 0]] (seed 001 eq. 3.15-3.22)."""
    A = np.atleast_2d(np.asarray(A, dtype=float))
    B = np.asarray(B, dtype=float).reshape(A.shape[0], -1)
    n, m = B.shape
    aug = np.zeros((n + m, n + m))
    aug[:n, :n] = A
    aug[:n, n:] = B
    E = sla.expm(aug * h)
    return E[:n, :n] @ np.asarray(x0, dtype=float) + E[:n, n:] @ np.asarray(u, dtype=float).reshape(m)


@functools.lru_cache(maxsize=None)
def heavy_top_reference(t_end, m=1.0, L=0.5, A=0.4, C=0.2, g=9.81, theta0=np.pi / 6, spin0=30.0):
    """The heavy symmetric top (cosim.models.heavy_top) WITHOUT its Euler-parameter
    equations: rotation matrix R and body angular velocity ω by Euler's equations,
    J ω' = L e₃ × Rᵀ(0, 0, −m g) − ω × J ω, R' = R ω̃, J = diag(A, A, C), from R0 =
    rotation by theta0 about x, ω0 = (0, 0, spin0); DOP853 at 1e-13.  Returns the
    model's outputs (nutation, spin rate, vertical and spin momenta, energy) at t_end."""
    J = np.array([A, A, C])

    def rhs(t, y):
        R, w = y[:9].reshape(3, 3), y[9:]
        torque = np.cross([0.0, 0.0, L], R.T @ np.array([0.0, 0.0, -m * g]))
        hat = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
        return np.concatenate([(R @ hat).ravel(), (torque - np.cross(w, J * w)) / J])

    c, s = np.cos(theta0), np.sin(theta0)
    y0 = np.concatenate([[1.0, 0.0, 0.0, 0.0, c, -s, 0.0, s, c], [0.0, 0.0, spin0]])
    y = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1]
    R, w = y[:9].reshape(3, 3), y[9:]
    axis = R[:, 2]
    return {"nutation": float(np.arctan2(np.hypot(axis[0], axis[1]), axis[2])),
            "spin_rate": float(w[2]),
            "momentum_vertical": float((R @ (J * w))[2]),
            "momentum_spin": float(C * w[2]),
            "energy": float(0.5 * w @ (J * w) + m * g * L * axis[2])}
