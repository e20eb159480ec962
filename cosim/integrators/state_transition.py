"""Exact zero-order-hold discretisation of LTI models (seed 001 §3.5).

For x' = A x + B u with u constant over [t_k, t_k + h] (eq. 3.17) the exact
solution is the recursion (eq. 3.19)

    x(t_k + h) = Φ(h) x(t_k) + H(h) u(t_k),   Φ(h) = e^{A h} (3.20),
    H(h) = ∫₀ʰ e^{A τ} dτ · B (3.21),

for ANY step h.  Φ and H come from one block exponential (Van Loan 1978):

    expm([[A, B], [0, 0]] · h) = [[Φ(h), H(h)], [0, I]],

computed with ``scipy.linalg.expm`` once per distinct h and cached (an LRU of
``cache_size`` entries; the cache holds only derived data, so it is not part
of the integrator state and a restart in a fresh process recomputes the very
same bits).  Dense output on [t_prev, t] evaluates Φ(τ), H(τ) directly.

The step itself (eq. 3.19 and the outputs y = C x + D u) is one function,
:func:`cosim.integrators.lti_kernel.lti_step`: compiled (numba) or run as plain
Python by the python backend.

Signal generators (eq. after 3.22, example 3.4): a generator v' = F v, u = G v
is appended to the plant, A* = [[A, B G], [0, F]], so sinusoidal (or any
LTI-generated) inputs are also reproduced exactly — :func:`sine_generator`,
:func:`augment_with_generators`.
"""
from __future__ import annotations

from collections import OrderedDict
from contextlib import nullcontext

import numpy as np
import scipy.linalg as sla

from .. import jit
from ..blas import single_threaded
from ..errors import InvalidInputError
from .base import Integrator
from .lti_kernel import lti_step

# below this size (states + inputs) OpenBLAS does not thread a product: no guard needed
BLAS_THREADING_SIZE = 16
_NO_ROWS = np.zeros((0, 0))


def van_loan(A, B, h):
    """(Φ(h), H(h)) from the block exponential of [[A, B], [0, 0]]·h."""
    n, m = B.shape
    M = np.zeros((n + m, n + m))
    M[:n, :n] = A * h
    M[:n, n:] = B * h
    E = sla.expm(M)
    return np.ascontiguousarray(E[:n, :n]), np.ascontiguousarray(E[:n, n:])


_compiled = {}


def compiled_step():
    """:func:`lti_step` compiled (cached on disk by numba)."""
    if "step" not in _compiled:
        _compiled["step"] = jit.njit(lti_step)
    return _compiled["step"]


compiled_entry = compiled_step   # (cosim.integrators.compile_method)


def supports(model):
    """Why the compiled state-transition cannot run ``model`` (None: it can)."""
    from ..models.lti import LTIModel  # noqa: PLC0415
    if not isinstance(model, LTIModel) or type(model).output_values is not LTIModel.output_values:
        return f"model {model.name!r} is not a plain LTI model (A, B, C, D)"
    return None


