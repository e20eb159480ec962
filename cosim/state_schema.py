"""What a restorable state may contain: the schema of every method's state (issue 14).

A state handed to :meth:`Simulation.set_state` or decoded from a blob is
untrusted.  :func:`check_simulation_state` validates it COMPLETELY before
anything is applied, so a rejected state leaves the simulation untouched:

* structure: the state must have exactly the shape of this simulation's own
  state (:meth:`Simulation.get_state` is the template): same keys, same kinds
  of value (bool, int, real number, string, array), arrays of the same
  shape, real dtype and finite entries, finite real numbers;
* fields whose presence legitimately varies (the Newton LU, dense output,
  FSAL stage: each method's declared record, cosim.integrators.state_decl;
  event log, user-block memory) have their own rules below;
* ranges and cross-field invariants: step sizes > 0, BDF order in 1..5,
  counters >= 0, integrator entries at most MAX_MAGNITUDE in size, stored
  time = integrator time, t_prev <= t, plant inputs
  equal to the integrator's inputs, external inputs at most MAX_INPUT in size (as
  set_inputs takes them) and equal to the plant inputs they feed, sample clocks at the
  stored time, the LU
  factorisation finite and of the size the method's iteration matrix has for
  this model, its pivots a valid interchange sequence k <= piv[k] < n;
* after the state is applied (its parameters in place; undone on failure): the
  parameter values, if they differ from the simulation's, at the restored state
  (cosim.model_probe.probe_parameters), the positions and velocities on the
  constraints (Simulation), and the point a method that solves the equations of
  motion holds -- with a BDF history's earlier points -- against M q'' + C_qᵀ λ = Q
  (:func:`check_solved_points`).

Every violation raises :class:`StateError` naming the field by its path
(``integrator.method_state.newton.piv[2]``).  The same checks back both
backends (the numba record of generalized-α stores the same dict), and the
FMU and ROS node restore through :class:`Simulation`, so they inherit them.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np

from .errors import InvalidInputError, StateError
from .validation import MAX_INPUT, oversized_input

MAX_EVENT_LOG = 10_000       # entries an event log keeps (the oldest are dropped)
MAX_COUNT = 2 ** 62          # counters (steps, statistics, clock indices)
MAX_MAGNITUDE = 1e150        # integrator state entries: squared in the steps' norms, they stay finite
# a restored solved point may miss the equations of motion by at most this part of their
# largest term (converged steps: at most 3.3e-2 measured, rtol = 0.1, andrews, crank_slider,
# heavy_top, bdf family and generalized-α); beyond it q'' or λ are not this model's
EOM_TOLERANCE = 0.5
_EVENT_KINDS = {"state", "time", "stop", "chattering"}
_EVENT_FIELDS = {"time": "real", "name": "str", "kind": "str", "index": "int", "terminal": "bool",
                 "iterations": "int", "reason": "str", "cause": "str", "message": "str"}



def _fail(path, message):
    raise StateError(f"state field {path}: {message}")


def _real(path, value, *, finite=True):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        _fail(path, f"must be a real number, got {type(value).__name__} {value!r:.80}")
    x = float(value)
    if finite and not math.isfinite(x):
        _fail(path, f"must be finite, got {x!r}")
    return x


def _int(path, value, lo=0, hi=MAX_COUNT):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        _fail(path, f"must be an integer, got {type(value).__name__} {value!r:.80}")
    k = int(value)
    if not lo <= k <= hi:
        _fail(path, f"must be in {lo}..{hi}, got {k}")
    return k


def _array(path, value, shape, *, integer=False):
    if not isinstance(value, np.ndarray):
        _fail(path, f"must be an array, got {type(value).__name__}")
    kind = value.dtype.kind
    if integer:
        if kind not in "iu":
            _fail(path, f"must be an integer array, got dtype {value.dtype}")
    elif kind not in "fiu":
        _fail(path, f"must be a real array, got dtype {value.dtype}")
    if shape is not None and value.shape != tuple(shape):
        _fail(path, f"must have shape {tuple(shape)}, got {value.shape}")
    if kind == "f":
        bad = ~np.isfinite(value)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            _fail(f"{path}{list(idx)}", f"must be finite, got {value[idx]!r}")
    return value


def _keys(path, value, required, optional=()):
    if not isinstance(value, Mapping):
        _fail(path, f"must be a mapping, got {type(value).__name__}")
    missing = [k for k in required if k not in value]
    if missing:
        _fail(path, f"lacks {missing}")
    extra = [k for k in value if k not in required and k not in optional]
    if extra:
        _fail(path, f"has unknown entries {[str(k)[:40] for k in extra[:5]]}")


def _like(path, value, template):
    """``value`` has the structure of ``template`` (a state of this simulation)."""
    if isinstance(template, Mapping):
        _keys(path, value, list(template))
        for k in template:
            _like(f"{path}.{k}", value[k], template[k])
    elif isinstance(template, np.ndarray):
        _array(path, value, template.shape, integer=template.dtype.kind in "iu")
    elif isinstance(template, (bool, np.bool_)):
        if not isinstance(value, (bool, np.bool_)):
            _fail(path, f"must be a bool, got {type(value).__name__} {value!r:.80}")
    elif isinstance(template, numbers.Integral):
        _int(path, value, lo=-MAX_COUNT)
    elif isinstance(template, numbers.Real):
        _real(path, value, finite=math.isfinite(template))
    elif isinstance(template, str):
        if value != template:
            _fail(path, f"must be {template!r}, got {value!r:.80}")
    elif template is None:
        # a value not set yet here (e.g. a PID's previous error before its first
        # sample) may be set in the stored state: None or a finite real number
        if value is not None:
            _real(path, value)
    elif isinstance(template, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(template):
            _fail(path, f"must be a list of {len(template)}, got {type(value).__name__} "
                        f"of {len(value) if isinstance(value, (list, tuple)) else '?'}")
        for i, (v, t) in enumerate(zip(value, template)):
            _like(f"{path}[{i}]", v, t)
    else:
        _fail(path, f"has a template of unexpected type {type(template).__name__}")


def _plain(path, value, depth=0):
    """Plain data (user-block memory): JSON-like values, finite numbers, bounded depth."""
    if depth > 16:
        _fail(path, "is nested too deeply")
    if value is None or isinstance(value, (bool, np.bool_, str)):
        return
    if isinstance(value, numbers.Real):
        _real(path, value)
    elif isinstance(value, np.ndarray):
        _array(path, value, None)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _plain(f"{path}.{k}", v, depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _plain(f"{path}[{i}]", v, depth + 1)
    else:
        _fail(path, f"must be plain data, got {type(value).__name__}")


# -- shared pieces (the methods' records) ------------------------------------------------
def check_lu(path, lu, piv, n=None):
    """A stored factorisation: finite square ``lu`` of size ``n``, valid pivots."""
    if n is None:
        n = lu.shape[0] if isinstance(lu, np.ndarray) and lu.ndim == 2 else -1
    if n < 0:
        _fail(f"{path}.lu", f"must be a square matrix, got {np.shape(lu)}")
    _array(f"{path}.lu", lu, (n, n))
    if not isinstance(piv, np.ndarray) or piv.dtype.kind not in "iu" or piv.shape != (n,):
        _fail(f"{path}.piv", f"LU pivots must be an integer array of shape ({n},), got "
                             f"{type(piv).__name__} {getattr(piv, 'dtype', '')} {np.shape(piv)}")
    bad = np.flatnonzero((piv < np.arange(n)) | (piv >= n))
    if bad.size:
        k = int(bad[0])
        _fail(f"{path}.piv[{k}]", f"LU pivots must be row interchanges {k} <= piv[{k}] < {n}, got {piv[k]}")
    zero = np.flatnonzero(np.diagonal(lu) == 0.0)
    if zero.size:  # a factorisation never keeps a zero pivot (it is refused as singular)
        k = int(zero[0])
        _fail(f"{path}.lu[{k}, {k}]", "LU factor has a zero pivot (a singular matrix is never kept)")
    # what every factor the kernels keep satisfies (kernel_common.factor_matrix): partial
    # pivoting bounds the multipliers of L by 1, and a factor is kept only when its pivots
    # pass the singularity test
    from .integrators.dense_lu import pivot_ratio  # noqa: PLC0415
    from .integrators.kernel_common import PIVOT_RATIO_MIN  # noqa: PLC0415
    multipliers = np.abs(np.tril(lu, -1))
    if multipliers.max(initial=0.0) > 1.0:
        i, j = (int(k) for k in np.argwhere(multipliers > 1.0)[0])
        _fail(f"{path}.lu[{i}, {j}]", f"an LU multiplier of partial pivoting is at most 1 in size, "
                                      f"got {float(lu[i, j])!r}")
    ratio = pivot_ratio(lu)
    if not ratio > PIVOT_RATIO_MIN:  # judged again scale-free, as factor_matrix does
        from .integrators.dense_lu import scaled_pivot_ratio  # noqa: PLC0415
        ratio = scaled_pivot_ratio(lu, piv)
    if not ratio > PIVOT_RATIO_MIN:
        _fail(f"{path}.lu", f"LU factor is numerically singular: pivots min/max {ratio:.3g} "
                            f"(a factor is kept only above {PIVOT_RATIO_MIN:g})")


def check_newton_state(path, d, n=None):
    """The quasi-Newton memory of a method's state (σ, the step its matrix was formed
    with, and the kept LU with its pivots)."""
    _keys(path, d, ("sigma", "h_jac"), ("lu", "piv", "need_jac", "relax"))
    if _real(f"{path}.sigma", d["sigma"]) < 0.0:
        _fail(f"{path}.sigma", f"must be >= 0, got {d['sigma']!r}")
    h_jac = _real(f"{path}.h_jac", d["h_jac"])
    if not (h_jac == -1.0 or h_jac > 0.0):
        _fail(f"{path}.h_jac", f"must be > 0 (or -1: none), got {h_jac!r}")
    if "need_jac" in d and not isinstance(d["need_jac"], (bool, np.bool_)):
        _fail(f"{path}.need_jac", f"must be a bool, got {d['need_jac']!r:.40}")
    if "relax" in d:
        relax = _real(f"{path}.relax", d["relax"])
        if not 0.0 < relax <= 2.0:
            _fail(f"{path}.relax", f"must be in (0, 2], got {relax!r}")
    if ("lu" in d) != ("piv" in d):
        _fail(path, "must hold both lu and piv or neither")
    if "lu" in d:
        if "need_jac" not in d or "relax" not in d:
            _fail(path, "holds an LU without need_jac and relax")
        check_lu(path, d["lu"], d["piv"], n)


def newton_size(integrator):
    """Size of ``integrator``'s Newton iteration matrix (None: it has no Newton)."""
    declared = getattr(integrator, "state_declaration", None)
    return None if declared is None else declared.newton_size(integrator)


