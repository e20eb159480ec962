"""The model checker: ``cosim check MODEL`` / :func:`cosim.check_model`.

Compares every term a multibody model gives against differences of the
terms it is derived from (:mod:`cosim.derivatives`, error ~1e-11 relative),
at the model's initial state and at ``n_states`` random states near it:

* shapes and finiteness of M, Q, C, C_q, C_t, γ, outputs, switching functions;
* M symmetric and positive definite (seed 000 eq. 1);
* C_q vs ∂C/∂q, C_t vs ∂C/∂t (eqs. 2-3), γ vs −d²/dσ² C(q + σv, t + σ) (eq. 5);
* Q_q, Q_v vs differences of Q; (C_qᵀλ)_q vs differences of C_qᵀλ;
  (M a)_q vs differences of M a (the optional Newton-matrix terms);
* the initial state: |C(q0, t0)| and |C_q v0 + C_t| (a warning: the IC
  analysis would repair it, seed 000 eqs. 6-9).

A term passes when max|analytic − reference| ≤ rtol·max(|analytic|, |reference|)
+ atol.  Terms the model leaves to :mod:`cosim.derivatives` are listed as
``auto``.  First-order models get the shape and ``rhs_jacobian`` checks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import derivatives
from .errors import CosimError
from .models import load_model
from .models.base import AUTOMATIC_TERMS, MultibodyModel, provides

OK, FAIL, WARN, AUTO, SKIP = "ok", "FAIL", "warn", "auto", "skip"


@dataclass
class CheckRow:
    term: str
    verdict: str
    error: float = float("nan")        # max |analytic − reference| over the states
    relative: float = float("nan")     # error / max(|analytic|, |reference|)
    note: str = ""


@dataclass
class CheckReport:
    model: str
    rows: list = field(default_factory=list)
    rtol: float = 1e-6
    states: int = 0

    @property
    def ok(self):
        return not self.failures()

    def failures(self):
        return [r for r in self.rows if r.verdict == FAIL]

    def row(self, term):
        for r in self.rows:
            if r.term == term:
                return r
        raise KeyError(term)

    def table(self):
        lines = [f"model {self.model}: {len(self.rows)} checks at {self.states} states "
                 f"(rtol {self.rtol:g})",
                 f"  {'term':<42s} {'verdict':<7s} {'max error':>10s} {'relative':>10s}  note"]
        for r in self.rows:
            err = "" if np.isnan(r.error) else f"{r.error:10.2e}"
            rel = "" if np.isnan(r.relative) else f"{r.relative:10.2e}"
            lines.append(f"  {r.term:<42s} {r.verdict:<7s} {err:>10s} {rel:>10s}  {r.note}")
        bad = self.failures()
        lines.append("result: " + ("all checks passed" if not bad else
                                   f"{len(bad)} failing: " + ", ".join(r.term for r in bad)))
        return "\n".join(lines)

    def as_dict(self):
        return {"model": self.model, "ok": self.ok, "rtol": self.rtol, "states": self.states,
                "rows": [{"term": r.term, "verdict": r.verdict,
                          "error": None if np.isnan(r.error) else float(r.error),
                          "relative": None if np.isnan(r.relative) else float(r.relative),
                          "note": r.note} for r in self.rows]}


class _Term:
    """Accumulates the worst mismatch of one term over the evaluation states."""

    def __init__(self, report, term, rtol, atol, labels=("analytic", "differences")):
        self.report, self.term, self.rtol, self.atol = report, term, rtol, atol
        self.labels = labels
        self.error = 0.0
        self.relative = 0.0
        self.fail_note = ""
        self.where = ""
        self.seen = False
        self.compared = False  # a numeric comparison happened (else error/relative are NaN)

    def compare(self, analytic, reference, where):
        a = np.asarray(analytic, dtype=float)
        r = np.asarray(reference, dtype=float)
        self.seen = True
        if a.shape != r.shape:
            self.fail_note = self.fail_note or f"shape {a.shape}, expected {r.shape} ({where})"
            return
        if a.size == 0:
            return
        if not np.all(np.isfinite(a)):
            self.fail_note = self.fail_note or f"non-finite values ({where})"
            return
        diff = np.abs(a - r)
        self.compared = True
        err = float(np.max(diff))
        size = max(float(np.max(np.abs(a))), float(np.max(np.abs(r))))
        rel = err / size if size > 0 else 0.0
        idx = np.unravel_index(int(np.argmax(diff)), diff.shape)
        if err > self.error:
            self.error, self.relative = err, rel
            self.where = f"worst entry {tuple(int(i) for i in idx)} at {where}"
        if err > self.rtol * size + self.atol and not self.fail_note:
            self.fail_note = (f"{self.labels[0]} {a[idx]:.6g} vs {self.labels[1]} {r[idx]:.6g} "
                              f"at entry {tuple(int(i) for i in idx)}, {where}")

    def fail(self, note):
        self.seen = True
        self.fail_note = self.fail_note or note

    def finish(self, note_ok=""):
        if not self.seen:
            return
        err, rel = (self.error, self.relative) if self.compared else (float("nan"), float("nan"))
        if self.fail_note:
            self.report.rows.append(CheckRow(self.term, FAIL, err, rel, self.fail_note))
        else:
            self.report.rows.append(CheckRow(self.term, OK, err, rel, note_ok or self.where))


def _call(fn, *args):
    try:
        return fn(*args), None
    except CosimError as exc:
        return None, str(exc)
    except Exception as exc:  # a user model's bug: report it as a failing term
        return None, f"{type(exc).__name__}: {exc}"


def _states(model, n_states, seed):
    """(label, q, v, t, u) at the initial state and random states near it."""
    q0, v0 = model.initial_state()
    q0, v0 = np.asarray(q0, dtype=float), np.asarray(v0, dtype=float)
    u = model.default_inputs()
    out = [("initial state", q0, v0, 0.0, u)]
    rng = np.random.default_rng(seed)
    s, T = derivatives._scales(model, q0.size)
    ref = np.maximum(np.abs(q0), s)
    for k in range(n_states):
        q = q0 + 0.01 * ref * rng.standard_normal(q0.size)
        v = v0 + 0.1 * (1.0 + np.abs(v0)) * rng.standard_normal(v0.size)
        uk = u + 0.1 * rng.standard_normal(u.size)
        out.append((f"random state {k + 1}", q, v, 0.0123 * (k + 1) * T, uk))
    return out


def check_model(model, params=None, *, n_states=3, seed=0, rtol=1e-6, atol=1e-10, trajectory=True):
    """Check ``model`` (instance, library name or ``module:Class`` / ``file.py:Class``)
    and return a :class:`CheckReport` (``report.ok``, ``report.table()``).
    ``trajectory``: also check γ and (for ``conservative`` models) the energy along a
    short trajectory from the initial state (:func:`_check_trajectory`)."""
    model = load_model(model, **dict(params or {}))
    report = CheckReport(model=model.name, rtol=rtol)
    if not isinstance(model, MultibodyModel):
        return _check_first_order(model, report, n_states, seed, rtol, atol)
    n, m = model.n_q, model.n_c
    init, err = _call(model.initial_state)
    if err:
        report.rows.append(CheckRow("initial_state", FAIL, note=err))
        return report
    shapes = [np.shape(x) for x in init] if isinstance(init, (tuple, list)) and len(init) == 2 else None
    if shapes != [(n,), (n,)] or not all(np.all(np.isfinite(x)) for x in init):
        report.rows.append(CheckRow("initial_state", FAIL,
                                    note=f"must return (q0, v0), finite, shapes ({n},) each; got {shapes}"))
        return report
    states = _states(model, n_states, seed)
    report.states = len(states)

    t_shape = _Term(report, "shapes and finiteness", rtol, atol)
    t_sym = _Term(report, "M symmetric", rtol, atol, labels=("M", "M^T"))
    t_pd = _Term(report, "M positive definite", rtol, atol)
    t_cq = _Term(report, "C_q vs dC/dq", rtol, atol)
    t_ct = _Term(report, "C_t vs dC/dt", rtol, atol)
    t_g = _Term(report, "gamma vs -d2C/ds2 (eq. 5)", rtol, atol)
    t_qq = _Term(report, "Q_q vs dQ/dq", rtol, atol)
    t_qv = _Term(report, "Q_v vs dQ/dv", rtol, atol)
    t_cl = _Term(report, "(C_q^T lam)_q vs differences", rtol, atol)
    t_ma = _Term(report, "(M a)_q vs differences", rtol, atol)
    rng = np.random.default_rng(seed + 1)
    expect = {"mass": (n, n), "forces": (n,), "constraints": (m,), "constraint_jacobian": (m, n),
              "constraint_dt": (m,), "gamma": (m,), "outputs_qv": (len(model.outputs),)}
    for where, q, v, t, u in states:
        vals = {}
        calls = {"mass": (q, t), "forces": (q, v, t, u), "constraints": (q, t),
                 "constraint_jacobian": (q, t), "constraint_dt": (q, t), "gamma": (q, v, t),
                 "outputs_qv": (t, q, v, u)}
        for name, args in calls.items():
            val, err = _call(getattr(model, name), *args)
            if err:
                t_shape.fail(f"{name} raised {err} ({where})")
                continue
            arr = np.asarray(val, dtype=float)
            if arr.shape != expect[name]:
                t_shape.fail(f"{name} returns shape {arr.shape}, expected {expect[name]} ({where})")
            elif not np.all(np.isfinite(arr)):
                t_shape.fail(f"{name} returns non-finite values ({where})")
            else:
                vals[name] = arr
        t_shape.seen = True
        if "mass" in vals:
            M = vals["mass"]
            t_sym.compare(M, M.T, where)
            w = np.linalg.eigvalsh(0.5 * (M + M.T))
            t_pd.seen = True
            if not w[0] > 1e-14 * max(abs(w[-1]), 1e-300):
                t_pd.fail(f"smallest eigenvalue {w[0]:.3e}, largest {w[-1]:.3e} ({where})")
            elif t_pd.where == "":
                t_pd.where = f"eigenvalues in [{w[0]:.3g}, {w[-1]:.3g}] at {where}"
        if m and "constraints" in vals:
            C = lambda qq, tt: np.asarray(model.constraints(qq, tt), dtype=float)  # noqa: E731
            ref_cq = derivatives.constraint_jacobian(model, q, t)
            ref_ct = derivatives.first_derivative(lambda s: C(q, t + s),
                                                  derivatives.H_FIRST * derivatives._scales(model, n)[1])
            ref_g = derivatives.gamma(model, q, v, t, analytic_velocity_terms=False)
            if provides(model, "constraint_jacobian") and "constraint_jacobian" in vals:
                t_cq.compare(vals["constraint_jacobian"], ref_cq, where)
            if provides(model, "constraint_dt") and "constraint_dt" in vals:
                t_ct.compare(vals["constraint_dt"], ref_ct, where)
            if provides(model, "gamma") and "gamma" in vals:
                t_g.compare(vals["gamma"], ref_g, where)
        jac, err = _call(model.force_jacobians, q, v, t, u)
        if err:
            t_qq.fail(f"force_jacobians raised {err} ({where})")
        elif jac is not None:
            Qq, Qv = jac
            f = lambda qq, vv: np.asarray(model.forces(qq, vv, t, u), dtype=float)  # noqa: E731
            s = derivatives._scales(model, n)[0]
            t_qq.compare(Qq, derivatives.jacobian(lambda qq: f(qq, v), q, s), where)
            t_qv.compare(Qv, derivatives.jacobian(lambda vv: f(q, vv), v, 1.0 + np.abs(v)), where)
        if m:
            lam = rng.standard_normal(m)
            H, err = _call(model.constraint_force_jacobian, q, lam, t)
            if err:
                t_cl.fail(f"constraint_force_jacobian raised {err} ({where})")
            elif H is not None:
                s = derivatives._scales(model, n)[0]
                t_cl.compare(H, derivatives.jacobian(
                    lambda qq: np.asarray(model.constraint_jacobian(qq, t)).T @ lam, q, s), where)
        a = rng.standard_normal(n)
        J, err = _call(model.mass_jacobian_term, q, a, t)
        if err:
            t_ma.fail(f"mass_jacobian_term raised {err} ({where})")
        elif model.constant_mass:
            s = derivatives._scales(model, n)[0]
            t_ma.compare(np.zeros((n, n)), derivatives.jacobian(
                lambda qq: np.asarray(model.mass(qq, t)) @ a, q, s), where)
        elif J is not None:
            s = derivatives._scales(model, n)[0]
            t_ma.compare(J, derivatives.jacobian(lambda qq: np.asarray(model.mass(qq, t)) @ a, q, s),
                         where)
    if model.constant_mass:
        t_ma.term = "constant_mass: M independent of q"
    t_shape.finish("all methods return the declared shapes, finite")
    t_sym.finish()
    t_pd.finish()
    for term in (t_cq, t_ct, t_g, t_qq, t_qv, t_cl, t_ma):
        term.finish()
    if t_shape.fail_note:  # the model cannot be evaluated: nothing more to learn
        _check_initial_state(model, report, states[0])
        return report
    _, q0, v0, t0, u0 = states[0]
    try:
        paths = derivatives.derivative_report(model, q0, v0, t0, u0)
    except Exception as exc:  # noqa: BLE001 - a user model's bug, reported as a row
        paths = []
        report.rows.append(CheckRow("automatic derivatives", FAIL, note=f"{type(exc).__name__}: {exc}"))
    for term, path, note in paths:
        if path not in ("analytic", "none", "constant"):
            report.rows.append(CheckRow(term, AUTO, note=f"not given: {path}" + (f" ({note})" if note else "")))
    _check_initial_state(model, report, states[0])
    if trajectory:
        _check_trajectory(model, report, states[0], rtol, atol)
    return report


def _rk4_trajectory(model, q, v, t, u, h, n):
    """n RK4 steps of q' = v, v' = a(q, v, t) with a from eq. 10 (no projection; on the
    independent rows of C_q at each point, so redundant constraints are no error):
    lists of t, q, v, a, λ at the n + 1 points."""
    from .ic import least_squares_accelerations as consistent_accelerations

    def f(tt, qq, vv):
        return consistent_accelerations(model, tt, qq, vv, u)[0]

    out = []
    for k in range(n + 1):
        a, lam = consistent_accelerations(model, t, q, v, u)
        out.append((t, q.copy(), v.copy(), a, lam))
        if k == n:
            break
        k1q, k1v = v, a
        k2q, k2v = v + 0.5 * h * k1v, f(t + 0.5 * h, q + 0.5 * h * k1q, v + 0.5 * h * k1v)
        k3q, k3v = v + 0.5 * h * k2v, f(t + 0.5 * h, q + 0.5 * h * k2q, v + 0.5 * h * k2v)
        k4q, k4v = v + h * k3v, f(t + h, q + h * k3q, v + h * k3v)
        q = q + h / 6.0 * (k1q + 2 * k2q + 2 * k3q + k4q)
        v = v + h / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
        t = t + h
    return out


def _d_dt(values, k, h):
    """Five-point central difference of samples ``values`` at index k (error O(h⁴))."""
    return (values[k - 2] - 8.0 * values[k - 1] + 8.0 * values[k + 1] - values[k + 2]) / (12.0 * h)


def _check_trajectory(model, report, state, rtol, atol, n=8):
    """Along 8 RK4 steps of h = τ/1024 from the initial state (τ: the time to move one
    coordinate scale at the initial velocities or accelerations): γ against C_q a − d/dt(C_q v + C_t) (eq. 5 holds for any smooth
    motion, whatever γ the accelerations were computed with), and, for a model that
    declares ``conservative = True``, dE/dt = 0 against the power scale Σ|v_i Q_i|."""
    _, q, v, t, u = state
    u = model.default_inputs()
    if model.n_c:  # start on the velocity constraints (else constraint forces do work)
        try:
            Cq = np.asarray(model.constraint_jacobian(q, t), dtype=float)
            res = Cq @ v + np.asarray(model.constraint_dt(q, t), dtype=float)
            v = v - Cq.T @ np.linalg.lstsq(Cq @ Cq.T, res, rcond=None)[0]
        except Exception:  # noqa: BLE001 - reported by the trajectory below
            pass
    tau = derivatives._line_time(model, q, v)
    try:  # ... and the time to move one coordinate scale from rest under the accelerations
        from .ic import least_squares_accelerations as consistent_accelerations
        a0 = np.abs(consistent_accelerations(model, t, np.asarray(q, float), np.asarray(v, float), u)[0])
        ref = np.maximum(np.abs(q), derivatives._scales(model, np.size(q))[0])
        if np.any(a0 > 0):
            tau = min(tau, float(np.min(np.sqrt(ref[a0 > 0] / a0[a0 > 0]))))
    except Exception:  # noqa: BLE001 - reported by the trajectory below
        pass
    h = tau / 1024.0
    try:
        traj = _rk4_trajectory(model, np.asarray(q, float), np.asarray(v, float), float(t), u, h, n)
    except Exception as exc:  # noqa: BLE001 - a singular [[M, C_q^T], [C_q, 0]] or a model bug
        report.rows.append(CheckRow("short trajectory (RK4)", FAIL, note=f"{type(exc).__name__}: {exc}"))
        return
    inner = range(2, n - 1)
    if model.n_c:
        term = _Term(report, "gamma vs C_q a - d/dt(C_q v + C_t) (trajectory)", rtol, atol,
                     labels=("gamma", "trajectory"))
        r = [np.asarray(model.constraint_jacobian(qq, tt)) @ vv + np.asarray(model.constraint_dt(qq, tt))
             for tt, qq, vv, _a, _l in traj]
        for k in inner:
            tt, qq, vv, a, _ = traj[k]
            Cq = np.asarray(model.constraint_jacobian(qq, tt))
            g_traj = Cq @ a - _d_dt(r, k, h)
            g = np.asarray(model.gamma(qq, vv, tt), dtype=float)
            # the size of the terms γ is made of: |C_q a| (a from the model's γ) and γ itself
            size = np.maximum(np.abs(Cq) @ np.abs(a), np.abs(g))
            err = np.abs(g - g_traj)
            term.seen = term.compared = True
            j = int(np.argmax(err / (size + 1e-300)))
            if err[j] > term.error:
                term.error, term.relative = float(err[j]), float(err[j] / max(size[j], 1e-300))
                term.where = f"worst {model.constraint_names[j]} at t = {tt:.3g} s"
            if err[j] > rtol * size[j] + atol and not term.fail_note:
                term.fail_note = (f"gamma {g[j]:.6g} vs trajectory {g_traj[j]:.6g} "
                                  f"({model.constraint_names[j]}, t = {tt:.3g} s)")
        term.finish()
    if getattr(model, "conservative", False):
        E = [model.energy(tt, np.concatenate([qq, vv]), u) for tt, qq, vv, _a, _l in traj]
        if any(e is None for e in E):
            report.rows.append(CheckRow("energy conserved (trajectory)", FAIL,
                                        note="conservative = True but energy() returns None: define "
                                        "potential_energy(q, t) (J)"))
            return
        worst, rel_worst, note = 0.0, 0.0, ""
        ok = True
        for k in inner:
            tt, qq, vv, a, lam = traj[k]
            Q = np.asarray(model.forces(qq, vv, tt, u), dtype=float)
            power = float(np.sum(np.abs(vv * Q)) + np.sum(np.abs(vv * (np.asarray(model.mass(qq, tt)) @ a))))
            dE = abs(float(_d_dt(np.asarray(E, dtype=float), k, h)))
            rel = dE / max(power, 1e-300)
            if dE > worst:
                worst, rel_worst = dE, rel
            if dE > rtol * power + atol and ok:
                ok = False
                note = (f"dE/dt = {dE:.3e} W at t = {tt:.3g} s against a power scale "
                        f"{power:.3e} W: forces() or potential_energy() does not match a "
                        f"conservative model (or declare conservative = False)")
        report.rows.append(CheckRow("energy conserved (trajectory)", OK if ok else FAIL, worst, rel_worst,
                                    note or f"dE/dt along {n} RK4 steps of {h:.2e} s"))


def _check_initial_state(model, report, state):
    """|C(q0)| and |C_q v0 + C_t|: the IC analysis would repair them (seed 000 eqs. 6-9)."""
    _, q, v, t, _u = state
    if not model.n_c:
        return
    try:
        C = np.asarray(model.constraints(q, t), dtype=float)
        Cd = np.asarray(model.constraint_jacobian(q, t), dtype=float) @ v + \
            np.asarray(model.constraint_dt(q, t), dtype=float)
    except Exception as exc:  # already reported by the shape check
        report.rows.append(CheckRow("initial state consistent", FAIL, note=f"{type(exc).__name__}: {exc}"))
        return
    _check_redundancy(model, report, q, t)
    for label, val, scale in (("initial positions satisfy C = 0", C, max(1.0, float(np.max(np.abs(q))))),
                              ("initial velocities satisfy C_q v + C_t = 0", Cd,
                               max(1.0, float(np.max(np.abs(v)))))):
        err = float(np.max(np.abs(val))) if val.size else 0.0
        if err <= 1e-10 * scale:
            report.rows.append(CheckRow(label, OK, err, err / scale))
        else:
            i = int(np.argmax(np.abs(val)))
            report.rows.append(CheckRow(label, WARN, err, err / scale,
                                        f"{model.constraint_names[i]} violated: the IC analysis will "
                                        f"repair the start (seed 000 eqs. 6-9) and warn"))


def _check_redundancy(model, report, q, t):
    """A row naming the redundant constraints (the IC analysis removes them; the run
    handles them) or the singular start (rank higher at nearby consistent states)."""
    from .ic import independent_constraints, nearby_rank
    try:
        keep = independent_constraints(np.asarray(model.constraint_jacobian(q, t), dtype=float))
        near = nearby_rank(model, np.asarray(q, dtype=float), t)
    except Exception:  # noqa: BLE001 - the shape and value checks report a broken C_q
        return
    label = "independent constraints"
    if keep.size == model.n_c:
        report.rows.append(CheckRow(label, OK, note=f"all {model.n_c} independent at the initial state"))
        return
    removed = [i for i in range(model.n_c) if i not in set(keep.tolist())]
    if near is not None and near.size > keep.size:
        deferred = [model.constraint_names[i] for i in removed if i in set(near.tolist())]
        report.rows.append(CheckRow(label, WARN, note=(
            f"the initial configuration is singular: C_q has rank {keep.size} here and "
            f"{near.size} at nearby consistent configurations; {', '.join(deferred)} are "
            f"dropped at the start and taken back after it")))
        return
    names = ", ".join(model.constraint_names[i] for i in removed)
    report.rows.append(CheckRow(label, OK, note=(
        f"redundant: {names} (rank {keep.size} of {model.n_c}, also at nearby consistent "
        f"configurations); the IC analysis removes them and the run keeps an independent "
        f"subset along the motion")))


def _check_first_order(model, report, n_states, seed, rtol, atol):
    x0, err = _call(model.initial_y)
    n = len(model.state_names)
    if err or np.shape(x0) != (n,):
        report.rows.append(CheckRow("initial_state", FAIL, note=err or f"shape {np.shape(x0)}, expected ({n},)"))
        return report
    rng = np.random.default_rng(seed)
    t_shape = _Term(report, "shapes and finiteness", rtol, atol)
    t_jac = _Term(report, "rhs_jacobian vs df/dx", rtol, atol)
    u = model.default_inputs()
    report.states = n_states + 1
    for k in range(n_states + 1):
        x = x0 if k == 0 else x0 + 0.01 * np.maximum(np.abs(x0), 1.0) * rng.standard_normal(n)
        where = "initial state" if k == 0 else f"random state {k}"
        f, err = _call(model.rhs, 0.0, x, u)
        t_shape.seen = True
        if err or np.shape(f) != (n,) or not np.all(np.isfinite(f)):
            t_shape.fail(err or f"rhs returns shape {np.shape(f)}, expected ({n},) ({where})")
            continue
        J, err = _call(model.rhs_jacobian, 0.0, x, u)
        if err:
            t_jac.fail(err)
        elif J is not None:
            t_jac.compare(J, derivatives.jacobian(lambda xx: model.rhs(0.0, xx, u), x), where)
    t_shape.finish("rhs returns the declared shape, finite")
    t_jac.finish()
    return report


__all__ = ["AUTOMATIC_TERMS", "CheckReport", "CheckRow", "check_model"]