class StateTransition(Integrator):
    """Exact ZOH for LTI plants; a communication step is one call of the step
    function, which also computes the outputs (:meth:`fresh_outputs`)."""

    name = "state-transition"
    description = "exact ZOH discretisation of LTI models: Phi=e^(Ah), H=int Phi B, cached (seed 001 §3.5)"
    model_kinds = ("first_order",)
    implicit = False
    options = {"cache_size": 64}

    def __init__(self, model, backend="python", **kwargs):
        if backend not in ("python", "numba"):
            raise InvalidInputError(f"backend must be 'python' or 'numba', got {backend!r}")
        super().__init__(model, **kwargs)
        if not (hasattr(model, "A") and hasattr(model, "B")):
            raise InvalidInputError(
                f"method 'state-transition' needs an LTI model with matrices A, B; "
                f"model {model.name!r} has none")
        if backend == "numba":
            reason = supports(model)
            if reason is not None:
                raise InvalidInputError(f"backend 'numba': {reason}")
        self.backend = backend
        self._cache = OrderedDict()
        self._A_ref = self._B_ref = None
        self._plain = supports(model) is None   # C and D are the model's outputs
        self._out_key = None  # (x, u, C, D) the outputs in _out belong to
        p = len(model.output_names) if self._plain else 0
        self._out = np.zeros(p)
        if backend == "numba":
            self._step_fn = compiled_step()
            # compile or load from numba's cache now, not in the first (real-time) step
            n, m = model.n_y, model.n_inputs
            self._step_fn(np.zeros((n, n)), np.zeros((n, m)), np.zeros((p, n)), np.zeros((p, m)),
                          np.zeros(n), np.zeros(m), np.zeros(n), np.zeros(p))
        else:
            self._step_fn = lti_step

    def check_options(self):
        size = self.opts["cache_size"]
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
            raise InvalidInputError(f"cache_size must be an integer >= 1, got {size!r}")

    def _matrices(self, h):
        A, B = self.model.A, self.model.B
        if A is not self._A_ref or B is not self._B_ref:  # parameters changed: new matrices
            self._cache.clear()
            self._A_ref, self._B_ref = A, B
            self._A = np.asarray(A, dtype=float)
            self._B = np.asarray(B, dtype=float).reshape(self._A.shape[0], -1)
        cache = self._cache
        pair = cache.get(h)
        if pair is None:
            pair = van_loan(self._A, self._B, h)  # seed 001 eqs. 3.20-3.21
            if not (np.all(np.isfinite(pair[0])) and np.all(np.isfinite(pair[1]))):  # issue 14
                self._fail(f"e^(A h) overflows (max |A| = {np.max(np.abs(self._A)):.3g}, max |B| = "
                           f"{np.max(np.abs(self._B), initial=0.0):.3g}; matrices out of range?)",
                           h, "non-finite transition matrix")
            cache[h] = pair
            if len(cache) > self.opts["cache_size"]:
                cache.popitem(last=False)
        return pair

    def state(self):
        # the base class deep-copies _method_state(); this method has none (the
        # cache is derived data), so a snapshot is just the arrays (cheap rollback)
        return {"method": self.name, "t": self.t, "y": self.y.copy(), "t_prev": self.t_prev,
                "y_prev": self.y_prev.copy(), "u": self.u.copy(), "stats": dict(self.stats),
                "method_state": {}}

    def _initialize(self, t0, y0, **ic_options):
        self.t = t0
        self.y = y0.copy()

    def _step(self, t_limit):
        if self.h_fixed is None:
            h, lands = self._clamp_step(t_limit - self.t, t_limit)
        else:
            h, lands = self._clamp_step(self.h_fixed, t_limit)
        t_new = t_limit if lands else self.t + h
        h = t_new - self.t
        with self._blas():
            Phi, H = self._matrices(h)
        x, u = self.y, self.u
        y_new = np.empty(x.size)
        model = self.model
        if self._plain:   # seed 001 eq. 3.19, and y = C x + D u in the same call
            self._step_fn(Phi, H, model.C, model.D, x, u, y_new, self._out)
            self._out_key = (y_new, u, model.C, model.D)
        else:
            self._step_fn(Phi, H, _NO_ROWS, _NO_ROWS, x, u, y_new, self._out)
        self.t_prev, self.y_prev = self.t, x
        self.t, self.y = t_new, y_new
        self.stats["steps"] += 1

    def _advance_checked(self, t_target):
        # Simulation.do_step: one exact step over the whole interval when it may
        if self.h_fixed is not None or not 0.0 < t_target - self.t <= self.max_step:
            return self.advance(t_target)   # sub-steps under max_step, fixed steps
        self._step(t_target)
        return t_target

    def fresh_outputs(self):
        """The outputs the last step computed, while x, u, C and D are the very
        objects it used (else None: Simulation computes them)."""
        key = self._out_key
        if key is not None and key[0] is self.y and key[1] is self.u:
            model = self.model
            if key[2] is model.C and key[3] is model.D:
                return self._out.copy()
        return None

    def dense_output(self, t):
        tau = float(t) - self.t_prev
        if tau == 0.0:
            return self.y_prev.copy()
        if tau == self.t - self.t_prev:
            return self.y.copy()
        with self._blas():
            self._matrices(self.t - self.t_prev)  # refresh A/B references
            Phi, H = van_loan(self._A, self._B, tau)
            y = Phi @ self.y_prev
            if self.u.size:
                y += H @ self.u
        return y

    def _blas(self):
        """Single-threaded BLAS for models large enough for OpenBLAS to thread: the
        same bits whatever OPENBLAS_NUM_THREADS is (cosim.blas, issue 14 item 5)."""
        if self.y.size + self.u.size >= BLAS_THREADING_SIZE:
            return single_threaded()
        return nullcontext()


