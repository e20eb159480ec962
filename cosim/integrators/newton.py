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
        r = h_new / self.h_jac
        if self.sigma * r + abs(r - 1.0) <= 1.0 / 3.0:
            self.need_jac = False
            self.relax = 2.0 * h_new / (h_new + self.h_jac)
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
        old_norm = None
        n_j = 0
        err = np.inf
        sigma = self.sigma
        refreshed = False
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
                old_norm = None
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
            rate_only = self.rate_tol is not None   # the GGL rule (rate_tol above)
            if not rate_only:
                if dnorm < self.tol:
                    self.sigma = sigma
                    return NewtonResult(delta, True, it, sigma, "converged")
                if it == 1 and self.prior_rate and dnorm < 1.0 and 0.0 < sigma < 1.0 \
                        and sigma / (1.0 - sigma) * dnorm < self.err_tol:
                    self.sigma = sigma ** 0.8
                    return NewtonResult(delta, True, it, sigma, "converged")
            if n_j == 1 or old_norm is None:
                sigma = 0.0
            elif dnorm > 0.9 * old_norm:
                if rate_only:
                    stalled = dnorm < self.tol and refreshed
                else:
                    stalled = stall_norm is not None and stall_norm(dd) < self.tol
                if stalled:
                    self.sigma = sigma
                    return NewtonResult(delta, True, it, sigma, "converged")
                self.need_jac = True  # diverging or stalling: re-form J here
            else:
                sigma = max(0.5 * sigma, dnorm / old_norm)
                err = sigma / (1.0 - sigma) * dnorm
                if err < (self.rate_tol if rate_only else self.err_tol):
                    self.sigma = sigma
                    return NewtonResult(delta, True, it, sigma, "converged")
                if n_j >= 5 or err * sigma ** (5 - n_j) > 0.5:
                    self.need_jac = True
            old_norm = dnorm
        self.sigma = sigma
        self.need_jac = True
        ok = err <= 0.33
        return NewtonResult(delta, ok, self.max_iter, sigma,
                            "converged" if ok else f"no convergence in {self.max_iter} iterations")
