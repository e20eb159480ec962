"""Initial-condition analysis (seed 000 §1, Appendix Algorithm 1).

1. redundant constraints: rank-revealing (column-pivoted) QR of C_qᵀ, i.e.
   a full-pivot choice of the best-conditioned independent constraint set;
2. singular initial configuration: repeat the rank test at perturbed
   configurations and warn when the rank changes;
3. weighted position projection, eqs. 6-7:  W(q − q0) + C_qᵀλ = 0, C(q) = 0;
4. weighted velocity projection, eqs. 8-9 (plus nonholonomic rows);
5. initial accelerations and multipliers, eq. 10.

No silent repairs: when step 1 removes constraints or steps 3-4 move q0 or
v0 by more than ``REPAIR_TOLERANCE`` (relative to max(1, max|q0|) resp.
max(1, max|v0|)), an :class:`~cosim.errors.InitialConditionWarning` gives
the size of the change; the full :class:`ICReport` is
``Simulation.ic_report`` (and ``Integrator.ic_report``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from .errors import (InconsistentConstraintsError, InitialConditionWarning, InvalidInputError,
                     ModelDefinitionError)
from .integrators.common import augmented_matrix, consistent_accelerations, lu_factor, lu_solve


class ReducedConstraints:
    """View of a multibody model keeping only the independent constraints.

    ``adaptive``: choose the rows anew at every configuration the method evaluates
    where the kept ones have become ill-conditioned (:func:`cosim.constraint_guard.better_rows`,
    with hysteresis), for methods whose multipliers do not carry over between
    evaluations (the explicit methods: their accelerations and projections do not
    depend on which independent rows express the constraints).  Off by default: an
    implicit method's Newton unknowns include the multipliers of the kept rows, so
    there the rows change only between communication steps (Simulation)."""

    adaptive = False

    def __init__(self, model, keep):
        self._model = model
        self.select(keep)
        self._checked = None  # (q bytes, t) whose rows are decided

    def select(self, keep):
        """Keep the rows ``keep`` of the full set from now on (as many as before: the
        integrator's multipliers keep their size; Simulation re-selects along the run)."""
        keep = np.sort(np.asarray(keep, dtype=int))
        if hasattr(self, "_keep") and keep.size != self._keep.size:
            raise ValueError(f"re-selected rows {keep.tolist()} must be {self._keep.size}")
        self._keep = keep
        model = self._model
        self.constraint_names = tuple(model.constraint_names[i] for i in self._keep)
        self.removed_constraints = tuple(n for i, n in enumerate(model.constraint_names)
                                         if i not in set(self._keep.tolist()))

    @property
    def rows(self):
        """The kept rows of the full constraint set (sorted indices)."""
        return self._keep

    def __getattr__(self, name):
        return getattr(self._model, name)

    @property
    def n_c(self):
        return len(self._keep)

    @property
    def full_model(self):
        return self._model

    def _rows_at(self, q, t):
        """The kept rows, first chosen anew at (q, t) when ``adaptive``."""
        if self.adaptive:
            key = (np.asarray(q, dtype=float).tobytes(), float(t))
            if key != self._checked:
                from .constraint_guard import better_rows
                Cq = np.asarray(self._model.constraint_jacobian(q, t), dtype=float)
                rows = better_rows(Cq, self._keep)
                if rows is not None:
                    self.select(rows)
                    self.reselections += 1
                self._checked = key
        return self._keep

    reselections = 0

    def constraints(self, q, t):
        return self._model.constraints(q, t)[self._rows_at(q, t)]

    def constraint_jacobian(self, q, t):
        return self._model.constraint_jacobian(q, t)[self._rows_at(q, t)]

    def constraint_dt(self, q, t):
        return self._model.constraint_dt(q, t)[self._rows_at(q, t)]

    def gamma(self, q, v, t):
        return self._model.gamma(q, v, t)[self._rows_at(q, t)]

    def constraint_force_jacobian(self, q, lam, t):
        full = np.zeros(self._model.n_c)
        full[self._keep] = lam
        return self._model.constraint_force_jacobian(q, full, t)

    def residual_levels(self, t, y, qdd=None):
        return type(self._model).residual_levels(self, t, y, qdd)

    def energy(self, t, y, u=None):
        return self._model.energy(t, y, u)


_GEQP3 = []   # LAPACK dgeqp3, looked up when first needed (cosim.lapack: without scipy.linalg)
REPAIR_TOLERANCE = 1e-10  # a change below this (relative) is rounding, not a repair


@dataclass
class ICReport:
    """What the IC analysis did: consistent q, v, q'', λ; constraints removed as
    redundant; the largest change of a coordinate (``position_change``, m or
    rad) and of a velocity (``velocity_change``) made by the projections;
    ``repaired`` is True when either exceeds ``REPAIR_TOLERANCE`` or a
    constraint was removed."""

    model: object
    q: np.ndarray
    v: np.ndarray
    qdd: np.ndarray
    lam: np.ndarray
    redundant_constraints: tuple = ()
    position_change: float = 0.0
    velocity_change: float = 0.0
    position_iterations: int = 0
    singular_configuration: bool = False
    warnings: list = field(default_factory=list)
    # constraints dropped at a singular start that are not redundant (C_q has a higher
    # rank at nearby consistent configurations): Simulation takes them back
    deferred_constraints: tuple = ()
    repaired: bool = False

    def as_dict(self):
        """JSON-able summary (``cosim simulate --json``)."""
        return {"repaired": bool(self.repaired),
                "position_change": float(self.position_change),
                "velocity_change": float(self.velocity_change),
                "redundant_constraints": list(self.redundant_constraints),
                "position_iterations": int(self.position_iterations),
                "singular_configuration": bool(self.singular_configuration),
                "deferred_constraints": list(self.deferred_constraints),
                "q": [float(x) for x in self.q], "v": [float(x) for x in self.v],
                "warnings": list(self.warnings)}

    def one_line(self):
        """The report in one line (the FMU's log and the ROS node's start-up line)."""
        if not self.repaired:
            return ("initial state consistent: the initial-condition analysis (seed 000 "
                    "Algorithm 1) changed nothing")
        return ("initial state repaired by the initial-condition analysis (seed 000 eqs. 6-9): "
                + "; ".join(self.summary()))

    def summary(self):
        lines = []
        if self.redundant_constraints:
            lines.append("redundant constraints removed: " + ", ".join(self.redundant_constraints))
        if self.deferred_constraints:
            lines.append("constraints dropped at the singular start (taken back after it): "
                         + ", ".join(self.deferred_constraints))
        if self.position_change > 0:
            lines.append(f"positions repaired by {self.position_change:.3e} (max abs change)")
        if self.velocity_change > 0:
            lines.append(f"velocities repaired by {self.velocity_change:.3e} (max abs change)")
        lines.extend(self.warnings)
        return lines


def independent_constraints(Cq, tol=1e-9):
    """Indices of a maximal well-conditioned independent subset of C_q's rows."""
    m = Cq.shape[0]
    if m == 0:
        return np.zeros(0, dtype=int)
    # LAPACK dgeqp3 directly (what scipy.linalg.qr(pivoting=True) calls, with its workspace
    # query, so the same R and pivots): scipy's wrapper costs ~5x the factorisation here
    a = np.array(np.asarray_chkfinite(Cq, dtype=float).T, order="F")
    if not _GEQP3:
        from .lapack import function  # noqa: PLC0415
        _GEQP3[:] = (function("dgeqp3"),)   # = scipy.linalg.get_lapack_funcs("geqp3") for float64
    geqp3 = _GEQP3[0]
    lwork = int(geqp3(a, lwork=-1)[3][0])
    qr, jpvt, _, _, info = geqp3(a, lwork=max(lwork, 1), overwrite_a=1)
    if info != 0:
        raise ValueError(f"column-pivoted QR of the constraint Jacobian failed (LAPACK info {info})")
    piv = jpvt - 1
    d = np.abs(np.diag(qr)[:min(qr.shape)])
    if d.size == 0 or d[0] == 0.0:
        return np.zeros(0, dtype=int)
    rank = int(np.sum(d > tol * d[0]))
    return np.sort(piv[:rank])


_PERTURBATIONS = {}  # n -> the three fixed-seed directions of the singularity test


def _perturbations(n):
    """Three standard-normal directions in R^n from the fixed seed 12345 (the same
    every run; made once per n, as a generator costs more than the rank test)."""
    if n not in _PERTURBATIONS:
        rng = np.random.default_rng(12345)
        directions = tuple(rng.standard_normal(n) for _ in range(3))
        for d in directions:
            d.flags.writeable = False
        _PERTURBATIONS[n] = directions
    return _PERTURBATIONS[n]


def project_onto_constraints(model, q, t, tol=1e-13, max_iter=30):
    """q moved onto C(q, t) = 0 by Gauss-Newton steps of least norm (a least-squares
    solve: works where C_q has lost rank); None when it does not converge."""
    q = np.array(q, dtype=float)
    scale = max(1.0, float(np.max(np.abs(q)))) if q.size else 1.0
    for _ in range(max_iter):
        C = np.asarray(model.constraints(q, t), dtype=float)
        if not np.all(np.isfinite(C)):
            return None
        if float(np.max(np.abs(C))) <= tol * scale:
            return q
        Cq = np.asarray(model.constraint_jacobian(q, t), dtype=float)
        q = q - np.linalg.lstsq(Cq, C, rcond=None)[0]
    return None


def nearby_rank(model, q0, t0, rank_tol=1e-9, scale=1e-3):
    """The independent rows of C_q (:func:`independent_constraints`) of the largest rank
    found at three nearby consistent configurations: q0 moved by ``scale`` ×
    max(1, max|q0|) along fixed directions, then projected onto C = 0.  (Perturbing
    without the projection leaves the constraint manifold, where redundant rows look
    independent.)  None when no projection converged."""
    n = q0.size
    size = scale * max(1.0, float(np.max(np.abs(q0)))) if n else scale
    best = None
    for direction in _perturbations(n):
        qp = project_onto_constraints(model, q0 + size * direction, t0)
        if qp is None:
            continue
        keep = independent_constraints(np.asarray(model.constraint_jacobian(qp, t0), dtype=float),
                                       rank_tol)
        if best is None or keep.size > best.size:
            best = keep
    return best


def least_squares_accelerations(model, t, q, v, u):
    """(q'', λ) of eq. 10 on the full constraint set, also where C_q has lost rank
    (redundant constraints, singular configurations): the independent rows at q give
    q'' (unique when the acceleration equations are consistent); λ has the full set's
    length, zero on the dependent rows."""
    from .integrators.common import consistent_accelerations
    Cq = np.asarray(model.constraint_jacobian(q, t), dtype=float)
    keep = independent_constraints(Cq)
    if keep.size == model.n_c:
        return consistent_accelerations(model, t, q, v, u)
    qdd, lam_kept = consistent_accelerations(ReducedConstraints(model, keep), t, q, v, u)
    lam = np.zeros(model.n_c)
    lam[keep] = lam_kept
    return qdd, lam


def _weights(name, w, n):
    if w is None:
        return np.ones(n)
    w = np.asarray(w, dtype=float).reshape(-1)
    if w.size != n or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise InvalidInputError(f"{name} must be {n} positive finite weights, got {w.tolist()}")
    return w


def check_terms(model, t, q, v, u):
    """Shapes and finiteness of M, Q, C, C_q, C_t, γ at the start: an error names
    the method, the model and the time (a wrong model fails here, not in Newton).
    Returns the six values (copies), for reuse at the same (q, v, t)."""
    n, m = model.n_q, model.n_c
    calls = (("mass(q, t)", model.mass, (q, t), (n, n)),
             ("forces(q, v, t, u)", model.forces, (q, v, t, u), (n,)),
             ("constraints(q, t)", model.constraints, (q, t), (m,)),
             ("constraint_jacobian(q, t)", model.constraint_jacobian, (q, t), (m, n)),
             ("constraint_dt(q, t)", model.constraint_dt, (q, t), (m,)),
             ("gamma(q, v, t)", model.gamma, (q, v, t), (m,)))
    values = []
    for label, fn, args, shape in calls:
        val = np.array(fn(*args), dtype=float)  # a copy: a model may reuse its buffers
        if val.shape != shape:
            raise ModelDefinitionError(f"model {model.name!r}: {label} returned shape {val.shape} at "
                                       f"t={t!r}, expected {shape} (n_q = {n}, n_c = {m})")
        if not np.all(np.isfinite(val)):
            raise ModelDefinitionError(f"model {model.name!r}: {label} returned non-finite values "
                                       f"at t={t!r}: {val.tolist()}")
        values.append(val)
    return values


def analyse_initial_conditions(model, t0, q0, v0, u, weights_q=None, weights_v=None,
                               tol=1e-12, max_iter=50, rank_tol=1e-9, check_singular=True,
                               max_repair=None):
    """Algorithm 1: consistent q, v, q'', λ from estimates q0, v0 (see module doc).
    ``max_repair``: a position or velocity change larger than this (max abs, SI
    units) is an error instead of a warned repair."""
    q0 = np.asarray(q0, dtype=float).copy()
    v0 = np.asarray(v0, dtype=float).copy()
    n = model.n_q
    Wq = _weights("weights_q", weights_q, n)
    Wv = _weights("weights_v", weights_v, n)
    report_warnings = []
    full_model = model
    # M, C, C_q, C_t at (q0, t0), reused below while q is still q0 (the same function at
    # the same arguments: the same values, one evaluation instead of up to four)
    M0, _, C0, Cq0, Ct0, _ = check_terms(model, t0, q0, v0, u)

    # 1. redundant constraints
    redundant = ()
    keep = np.zeros(0, dtype=int)
    if model.n_c:
        keep = independent_constraints(Cq0, rank_tol)
        if keep.size < model.n_c:
            model = ReducedConstraints(full_model, keep)
            redundant = model.removed_constraints
            report_warnings.append("redundant constraints removed: " + ", ".join(redundant))

    # 2. singular configuration or true redundancy: the rank of the full C_q at nearby
    # *consistent* configurations (perturbed, then projected onto C = 0).  A rank there
    # above the rank here: the start is singular, and the constraints dropped here are
    # not all redundant (the stepper takes them back after the start,
    # cosim.simulation); the same rank: the dropped ones are truly redundant.
    singular = False
    deferred = ()
    near_keep = None
    if check_singular and full_model.n_c:
        near_keep = nearby_rank(full_model, q0, t0, rank_tol)
        if near_keep is not None and near_keep.size > keep.size:
            singular = True
            removed = [i for i in range(full_model.n_c) if i not in set(keep.tolist())]
            truly = [i for i in removed if i not in set(near_keep.tolist())]
            deferred = tuple(full_model.constraint_names[i] for i in removed if i not in truly)
            redundant = tuple(full_model.constraint_names[i] for i in truly)
            report_warnings[:] = (["redundant constraints removed: " + ", ".join(redundant)]
                                  if redundant else [])
            msg = (f"initial configuration of {full_model.name!r} is singular: C_q has rank "
                   f"{keep.size} here and {near_keep.size} at nearby consistent configurations; "
                   f"constraints {', '.join(deferred)} are not redundant (dropped only at the start)")
            report_warnings.append(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=3)

    # 3. position projection, eq. 7 (Newton with the Gauss-Newton matrix)
    q = q0.copy()
    at_q0 = model is full_model  # q == q0 and the full constraint set: C0, Cq0, Ct0 hold
    iterations = 0
    if model.n_c:
        W = np.diag(Wq)
        lam = np.zeros(model.n_c)
        for iterations in range(1, max_iter + 1):
            if at_q0:
                C, Cq = C0, Cq0
            else:
                C = model.constraints(q, t0)
                Cq = model.constraint_jacobian(q, t0)
            F = np.concatenate([Wq * (q - q0) + Cq.T @ lam, C])
            if np.max(np.abs(C)) <= tol * max(1.0, float(np.max(np.abs(q)))) and \
                    np.max(np.abs(F[:n])) <= 1e-8 * max(1.0, float(np.max(Wq))):
                break
            K = augmented_matrix(W, Cq)
            try:
                step = lu_solve(lu_factor(K, "IC position projection matrix", t=t0), -F)
            except Exception as exc:
                raise InconsistentConstraintsError(
                    f"initial position projection failed for {full_model.name!r}: {exc}") from None
            q = q + step[:n]
            lam = lam + step[n:]
            at_q0 = False
            if not np.all(np.isfinite(q)):
                break
        C = C0 if at_q0 else model.constraints(q, t0)
        cmax = float(np.max(np.abs(C))) if np.all(np.isfinite(C)) else np.inf
        if not cmax <= 1e-9 * max(1.0, float(np.max(np.abs(q)))):
            names = [model.constraint_names[i] for i in np.flatnonzero(~(np.abs(C) <= 1e-9))]
            raise InconsistentConstraintsError(
                f"initial position projection of {full_model.name!r} did not converge in {max_iter} "
                f"iterations: constraints {names} remain violated (max |C| = {cmax:.3e})")
        if model is not full_model:
            Cfull = full_model.constraints(q, t0)
            bad = np.abs(Cfull) > 1e-8 * max(1.0, float(np.max(np.abs(q))))
            if bad.any():
                names = [full_model.constraint_names[i] for i in np.flatnonzero(bad)]
                raise InconsistentConstraintsError(
                    f"contradictory constraints in {full_model.name!r}: {names} cannot be satisfied "
                    f"together with the independent set")

    # 4. velocity projection, eqs. 8-9 (with nonholonomic rows B v = -b)
    v = v0.copy()
    Cq = Cq0 if at_q0 else model.constraint_jacobian(q, t0)
    rhs_c = -(Ct0 if at_q0 else model.constraint_dt(q, t0))
    if len(getattr(model, "nonholonomic_names", ())):
        Cq = np.vstack([Cq, model.nonholonomic_matrix(q, t0)])
        rhs_c = np.concatenate([rhs_c, -model.nonholonomic_offset(q, t0)])
    if Cq.shape[0]:
        K = augmented_matrix(np.diag(Wv), Cq)
        sol = lu_solve(lu_factor(K, "IC velocity projection matrix", t=t0),
                       np.concatenate([Wv * v0, rhs_c]))
        v = sol[:n]

    # 5. accelerations and multipliers, eq. 10
    qdd, lam = (consistent_accelerations(model, t0, q, v, u, M=M0, Cq=Cq0) if at_q0 else
                consistent_accelerations(model, t0, q, v, u))
    dq = float(np.max(np.abs(q - q0))) if n else 0.0
    dv = float(np.max(np.abs(v - v0))) if n else 0.0
    moved_q = dq > REPAIR_TOLERANCE * max(1.0, float(np.max(np.abs(q0))) if n else 1.0)
    moved_v = dv > REPAIR_TOLERANCE * max(1.0, float(np.max(np.abs(v0))) if n else 1.0)
    repaired = bool(moved_q or moved_v or redundant or deferred)
    if max_repair is not None and (dq > max_repair or dv > max_repair):
        worst = []
        if dq > max_repair:
            worst.append(f"positions by {dq:.3e} ({full_model.coordinates[int(np.argmax(np.abs(q - q0)))]})")
        if dv > max_repair:
            worst.append(f"velocities by {dv:.3e} (d{full_model.coordinates[int(np.argmax(np.abs(v - v0)))]})")
        raise InconsistentConstraintsError(
            f"the initial state of {full_model.name!r} is inconsistent: making it satisfy the "
            f"constraints would change {' and '.join(worst)}, more than max_ic_repair={max_repair!r} "
            f"(fix the initial state, or raise max_ic_repair)")
    if repaired:
        what = []
        if moved_q:
            i = int(np.argmax(np.abs(q - q0)))
            what.append(f"positions moved by up to {dq:.3e} ({full_model.coordinates[i]}) to satisfy "
                        f"C = 0 (eqs. 6-7)")
        if moved_v:
            i = int(np.argmax(np.abs(v - v0)))
            what.append(f"velocities by up to {dv:.3e} (d{full_model.coordinates[i]}) to satisfy "
                        f"the velocity constraints (eqs. 8-9)")
        if redundant:
            what.append("redundant constraints removed: " + ", ".join(redundant))
        if deferred:
            what.append("constraints dropped at the singular start: " + ", ".join(deferred))
        warnings.warn(f"the initial-condition analysis changed the start of {full_model.name!r} "
                      f"(seed 000 Algorithm 1): " + "; ".join(what) +
                      " — see Simulation.ic_report", InitialConditionWarning, stacklevel=4)
    return ICReport(model=model, q=q, v=v, qdd=qdd, lam=lam, redundant_constraints=redundant,
                    position_change=dq, velocity_change=dv,
                    position_iterations=iterations, singular_configuration=singular,
                    warnings=report_warnings, repaired=repaired, deferred_constraints=deferred)
