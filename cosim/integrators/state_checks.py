"""The schema of a method's part of a restorable state, which is untrusted input
(:mod:`cosim.state_schema` calls :meth:`RecordChecks.check_method_state`): the checks
that :class:`cosim.integrators.state_decl.Record` inherits, driven by the same one
declaration of the method's fields (their kinds in :mod:`.state_fields`)."""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from cosim.integrators.state_fields import (LAST_STEP, NEWTON, NONNEGATIVE, SENTINEL, STEP, TIME,
                                            Bounded, Counts, LeadingPositive, Matrix, Range)

# rkc-penalty's q' solves eq. 91 to this part of its largest term (round-off: ≤ 4e-16 measured)
PENALTY_ROUNDOFF = 1e-8
# generalized-α's rates give the last step's change to this part of its terms (≤ 6e-17 measured)
RATE_ROUNDOFF = 1e-12


def _flags(f):
    """The flag slots of a flagged field (one, or a tuple of them)."""
    return f.flag if isinstance(f.flag, tuple) else (f.flag,)


def _get(tree, path):
    for key in path.split("."):
        tree = tree[key]
    return tree


class RecordChecks:
    """The checks of :class:`cosim.integrators.state_decl.Record` (a mixin: it reads
    the record's fields, slots and size expressions)."""

    # -- the schema ------------------------------------------------------------------
    def check_method_state(self, integ, path, d, t):
        """Validate the ``method_state`` part ``d`` of an untrusted state for ``integ``
        (the rest is the schema every integrator shares: cosim.state_schema)."""
        from ..state_schema import (MAX_COUNT, _array, _fail, _int, _keys, _real,  # noqa: PLC0415
                                    check_newton_state)
        sizes = self.sizes_of(integ._I)
        fields = [f for f in self.fields if f.key is not None and f.key.startswith("method_state.")]
        _keys(path, d, [f.key.split(".", 1)[1] for f in fields])
        for f in fields:
            key = f.key.split(".", 1)[1]
            p, v = f"{path}.{key}", d[key]
            if f.kind == NEWTON:
                check_newton_state(p, v, self._length(f.name, sizes))
                continue
            if (f.flag is not None or f.kind == TIME) and v is None:
                continue
            if isinstance(f.kind, (Matrix, LeadingPositive, Range, Counts)):
                self._check_fixed_kind(f, p, v, d, sizes)
            elif isinstance(f.kind, Bounded):
                self._check_bounded(integ, f, p, v)
            elif f.store == "I":
                _int(p, v, 0, MAX_COUNT)
            elif f.size is None:
                x = _real(p, v)
                if f.kind == STEP and not x > 0.0:
                    _fail(p, f"must be > 0, got {x!r}")
                if (f.kind == STEP or f.kind == LAST_STEP and x > 0.0) \
                        and not x > 4.0 * np.finfo(float).eps * abs(t):  # a step must move t
                    _fail(p, f"step size {x!r} does not advance t={t!r}")
                if f.kind in (SENTINEL, LAST_STEP) and not (x >= 0.0 or x == -1.0):
                    _fail(p, f"must be >= 0 (or -1: none), got {x!r}")
                if f.kind == NONNEGATIVE and x < 0.0:
                    _fail(p, f"must be >= 0, got {x!r}")
            elif not self._parts(f, integ.name):
                _array(p, v, (self._length(f.name, sizes),))
            else:
                parts = self._parts(f, integ.name)
                _keys(p, v, [q[0] for q in parts])
                for q in parts:
                    shape = () if len(q) == 2 else tuple(sizes[s] if isinstance(s, str) else s for s in q[2])
                    _array(f"{p}.{q[0]}", v[q[0]], shape)
                    if len(q) == 2 and not float(v[q[0]]) > 0.0:
                        _fail(f"{p}.{q[0]}", f"must be > 0, got {float(v[q[0]])!r}")
        for f in fields:   # (after the Newton memory's own checks: valid pivots)
            if isinstance(f.kind, Matrix) and f.kind.factors:
                self._check_factors(f"{path}.{f.key.split('.', 1)[1]}", d, f)

    def _last_step(self, state):
        """The size h of the last step when the state's memory belongs to it (h > 0 and
        t − t_prev = h to round-off: not after generalized-α's landing sliver, which moves
        t_prev and keeps the memory of the step before); else None."""
        if self.last_step is None:
            return None
        h, t, t_prev = float(_get(state, self.last_step[0])), float(state["t"]), float(state["t_prev"])
        return h if h > 0.0 and abs((t - t_prev) - h) <= 8.0 * np.finfo(float).eps * max(abs(t), h) else None

    def history_fields(self, path):
        """The fields that imply the earlier solved points (for a refusal's message)."""
        if self.last_step is None:
            return f"{path}.method_state.Dz"
        lam_key = next(k for k, (x, _) in self.last_step[1].items() if x == self.solved[2])
        return f"{path}.y_prev, {path}.{self.last_step[2]}, {path}.{lam_key}"

    def history_key(self):
        """The key of the difference arrays of y whose rows imply the earlier points."""
        return next(f.key for f in self.fields if isinstance(f.kind, Matrix) and f.kind.of == self.solved[:1])

    def check_rates(self, state, path):
        """Each rate r of the last step's memory moved its value by h r (``last_step``), to
        round-off: a = q''_prev + x and x_rate = x/h as the step wrote them (measured ≤ 6e-17
        of the terms: pendulum, two_link, andrews, crank_slider, index 3 and GGL, inputs
        changing)."""
        from ..state_schema import _fail  # noqa: PLC0415
        h = self._last_step(state)
        if h is None:
            return
        for rate_key, (value_key, before_key) in self.last_step[1].items():
            if before_key is None:
                continue
            r, x, x0 = (np.asarray(_get(state, k), dtype=float) for k in (rate_key, value_key, before_key))
            with np.errstate(all="ignore"):
                residual = np.abs(x - x0 - h * r)
                scale = np.abs(x) + np.abs(x0) + np.abs(h * r)
            bad = np.flatnonzero(~(residual <= RATE_ROUNDOFF * scale))
            if bad.size:
                i = int(bad[0])
                _fail(f"{path}.{rate_key}[{i}]", f"the last step (h = {h!r}) moved {value_key}[{i}] by "
                                                 f"{float(x[i] - x0[i])!r} from {before_key}, which its "
                                                 f"rate {float(r[i])!r} does not give (h·rate = "
                                                 f"{float(h * r[i])!r})")

    def check_derivative(self, integ, state, path):
        """The derivative f = y' a state holds (``derivative``) is the one of its point, as
        every step writes it: q' = v (when declared) and f's accelerations = its q'', bit
        for bit.  Else a step starts from a stage that is not this point's (an acceleration
        of 1e20 fails it at a step of 1e-13)."""
        from ..state_schema import _fail  # noqa: PLC0415
        if self.derivative is None or integ.model.kind != "multibody":
            return
        key, qdd_key, velocities = self.derivative
        f = _get(state, key)
        if f is None:
            return
        qdd, y = np.asarray(_get(state, qdd_key)), np.asarray(state["y"])
        n = qdd.size
        if isinstance(velocities, str):   # the penalty form's q' (the Bayo form: q' = v)
            velocities = _get(state, "method_state.alpha") >= 0.0 or \
                self._check_penalty_velocity(integ, state, f[:n], float(_get(state, velocities)), path, key)
        parts = [(n, qdd, qdd_key)] + ([(0, y[n:], "y (its velocities)")] if velocities else [])
        for start, want, what in parts:
            bad = np.flatnonzero(f[start:start + n] != want)
            if bad.size:
                i = int(bad[0])
                _fail(f"{path}.{key}[{start + i}]", f"must equal {what}[{i}] = {float(want[i])!r} "
                                                    f"(the derivative at the state's point), "
                                                    f"got {float(f[start + i])!r}")

    @staticmethod
    def _check_penalty_velocity(integ, state, qd, chi, path, key):
        """q' of rkc-penalty's seed form solves C_q q' + C_t = −χ C (seed 000 eq. 91) on
        the holonomic rows, to round-off (measured ≤ 4e-16 of its terms: pendulum,
        two_link, andrews); False (q' is not v)."""
        from ..state_schema import _fail  # noqa: PLC0415
        model, t = integ.model, float(state["t"])
        q = np.asarray(state["y"])[:qd.size]
        with np.errstate(all="ignore"):
            Cq = np.asarray(model.constraint_jacobian(q, t), dtype=float).reshape(-1, q.size)
            if not Cq.size:
                return False
            C = np.asarray(model.constraints(q, t), dtype=float).reshape(-1)
            Ct = np.asarray(model.constraint_dt(q, t), dtype=float).reshape(-1)
            terms = (np.abs(Cq) @ np.abs(qd), np.abs(Ct), chi * np.abs(C))
            residual = np.abs(Cq @ qd + Ct + chi * C).max()
            scale = max(x.max(initial=0.0) for x in terms)
        if not residual <= PENALTY_ROUNDOFF * scale:
            _fail(f"{path}.{key}", f"its velocities q' do not satisfy C_q q' + C_t = -χ C (seed 000 "
                                   f"eq. 91, χ = {chi!r}): residual {residual:.3e} of terms up to "
                                   f"{scale:.3e} (round-off: at most {PENALTY_ROUNDOFF:g} of them)")
        return False

    def solved_points(self, state):
        """(how far back, t, y, q'', λ) of the point an (already schema-checked) state
        holds and of every earlier accepted point its difference arrays imply: the
        predictor polynomial of eq. 69 evaluated at h = −τ_{i−1} interpolates the
        accepted values there (its weights ω_j vanish for j ≥ i).  Empty when the record
        declares no ``solved`` point."""
        if self.solved is None:
            return []
        y, qdd, lam = (np.asarray(_get(state, k), dtype=float) for k in self.solved)
        t = float(state["t"])
        if self.solved_after_step and not float(state["t_prev"]) < t:
            return []
        points = [(0, t, y, qdd, lam)]
        h = self._last_step(state)
        if h is not None:   # the point before the last step, λ from its rate
            rates = self.last_step[1]
            lam_key = next(k for k, (x, _) in rates.items() if x == self.solved[2])
            with np.errstate(all="ignore"):
                lam_prev = lam - h * np.asarray(_get(state, lam_key), dtype=float)
            points.append((1, float(state["t_prev"]), np.asarray(state["y_prev"], dtype=float),
                           np.asarray(_get(state, self.last_step[2]), dtype=float), lam_prev))
        diffs = {f.kind.of: np.asarray(_get(state, f.key), dtype=float) for f in self.fields
                 if isinstance(f.kind, Matrix) and f.kind.of}
        D, Dz = diffs.get(self.solved[:1]), diffs.get(self.solved[1:])
        if D is None or Dz is None or self.steps is None:
            return points
        tau = np.asarray(_get(state, self.steps[0]), dtype=float)
        valid = min(int(_get(state, self.steps[1])), D.shape[0] - 1, tau.size)
        z, n = np.concatenate([qdd, lam]), qdd.size
        with np.errstate(all="ignore"):
            for i in range(1, valid + 1):
                h = -tau[i - 1]
                w = np.cumprod([(h + (tau[j - 1] if j else 0.0)) / tau[j] for j in range(i)])
                zi = z + w @ Dz[1:i + 1]
                points.append((i, t + h, y + w @ D[1:i + 1], zi[:n], zi[n:]))
        return points

    def _check_fixed_kind(self, f, p, v, d, sizes):
        """The schema of a value of a kind of fixed size."""
        from ..state_schema import MAX_COUNT, _array, _fail, _int  # noqa: PLC0415
        kind = f.kind
        if isinstance(kind, Range):
            _int(p, v, self._evaluate(kind.lo, {}), self._evaluate(kind.hi, {}))
        elif isinstance(kind, Counts):
            n = self._evaluate(kind.length, {})
            if not isinstance(v, (list, tuple)) or len(v) != n:
                _fail(p, f"must be a list of {n}, got {type(v).__name__} "
                         f"of {len(v) if isinstance(v, (list, tuple)) else '?'}")
            for i, c in enumerate(v):
                _int(f"{p}[{i}]", c, 0, MAX_COUNT)
        elif isinstance(kind, Matrix):
            _array(p, v, self._shape(f, sizes))
            for flag in _flags(f)[1:]:
                self._check_held_with(p, d, flag)
        else:
            head = _array(p, v, (self._length(f.name, sizes),))[:kind.count]
            if not (head > 0.0).all():
                _fail(p, f"must start with {kind.count} positive {kind.what}, got {head.tolist()}")

    def _check_bounded(self, integ, f, p, v):
        """A run's constant (:class:`~cosim.integrators.state_fields.Bounded`): in its
        parameter range, or the formulation's sentinel exactly when the integrator holds it."""
        from ..models import ranges  # noqa: PLC0415
        from ..state_schema import _fail, _real  # noqa: PLC0415
        x, none = _real(p, v), f.kind.none
        if none is not None and (x == none) != (float(integ._S[self.slots[f.name]]) == none):
            _fail(p, f"must be {none:g} exactly in the formulation whose value is {none:g} "
                     f"(this integrator's is {float(integ._S[self.slots[f.name]])!r}), got {x!r}")
        bound = ranges.Range(0.0, math.inf, low_open=True) if f.kind.bound is None else \
            getattr(ranges, f.kind.bound)
        if x != none and not bound.contains(x):
            _fail(p, f"must be {bound}, got {x!r}")

    def _check_factors(self, p, d, f):
        """The kept LU is the factorisation of the matrix ``f`` it is held with: P^T L U
        equals it to the backward error of partial pivoting, 4 n ε max(|L||U|) (measured
        ≤ 1.7e-16 of it: bdf, bdf-i2, bdf-i1 on pendulum, two_link, andrews)."""
        from ..state_schema import _fail  # noqa: PLC0415
        newton = next(g for g in self.fields if g.kind == NEWTON)
        memory, J = d.get(newton.key.split(".", 1)[1]), d.get(f.key.split(".", 1)[1])
        if J is None or not (isinstance(memory, Mapping) and "lu" in memory):
            return
        lu = np.asarray(memory["lu"], dtype=float)
        n = lu.shape[0]
        perm = list(range(n))   # row k of P J is row perm[k] of J (the interchanges in order)
        for k, r in enumerate(memory["piv"].tolist()):
            perm[k], perm[r] = perm[r], perm[k]
        L, U = np.tril(lu, -1), np.triu(lu)
        L[np.diag_indices(n)] = 1.0
        with np.errstate(all="ignore"):
            LU = L @ U
            bound = 4.0 * n * np.finfo(float).eps * (np.abs(L) @ np.abs(U)).max(initial=0.0)
            diff = np.abs(LU - J[perm])
        if not diff.max(initial=0.0) <= bound:
            k, j = (int(x) for x in np.argwhere(~(diff <= bound))[0])
            i = perm[k]
            _fail(f"{p}[{i}, {j}]", f"the kept LU factors a matrix whose entry is {float(LU[k, j])!r}, "
                                    f"not this one's {float(J[i, j])!r} (P^T L U must equal it to "
                                    f"{bound:.3g}: the LU and its matrix are stored together)")

    def _check_held_with(self, p, d, flag):
        """A value held while the Newton memory's flag is set needs the state's LU too."""
        from ..state_schema import _fail  # noqa: PLC0415
        newton = next((g for g in self.fields if g.kind == NEWTON and g.flag == flag), None)
        if newton is not None:
            memory = d.get(newton.key.split(".", 1)[1])
            if not (isinstance(memory, Mapping) and "lu" in memory):
                _fail(p, "is stored without its LU factorisation")