# -- the integrator part --------------------------------------------------------------------
def check_integrator_state(integrator, s, template=None, path="integrator"):
    """Validate an integrator state (``Integrator.state()`` layout) for ``integrator``."""
    template = integrator.state() if template is None else template
    _keys(path, s, list(template))
    if s["method"] != integrator.name:
        _fail(f"{path}.method", f"belongs to method {s['method']!r:.40}, not {integrator.name!r}")
    for key in template:
        if key not in ("method_state", "stats", "method"):
            _like(f"{path}.{key}", s[key], template[key])
    t = _real(f"{path}.t", s["t"])
    if _real(f"{path}.t_prev", s["t_prev"]) > t:
        _fail(f"{path}.t_prev", f"must be <= t={t!r}, got {s['t_prev']!r}")
    stats = s["stats"]
    _keys(f"{path}.stats", stats, list(template["stats"]))
    for k in template["stats"]:
        _int(f"{path}.stats.{k}", stats[k])
    _check_method_state(integrator, f"{path}.method_state", s["method_state"], template["method_state"], t)
    declared = getattr(integrator, "state_declaration", None)
    if declared is not None:
        declared.check_derivative(integrator, s, path)
        declared.check_rates(s, path)


def _magnitudes(path, value):
    """Every real entry of a restored simulation's integrator state is at most MAX_MAGNITUDE
    in size (a norm of a larger one overflows in the next step)."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _magnitudes(f"{path}.{k}", v)
    elif isinstance(value, np.ndarray):
        if value.dtype.kind == "f" and value.size:
            big = np.abs(value) > MAX_MAGNITUDE
            if big.any():
                idx = tuple(int(i) for i in np.argwhere(big)[0])
                _fail(f"{path}{list(idx)}", f"must be at most {MAX_MAGNITUDE:g} in size, "
                                            f"got {float(value[idx])!r}")
    elif isinstance(value, float) and math.isfinite(value) and abs(value) > MAX_MAGNITUDE:
        _fail(path, f"must be at most {MAX_MAGNITUDE:g} in size, got {value!r}")


def check_solved_points(integrator, s, path="integrator"):
    """The point (y, q'', λ) a restored state of a method that solves the equations of
    motion holds (:class:`~cosim.integrators.state_decl.Record` ``solved``), and every
    earlier point its difference arrays imply, satisfy M q'' + C_qᵀ λ = Q(q, v, t, u) up
    to EOM_TOLERANCE of their largest term, with the model as it is now (the state's
    parameters applied).  Else the multipliers or accelerations are not this model's:
    the next iteration matrix, formed at them, is garbage (a difference of λ of 3e113 in a
    BDF history: numerically singular).  Within a history the inputs are the state's u
    (a new input restarts the method, or moves a BDF history onto the new input's past)."""
    declared = getattr(integrator, "state_declaration", None)
    model = integrator.model
    if declared is None or declared.solved is None or model.kind != "multibody":
        return
    u = np.asarray(s["u"], dtype=float)
    for back, t, y, qdd, lam in declared.solved_points(s):
        where = (f"{path}.{declared.solved[1]}, {path}.{declared.solved[2]}" if back == 0 else
                 declared.history_fields(path))
        what = "" if back == 0 else f" at the point {back} step{'s' * (back > 1)} back it implies, t={t!r},"
        try:
            with np.errstate(all="ignore"):
                q, v = model.split(y)
                M = np.asarray(model.mass(q, t), dtype=float)
                Q = np.asarray(model.forces(q, v, t, u), dtype=float)
                rows = [np.asarray(model.constraint_jacobian(q, t), dtype=float).reshape(-1, q.size)]
                if len(getattr(model, "nonholonomic_names", ())):
                    rows.append(np.asarray(model.nonholonomic_matrix(q, t), dtype=float))
                Cq = np.vstack(rows)
                if lam.size != Cq.shape[0]:
                    return   # (multipliers of another formulation)
                Mqdd, Cl = M @ qdd, Cq.T @ lam
                scale = max(np.abs(Mqdd).max(initial=0.0), np.abs(Cl).max(initial=0.0),
                            np.abs(Q).max(initial=0.0))
                residual = np.abs(Mqdd + Cl - Q).max(initial=0.0)
                # a body at rest with no force: every term round-off; accelerations below
                # ~2e-13 (SI) count as zero
                floor = 1e3 * np.finfo(float).eps * np.abs(M).max(initial=0.0)
        except (ArithmeticError, ValueError) as exc:
            _fail(where, f"the model cannot be evaluated{what} ({type(exc).__name__}: {exc})")
        if not (np.isfinite(residual) and residual <= EOM_TOLERANCE * scale + floor):
            _fail(where, f"q'' and λ{what or ''} do not satisfy the equations of motion "
                         f"M q'' + C_qᵀ λ = Q: residual {residual:.3e} of terms up to {scale:.3e} "
                         f"(a restored state: at most {EOM_TOLERANCE:g} of them)")


def _check_method_state(integrator, path, d, template, t):
    declared = getattr(integrator, "state_declaration", None)
    if declared is not None:  # a method whose record is declared (cosim.integrators.state_decl)
        declared.check_method_state(integrator, path, d, t)
    else:   # (state-transition: none)
        _like(path, d, template)


# -- the whole simulation -------------------------------------------------------------------
def check_simulation_state(sim, s):
    """Validate a :meth:`Simulation.get_state`-layout state for ``sim`` (module docstring)."""
    template = sim.get_state()
    _keys("state", s, list(template))
    check_integrator_state(sim.integrator, s["integrator"], template["integrator"])
    integ = s["integrator"]
    _magnitudes("integrator", integ)  # (Integrator.restore alone takes them: tests of failed steps)
    time = _real("time", s["time"])
    for key in ("u_ext", "u", "z"):
        _like(key, s[key], template[key])
    if not np.array_equal(np.asarray(s["u"]), np.asarray(integ["u"])):
        _fail("u", "differs from the integrator's inputs integrator.u")
    _check_external_inputs(sim, s["u_ext"], s["u"])
    stopped = s["stopped"]
    if not isinstance(stopped, (bool, np.bool_)):
        _fail("stopped", f"must be a bool, got {stopped!r:.40}")
    t_integ = float(integ["t"])
    if stopped:
        stop_time = _real("stop_time", s["stop_time"])
        if not t_integ <= time or stop_time != t_integ:
            _fail("stop_time", f"a stopped simulation must have integrator.t = stop_time <= time, "
                               f"got integrator.t={t_integ!r}, stop_time={stop_time!r}, time={time!r}")
    else:
        if s["stop_time"] is not None:
            _fail("stop_time", "must be None while the simulation is running")
        # a run that left a singular start is ahead by τ until its first step
        lead = getattr(sim, "_integrator_lead", None)
        if time != t_integ and not (lead is not None and (time, t_integ) == lead):
            _fail("time", f"must equal the integrator time integrator.t={t_integ!r}, got {time!r}")
    for key in ("communication_steps", "events"):
        _int(key, s[key])
    _check_chatter(s["chatter"], time)
    _check_blocks(sim, s["blocks"], template["blocks"])
    _check_clocks(sim, s["clocks"], t_integ if stopped else time)
    _check_event_log(sim, s["event_log"])
    _check_params(sim, s["params"], template["params"])
    if "constraint_rows" in template:
        _check_rows(sim, s["constraint_rows"], template["constraint_rows"])


def _check_external_inputs(sim, u_ext, u):
    """The external inputs are of a size set_inputs takes (at most MAX_INPUT), and the
    plant inputs they feed hold their values (set_inputs composes them at once; blocks
    write only the others): else the next block sample or input change would hand the
    plant a value the state does not hold."""
    i = oversized_input(np.asarray(u_ext, dtype=float).tolist())
    if i is not None:
        _fail(f"u_ext[{i}]", f"must be at most {MAX_INPUT:g} in size (as set_inputs takes an input), "
                             f"got {float(u_ext[i])!r}")
    m_ext, e_ext = sim._m_ext, sim._e_ext
    u_ext, u = np.asarray(u_ext, dtype=float), np.asarray(u, dtype=float)
    bad = np.flatnonzero(u[m_ext] != u_ext[e_ext])
    if bad.size:
        i, e = int(m_ext[bad[0]]), int(e_ext[bad[0]])
        _fail(f"u_ext[{e}]", f"must equal the plant input u[{i}] ({sim.model.input_names[i]!r}) it "
                             f"feeds, {float(u[i])!r}, got {float(u_ext[e])!r}")


def _check_rows(sim, rows, template):
    """The kept rows of a model with redundant constraints: as many distinct row indices
    of the full set as now."""
    n_c = sim.model.n_c
    if (not isinstance(rows, (list, tuple)) or len(rows) != len(template)
            or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) and 0 <= i < n_c
                       for i in rows) or len(set(int(i) for i in rows)) != len(rows)):
        _fail("constraint_rows", f"must be {len(template)} distinct row indices in [0, {n_c}), "
                                 f"got {rows!r:.80}")