# -- signal generators as augmented LTI systems (seed 001 §3.5, example 3.4) -------------
def sine_generator(amplitude, omega, phase=0.0, offset=0.0):
    """(F, G, v0) of u(t) = U0 sin(ω0 t + φ) [+ offset] (seed 001 example 3.4):
    v = (u, u'), v' = [[0, 1], [−ω0², 0]] v, u = (1 0) v,
    v(0) = (U0 sin φ, U0 ω0 cos φ); a non-zero offset adds a constant state
    (v3' = 0, v3(0) = offset, u = v1 + v3).

    (The seed prints v2(0) = U0 ω0 sin φ; from v2 = v1' it is U0 ω0 cos φ.)
    Time is measured from the start of the simulation (t = 0 at v0).
    """
    U0, w, phi, c = float(amplitude), float(omega), float(phase), float(offset)
    F = np.array([[0.0, 1.0], [-w * w, 0.0]])
    G = np.array([[1.0, 0.0]])
    v0 = np.array([U0 * np.sin(phi), U0 * w * np.cos(phi)])
    if c != 0.0:
        F = sla.block_diag(F, np.zeros((1, 1)))
        G = np.array([[1.0, 0.0, 1.0]])
        v0 = np.append(v0, c)
    return F, G, v0


def augment_with_generators(A, B, C, D, generators):
    """Append signal generators to an LTI plant (seed 001 §3.5, fig. 3.11).

    ``generators``: {input index j: (F, G, v0)} with G of shape (1, n_v).  The
    generated inputs are removed from u; the rest stay inputs (same order).
    Returns (A*, B*, C*, D*, v0_all) with x* = (x, v_1, v_2, ...):
    A* = [[A, B_g G], [0, F]], B* = B with generated columns removed.
    """
    A = np.atleast_2d(np.asarray(A, dtype=float))
    n = A.shape[0]
    B = np.asarray(B, dtype=float).reshape(n, -1)
    C = np.atleast_2d(np.asarray(C, dtype=float))
    D = np.asarray(D, dtype=float).reshape(C.shape[0], B.shape[1])
    keep = [j for j in range(B.shape[1]) if j not in generators]
    blocks_F, v0s, couplings_A, couplings_C = [], [], [], []
    for j, (F, G, v0) in sorted(generators.items()):
        if not 0 <= j < B.shape[1]:
            raise InvalidInputError(f"generator input index {j} out of range 0..{B.shape[1] - 1}")
        F = np.atleast_2d(np.asarray(F, dtype=float))
        G = np.asarray(G, dtype=float).reshape(1, F.shape[0])
        blocks_F.append(F)
        v0s.append(np.asarray(v0, dtype=float).reshape(-1))
        couplings_A.append(B[:, [j]] @ G)
        couplings_C.append(D[:, [j]] @ G)
    Fs = sla.block_diag(*blocks_F) if blocks_F else np.zeros((0, 0))
    nv = Fs.shape[0]
    A_star = np.zeros((n + nv, n + nv))
    A_star[:n, :n] = A
    A_star[:n, n:] = np.hstack(couplings_A) if couplings_A else np.zeros((n, 0))
    A_star[n:, n:] = Fs
    B_star = np.vstack([B[:, keep], np.zeros((nv, len(keep)))])
    C_star = np.hstack([C, np.hstack(couplings_C) if couplings_C else np.zeros((C.shape[0], 0))])
    D_star = D[:, keep]
    v0_all = np.concatenate(v0s) if v0s else np.zeros(0)
    return A_star, B_star, C_star, D_star, v0_all


def augment_model(model, generators):
    """An LTIModel with signal generators appended (seed 001 fig. 3.11, example 3.4).

    ``model``: an LTI model (``A, B, C, D``, ``x0``, names); ``generators``:
    {input name: (F, G, v0)} (e.g. from :func:`sine_generator`).  The generated
    inputs disappear from the inputs; the generator states are appended to the
    state as ``"<input>.v1", "<input>.v2", ...``; outputs are unchanged.
    """
    from ..models.lti import LTIModel

    names = list(model.input_names)
    by_index = {}
    for name, gen in generators.items():
        if name not in names:
            raise InvalidInputError(f"generator for unknown input {name!r} (inputs: {names})")
        by_index[names.index(name)] = gen
    As, Bs, Cs, Ds, v0 = augment_with_generators(model.A, model.B, model.C, model.D, by_index)
    extra = [f"{name}.v{i + 1}" for name, (F, _, _) in sorted(generators.items(), key=lambda kv: names.index(kv[0]))
             for i in range(np.atleast_2d(F).shape[0])]
    kept = [n for j, n in enumerate(names) if j not in by_index]
    return LTIModel(A=As, B=Bs, C=Cs, D=Ds, x0=np.concatenate([model.x0, v0]),
                    state_names=list(model.state_names) + extra, input_names=kept,
                    output_names=list(model.output_names))
