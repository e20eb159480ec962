"""state-transition on the compiled (numba) backend: the step and the outputs
of a communication step in one compiled call (:mod:`.lti_kernel`).

Everything else — the Van Loan matrices and their cache, sub-steps under
``max_step``, fixed steps, dense output, state — is the reference class's;
only :meth:`Simulation.do_step`'s hot path (one exact step over the whole
interval) runs compiled.  The outputs it computes are returned by
:meth:`fresh_outputs` while x, u, C and D are the very objects it used.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from .state_transition import BLAS_THREADING_SIZE, StateTransition

_kernel = {}


def _lti_step():
    if "step" not in _kernel:
        from . import lti_kernel  # noqa: PLC0415
        _kernel["step"] = jit.njit(lti_kernel.lti_step)
    return _kernel["step"]


def supports(model):
    """Why the compiled state-transition cannot run ``model`` (None: it can)."""
    from ..models.lti import LTIModel  # noqa: PLC0415
    if not isinstance(model, LTIModel) or type(model).output_values is not LTIModel.output_values:
        return f"model {model.name!r} is not a plain LTI model (A, B, C, D)"
    return None


class CompiledStateTransition(StateTransition):
    """Exact ZOH for LTI plants; one compiled call per communication step."""

    backend = "numba"

    def __init__(self, model, **kwargs):
        super().__init__(model, **kwargs)
        self._step_fn = _lti_step()
        self._out_key = None  # (x, u, C, D) the outputs below belong to
        self._out = np.zeros(len(model.output_names))
        # compile or load from numba's cache now, not in the first (real-time) step
        n, m, p = model.n_y, model.n_inputs, len(model.output_names)
        self._step_fn(np.zeros((n, n)), np.zeros((n, m)), np.zeros((p, n)), np.zeros((p, m)),
                      np.zeros(n), np.zeros(m), np.zeros(n), np.zeros(p))

    def _advance_checked(self, t_target):
        t, x, u = self.t, self.y, self.u
        h = t_target - t
        if (self.h_fixed is not None or not 0.0 < h <= self.max_step
                or x.size + u.size >= BLAS_THREADING_SIZE):
            return self.advance(t_target)  # the reference path (sub-steps, BLAS guard)
        Phi, H = self._matrices(h)  # cached per h (seed 001 eqs. 3.20-3.21)
        model = self.model
        x_new = np.empty(x.size)
        self._step_fn(Phi, H, model.C, model.D, x, u, x_new, self._out)
        self.t_prev, self.y_prev = t, x
        self.t, self.y = t_target, x_new
        self.stats["steps"] += 1
        self._out_key = (x_new, u, model.C, model.D)
        return t_target

    def fresh_outputs(self):
        key = self._out_key
        if key is not None and key[0] is self.y and key[1] is self.u:
            model = self.model
            if key[2] is model.C and key[3] is model.D:
                return self._out.copy()
        return None