def _check_chatter(d, time):
    _keys("chatter", d, ("count", "last_time"))
    _int("chatter.count", d["count"])
    last = _real("chatter.last_time", d["last_time"], finite=False)
    if math.isnan(last) or last == math.inf or (math.isfinite(last) and last > time):
        _fail("chatter.last_time", f"must be -inf or a time <= {time!r}, got {last!r}")


def _check_blocks(sim, blocks, template):
    from .blocks import UserBlock
    if not isinstance(blocks, (list, tuple)) or len(blocks) != len(template):
        _fail("blocks", f"must be a list of {len(template)} block states")
    for j, (b, d, tmpl) in enumerate(zip(sim.blocks, blocks, template)):
        path = f"blocks[{j}]"
        _keys(path, d, ("outputs", "internal"))
        _like(f"{path}.outputs", d["outputs"], tmpl["outputs"])
        if isinstance(b, UserBlock):
            _plain(f"{path}.internal", d["internal"])
        else:
            _like(f"{path}.internal", d["internal"], tmpl["internal"])


def _check_clocks(sim, clocks, t):
    if not isinstance(clocks, (list, tuple)) or len(clocks) != len(sim._clocks):
        _fail("clocks", f"must be a list of {len(sim._clocks)} sample indices")
    tol = 4.0 * sim._time_tol(t)
    for j, (clock, k) in enumerate(zip(sim._clocks, clocks)):
        k = _int(f"clocks[{j}]", k)
        # the next instant not yet executed: at or after t, its predecessor before t
        nxt = (clock._o + k * clock._p) / clock._d
        prev = (clock._o + (k - 1) * clock._p) / clock._d
        if nxt < t - tol or (k > 0 and prev > t + tol):
            _fail(f"clocks[{j}]", f"sample index {k} (instant {nxt!r}) is not the next instant "
                                  f"of block {sim.blocks[j].name!r} at t={t!r}")


