"""Quasi-Newton iteration with Jacobian/LU reuse (seed 000 §5.1, Algorithm 2).

Shared by every implicit method.  The object keeps the LU factorisation of
the last iteration matrix, the observed convergence rate σ and the step
size the matrix was formed with, so an integrator can reuse it across steps
and decide with the reuse test (Algorithm 3 g)

    σ·ĥ_new/ĥ_old + |ĥ_new/ĥ_old − 1| ≤ 1/3

whether the next step may keep it, with relaxation ν = 2ĥ_new/(ĥ_new + ĥ_old).
"""
import numpy as np

from ..state_schema import check_newton_state
from .common import lu_factor, lu_solve
from .kernel_common import (NEWTON_CONVERGED, NEWTON_LAST_CHANCE, NEWTON_REFRESH, NEWTON_SLOW,
                            keeps_matrix, newton_verdict, relaxation)


class NewtonResult:
    __slots__ = ("delta", "converged", "iterations", "rate", "reason")

    def __init__(self, delta, converged, iterations, rate, reason):
        self.delta, self.converged = delta, converged
        self.iterations, self.rate, self.reason = iterations, rate, reason


class QuasiNewton:
    """Algorithm 2.  ``solve(residual, jacobian, n, norm)`` returns a NewtonResult.

    ``residual(delta)`` evaluates F at (predictor + delta); ``jacobian(delta)``
    returns ∂F/∂x there; ``norm`` is the scaled norm in which convergence is
    judged (1 ≈ the local error tolerance).  ``stats`` is the integrator's
    statistics dict; iterations, residual and Jacobian evaluations and LU
    factorisations are counted into it.
    """

    def __init__(self, stats, max_iter=25, tol=1e-4, err_tol=1e-3, what="Newton matrix",
                 prior_rate=False):
        self.stats = stats
        # prior_rate: also accept after the FIRST iteration when the rate σ of
        # the previous solve predicts σ/(1−σ)‖Δδ‖ < err_tol (Hairer & Wanner's
        # RADAU5 test); σ is then relaxed towards 1 as σ ← σ^0.8 so that an
        # unmeasured rate is re-measured every few steps.  Off by default
        # (plain Algorithm 2).  Only for a first update ‖Δδ‖ < 1 (inside the
        # tolerance scale), so the nonlinear remainder is negligible too.
        self.prior_rate = prior_rate
        # rate_tol (the GGL form, generalized-alpha-i2): accept only on the rate
        # test σ/(1−σ)‖Δδ‖ < rate_tol with σ measured in this solve (so at the
        # second update of a matrix at the earliest), or on a stall below tol
        # with a matrix formed in this solve (rounding level).  ‖Δδ‖ < tol alone
        # leaves a remainder ~σ‖Δδ‖/(1−σ) up to ~1e-4 of the weights with a kept
        # matrix (σ up to ~0.5), against a per-step position error ~1e-5 of them:
        # added up over ~1e6 steps it set ga-i2's error at rtol ≤ 1e-9 on Andrews
        # and its spread over 1e-15 starts (issue 12: path spread 3.3 → 1.03).
        self.rate_tol = None
        self.max_iter = max_iter
        self.tol = tol          # ‖Δδ‖ below this: converged (Alg. 2 step 4)
        self.err_tol = err_tol  # σ/(1−σ)‖Δδ‖ below this: converged (step 5b)
        self.what = what
        self.factor = None
        self.sigma = 0.0
        self.h_jac = None       # step size the factorisation belongs to
        self.need_jac = True
        self.relax = 1.0

    # -- reuse across steps (Algorithm 3 g) ------------------------------------
    def plan_reuse(self, h_new, h_old):
        """Decide whether the next step may reuse the current LU."""
        if self.factor is None or self.h_jac is None:
            self.need_jac = True
            self.relax = 1.0
            return
        if keeps_matrix(self.sigma, h_new, self.h_jac):
            self.need_jac = False
            self.relax = relaxation(h_new, self.h_jac)
        else:
            self.need_jac = True
            self.relax = 1.0

    def invalidate(self):
        self.need_jac = True
        self.relax = 1.0

    def snapshot(self):
        """The rollback point of a step attempt: the controller memory and the LU, by
        reference (a solve replaces ``factor``, never writes into it).  Every method's
        failed step restores it with :meth:`rollback`; :meth:`state` is the copy that
        goes into a serialized state."""
        return (self.factor, self.sigma, self.h_jac, self.need_jac, self.relax)

    def rollback(self, snap):
        self.factor, self.sigma, self.h_jac, self.need_jac, self.relax = snap

    def state(self):
        """Controller memory plus the current LU factors (plain arrays), so a
        restore continues bit-identically with the same iteration matrix."""
        d = {"sigma": float(self.sigma), "h_jac": -1.0 if self.h_jac is None else float(self.h_jac)}
        if self.factor is not None:
            d["lu"] = self.factor[0].copy()
            d["piv"] = self.factor[1].copy()
            d["need_jac"] = bool(self.need_jac)
            d["relax"] = float(self.relax)
        return d

    def restore(self, state):
        # a stored LU is indexed by LAPACK: never accept pivots outside the matrix
        check_newton_state("newton", state)
        self.sigma = float(state["sigma"])
        self.h_jac = None if state["h_jac"] < 0 else float(state["h_jac"])
        if "lu" in state:
            self.factor = (np.array(state["lu"], dtype=float),
                           np.array(state["piv"], dtype=np.int32))
            self.need_jac = bool(state["need_jac"])
            self.relax = float(state["relax"])
        else:  # older snapshots: the LU is rebuilt on the next solve
            self.factor = None
            self.need_jac = True
            self.relax = 1.0

    # -- one nonlinear solve -----------------------------------------------------
    def solve(self, residual, jacobian, n, norm, h=None, t=None, stall_norm=None):
        """``stall_norm`` (optional): when the iteration stops contracting
        (‖Δδ‖ > 0.9‖Δδ_old‖), an update with stall_norm < tol is accepted —
        the caller's measure of "at the rounding level" (generalized-α)."""
        stats = self.stats
        delta = np.zeros(n)
        old_norm = -1.0
        n_j = 0
        err = np.inf
        sigma = self.sigma
        refreshed = False
        rate_only = self.rate_tol is not None   # the GGL rule (rate_tol above)
        err_tol = self.rate_tol if rate_only else self.err_tol
        for it in range(1, self.max_iter + 1):
            if self.need_jac or self.factor is None:
                J = jacobian(delta)
                stats["jacobian_evaluations"] += 1
                self.factor = lu_factor(J, self.what, t=t, h=h)
                stats["lu_factorizations"] += 1
                self.h_jac = h
                self.need_jac = False
                self.relax = 1.0
                n_j = 0
                old_norm = -1.0
                refreshed = True
            F = residual(delta)
            stats["residual_evaluations"] += 1
            stats["newton_iterations"] += 1
            if not np.isfinite(F).all():
                self.need_jac = True
                self.sigma = sigma
                return NewtonResult(delta, False, it, sigma, "residual is not finite")
            dd = lu_solve(self.factor, F)
            dd *= -self.relax
            n_j += 1
            delta += dd
            dnorm = norm(dd)
            if not np.isfinite(dnorm):
                self.need_jac = True
                return NewtonResult(delta, False, it, sigma, "Newton update is not finite")
            verdict, sigma, err = newton_verdict(it, n_j, dnorm, old_norm, sigma, err, self.tol,
                                                 err_tol, self.prior_rate, rate_only)
            if verdict == NEWTON_SLOW:
                # stalled at the rounding level (the caller's measure): converged
                if rate_only:
                    stalled = dnorm < self.tol and refreshed
                else:
                    stalled = stall_norm is not None and stall_norm(dd) < self.tol
                verdict = NEWTON_CONVERGED if stalled else NEWTON_REFRESH
            if verdict == NEWTON_CONVERGED:
                self.sigma = sigma
                return NewtonResult(delta, True, it, sigma, "converged")
            if verdict == NEWTON_REFRESH:
                self.need_jac = True
            old_norm = dnorm
        self.sigma = sigma
        self.need_jac = True
        ok = err <= NEWTON_LAST_CHANCE
        return NewtonResult(delta, ok, self.max_iter, sigma,
                            "converged" if ok else f"no convergence in {self.max_iter} iterations")