def _check_event_log(sim, log):
    if not isinstance(log, (list, tuple)) or len(log) > MAX_EVENT_LOG:
        _fail("event_log", f"must be a list of at most {MAX_EVENT_LOG} entries")
    n_events = len(sim.model.events)
    for i, e in enumerate(log):
        path = f"event_log[{i}]"
        _keys(path, e, ("time", "name", "kind"), tuple(_EVENT_FIELDS))
        for key, value in e.items():
            kind = _EVENT_FIELDS[key]
            if kind == "real":
                _real(f"{path}.{key}", value)
            elif kind == "int":
                _int(f"{path}.{key}", value, 0, max(n_events - 1, 0) if key == "index" else MAX_COUNT)
            elif kind == "bool":
                if not isinstance(value, (bool, np.bool_)):
                    _fail(f"{path}.{key}", f"must be a bool, got {value!r:.40}")
            elif not isinstance(value, str):
                _fail(f"{path}.{key}", f"must be a string, got {type(value).__name__}")
        if e["kind"] not in _EVENT_KINDS:
            _fail(f"{path}.kind", f"must be one of {sorted(_EVENT_KINDS)}, got {e['kind']!r:.40}")


def _check_params(sim, params, template):
    model = sim.model
    # the blocks' tunable parameters: optional (a state written before they were tunable)
    blocks = [k for k in template if k not in model.params]
    _keys("params", params, [k for k in template if k in model.params], blocks)
    by_block = {}
    for key in blocks:
        if key in params:
            _real(f"params.{key}", params[key])
            j, name = sim._block_params[key]
            by_block.setdefault(j, {})[name] = params[key]
    for j, values in by_block.items():  # as set_parameters checks them (u_min < u_max ...)
        block = sim.blocks[j]
        new = dict(block.parameter_values())
        try:
            for name, value in values.items():
                new[name] = block._check_value(name, value)
            block._check_parameters(new)
        except InvalidInputError as exc:
            _fail(f"params.{block.name}", str(exc))
    for key, tmpl in template.items():
        if key in blocks:
            continue
        _like(f"params.{key}", params[key], tmpl)
        check = getattr(model, "_check_parameter", None)
        if check is not None:
            try:
                check(key, params[key])
            except InvalidInputError as exc:
                _fail(f"params.{key}", str(exc))
