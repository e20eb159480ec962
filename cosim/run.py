"""``cosim.run(spec) -> RunResult``: one run, plain data in and out.

The loop (DESIGN.md "Data flow"): build the simulation from the spec, then
advance in communication steps to the spec's communication points (the exact
grid ``start + k·communication_step`` plus the instants where an input signal
jumps, so scheduled input changes are hit exactly), applying the input signals
after each step (zero-order hold: the value at the step's start).

Recording: with no ``record.interval`` a row is written at every
communication point (the landed state, after the inputs of the next step are
set: the scenario files' rule).  With an interval (or, without a communication
step, ``span/500``) rows are taken at ``start + k·interval``: a row that falls
on a communication point is the landed state; any other row is read from the
integrator's dense output of the accepted step that covers it (every method
has one: cubic/quintic Hermite, the RK interpolants, BDF's polynomial, the
block methods' collocation polynomial, the exact LTI transition), so the
integrator never lands on an output point.  Interpolated rows have position and
velocity constraint residuals of the interpolated state and NaN acceleration
residuals (q'' is known at steps only).  ``max_residuals`` is the largest
magnitude in each residual column of the recorded rows (what a CSV of the run
holds; acceleration over the rows that have one), ``step_max_residuals`` the
largest at the integrator's own points: the landed rows and, for interpolated
rows, the accepted step that covers them.  Cost: the integrator is
stepped one accepted step per call (the compiled backend returns to Python after
every step) and each interpolated row is evaluated in Python, so where the
method's steps are much shorter than the row interval, landing (a communication
step equal to the interval) can be cheaper on the compiled backend.

A :class:`RunResult` holds arrays, statistics, the event log and the final state
blob (``Simulation.serialize_state``): no live objects, so it pickles cheaply
and a sweep can ship it between processes.  ``to_pandas()`` gives a DataFrame
(the ``pandas`` extra) with the unit of every column.

Ctrl-C (KeyboardInterrupt) during a run raises :class:`~cosim.errors.RunInterrupted`
(a KeyboardInterrupt) whose ``result`` holds the rows recorded until then
(``result.interrupted`` is True).

What :func:`run` accepts: a :class:`~cosim.spec.SimulationSpec`, a spec or
scenario file, the name of a shipped scenario or the name of a model
(:func:`cosim.spec.load_spec`).  :func:`simulate` runs one model for a time with
inputs from Python (a table or a function of time) in one call.
"""
from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass, field

import numpy as np

from .errors import RunInterrupted, SpecError
from . import step_budget
from .multirate import exact_time
from .signals import InputSignal
from .validation import communication_step_count, finite_float

# Sensible horizons for the library models (seed benchmarks).  A user model
# declares ``default_t_end``; without one the 1 s fall-back is stated.
DEFAULT_T_END = {"andrews": 0.03, "crank_slider": 0.1, "two_link": 10.0,
                 "double_pendulum_natural": 4.0, "pendulum": 5.0, "lti": 10.0,
                 "bouncing_ball": 3.0, "knife_edge": 5.0}
FALLBACK_T_END = 1.0
DEFAULT_RECORD_POINTS = 500   # rows of a run without communication step or record interval


def default_stop_time(model):
    """(t_end, source): the model's ``default_t_end``, the library default, or the
    stated 1 s fall-back.  ``model``: an instance or a class."""
    declared = getattr(model, "default_t_end", None)
    name = getattr(model, "name", str(model))
    if declared is not None:
        return finite_float(f"{name}.default_t_end", declared, positive=True), \
            "the model's default_t_end"
    cls = model if isinstance(model, type) else type(model)
    if cls.__module__.startswith("cosim.models.") and name in DEFAULT_T_END:
        return DEFAULT_T_END[name], "library default"
    return FALLBACK_T_END, ("fall-back: the model declares no default_t_end "
                            "and no --t-end was given")


@dataclass
class RunResult:
    """What one run produced: plain arrays and data, no live objects."""
    spec: object
    model: str
    model_kind: str
    method: str
    backend: str
    time: np.ndarray            # (N,)
    states: np.ndarray          # (N, n_y)
    outputs: np.ndarray         # (N, n_out): plant outputs, then block outputs
    inputs: np.ndarray          # (N, n_in): external inputs, held from each row on
    residuals: np.ndarray       # (N, 3): position, velocity, acceleration (NaN: interpolated)
    order: np.ndarray           # (N,): method order where it varies (BDF), else NaN
    state_names: tuple
    output_names: tuple
    input_names: tuple
    coordinate_names: tuple
    plant_output_names: tuple
    units: dict
    stats: dict
    events: list
    final_state: bytes
    wall_time_s: float
    t_end: float
    t_end_source: str
    stopped: bool
    stop_time: float | None
    base_step: float | None
    base_step_exact: str | None
    blocks: list
    max_residuals: tuple
    ic_report: dict | None = None
    energy: tuple | None = None   # (at the start, at the end) where the model defines it
    coordinate_units: tuple | None = None
    metrics: dict = field(default_factory=dict)
    step_max_residuals: tuple | None = None  # at the integrator's own points (module doc)
    interrupted: bool = False     # Ctrl-C: the rows recorded until then
    # the constraint check of every communication step (Simulation.constraint_residual_report)
    constraint_check: dict | None = None

    def unit(self, name):
        """The unit of a recorded column ("s" for time; "" where the model declares none)."""
        return "s" if name == "time" else self.units.get(name, "")

    def columns(self):
        """{name: column} of every recorded column in file order: time, states, outputs,
        inputs, the three residuals and (BDF) the order."""
        cols = {"time": self.time}
        for names, data in ((self.state_names, self.states), (self.output_names, self.outputs),
                            (self.input_names, self.inputs)):
            for j, n in enumerate(names):
                cols.setdefault(n, data[:, j])
        for j, level in enumerate(("position", "velocity", "acceleration")):
            cols[f"residual_{level}"] = self.residuals[:, j]
        if np.isfinite(self.order).any():
            cols["order"] = self.order
        return cols

    def to_pandas(self, units_in_names=False):
        """A pandas DataFrame indexed by time (``time``, s), one column per state, output,
        input and residual; ``df.attrs["units"]`` maps every column (and the index) to its
        unit.  ``units_in_names``: columns named ``"angle [rad]"``.  Needs pandas (the
        ``pandas`` extra).  For xarray: ``to_pandas().to_xarray()`` (needs xarray, which
        cosim does not depend on)."""
        from .extras import require
        pd = require("pandas", "RunResult.to_pandas", "pandas")
        cols = self.columns()
        time = cols.pop("time")
        units = {n: self.unit(n) for n in cols}

        def label(n):
            return f"{n} [{units[n]}]" if units_in_names and units[n] else n
        df = pd.DataFrame({label(n): v for n, v in cols.items()},
                          index=pd.Index(time, name="time [s]" if units_in_names else "time"))
        df.attrs["units"] = {"time": "s", **{label(n): u for n, u in units.items()}}
        df.attrs["model"], df.attrs["method"] = self.model, self.method
        if self.interrupted:
            df.attrs["interrupted"] = True
        return df

    def signal(self, name):
        """A recorded column by name: an output, else a state, else an input."""
        for names, data in ((self.output_names, self.outputs), (self.state_names, self.states),
                            (self.input_names, self.inputs)):
            if name in names:
                return data[:, list(names).index(name)]
        raise SpecError(f"no recorded signal {name!r} (outputs: {', '.join(self.output_names)}; "
                        f"states: {', '.join(self.state_names)}; inputs: "
                        f"{', '.join(self.input_names) or 'none'})")

    def recorded(self):
        """{name: column} of the spec's ``record.signals`` (default: outputs, states, inputs)."""
        names = self.spec.record_signals
        if names is None:
            names = list(dict.fromkeys([*self.output_names, *self.state_names, *self.input_names]))
        return {n: self.signal(n) for n in names}


# -- communication and record grids ---------------------------------------------------------
def communication_points(spec, stop, signals=()):
    """Exact grid start + k·dt up to ``stop`` (dt = the communication step; none: only
    ``stop``), plus the signals' breakpoints, without slivers."""
    start = exact_time(spec.start_time, "start_time", positive=False)
    stop_f = exact_time(stop, "stop_time", positive=False)
    points = {float(stop_f)}
    if spec.communication_step is not None:
        dt = exact_time(spec.communication_step, "communication_step")
        communication_step_count(float(stop_f - start), float(dt))
        n = math.ceil((stop_f - start) / dt)
        points.update(grid_times(start, dt, 1, n))
    for sig in signals:
        points.update(t for t in sig.breakpoints if spec.start_time < t < stop)
    out = []
    for t in sorted(points):  # drop slivers from coinciding breakpoints
        if not out or t - out[-1] > 1e-12 * max(1.0, abs(t)):
            out.append(t)
    return out


def grid_times(start, step, k0, k1):
    """[float(start + k·step) for k in range(k0, k1)] for exact Fractions, each the
    correctly rounded float of the exact time, computed as one integer division per
    point (Python's int / int rounds correctly) instead of Fraction arithmetic: a
    million points in a fraction of a second rather than a minute."""
    den = math.lcm(start.denominator, step.denominator)
    n0 = start.numerator * (den // start.denominator)
    a = step.numerator * (den // step.denominator)
    return [(n0 + k * a) / den for k in range(k0, k1)]


def record_times(spec, stop):
    """Row times start + k·interval (the last one is ``stop``), or None: one row per
    communication point."""
    interval = spec.record_interval
    start = exact_time(spec.start_time, "start_time", positive=False)
    stop_f = exact_time(stop, "stop_time", positive=False)
    if interval is None:
        if spec.communication_step is not None:
            return None
        step = (stop_f - start) / DEFAULT_RECORD_POINTS
    else:
        step = exact_time(interval, "record.interval")
    n = communication_step_count(float(stop_f - start), float(step))
    times = grid_times(start, step, 0, n)
    times.append(float(stop_f))
    return np.array(times)


def _all_landed(rows, points):
    """True when every row time is a communication point (no dense output needed)."""
    grid = np.asarray(points)
    k = np.clip(np.searchsorted(grid, rows[1:]), 0, len(grid) - 1)
    near = np.minimum(np.abs(grid[k] - rows[1:]), np.abs(grid[np.maximum(k - 1, 0)] - rows[1:]))
    return bool(np.all(near <= 1e-12 * np.maximum(1.0, np.abs(rows[1:]))))


def _tol(t):
    return 1e-12 * max(1.0, abs(t))


class _Recorder:
    """Rows of time, state, outputs, inputs, residuals, order (preallocated when the
    row count is known)."""

    def __init__(self, sim):
        self.sim = sim
        self.rows = []
        self.kind = sim.model.kind
        self.peak = np.zeros(3)

    def landed(self):
        sim = self.sim
        res = sim.constraint_residuals()
        self.peak = np.fmax(self.peak, np.abs(res))
        self.rows.append((sim.time, sim.y, sim.get_outputs(), sim.get_inputs(), res,
                          getattr(sim.integrator, "order", np.nan)))

    def dense(self, t, integ):
        sim = self.sim
        y = integ.y.copy() if t == integ.t else np.asarray(integ.dense_output(t), dtype=float).copy()
        if self.kind == "multibody":
            pos, vel, _ = sim.model.residual_levels(t, y, None)
            res = (pos, vel, math.nan)
        else:
            res = (0.0, 0.0, 0.0)
        self.rows.append((t, y, sim.outputs_at(t, y), sim.get_inputs(), res,
                          getattr(integ, "order", np.nan)))

    def frozen(self, t):
        sim = self.sim
        self.rows.append((t, sim.y, sim.get_outputs(), sim.get_inputs(), sim.constraint_residuals(),
                          getattr(sim.integrator, "order", np.nan)))

    def step_residuals(self):
        self.peak = np.fmax(self.peak, np.abs(self.sim.constraint_residuals()))

    def arrays(self):
        n = len(self.rows)
        cols = list(zip(*self.rows))
        return (np.array(cols[0], dtype=float), np.array(cols[1], dtype=float).reshape(n, -1),
                np.array(cols[2], dtype=float).reshape(n, -1), np.array(cols[3], dtype=float).reshape(n, -1),
                np.array(cols[4], dtype=float).reshape(n, 3), np.array(cols[5], dtype=float))


def execute(spec, *, progress=None, allow_files=False, end_at_stop_event=False, sim=None,
            signals=()):
    """Run ``spec``; returns (simulation, RunResult).  The callers that need the live
    simulation (the ``Scenario`` API, a REPL) use this; everything else uses :func:`run`.
    ``end_at_stop_event``: end the recording at a terminal event (``cosim simulate``),
    else continue to the stop time with the state frozen (the stepper's rule).
    ``progress``: see :mod:`cosim.progress`.  ``signals``: input signals from Python
    (:func:`cosim.signals.python_signals`) besides the spec's."""
    from .progress import progress_callback
    from .simulation import Simulation
    if sim is None:
        sim = Simulation.from_spec(spec, allow_files=allow_files)
    stop, stop_source = spec.resolved_stop_time(sim.model)
    progress, close_progress = progress_callback(progress, spec.start_time, stop)
    try:
        return _execute(spec, sim, stop, stop_source, progress, end_at_stop_event,
                        [*(InputSignal(n, s) for n, s in _plain(spec.inputs).items()), *signals])
    finally:
        close_progress()


def _execute(spec, sim, stop, stop_source, progress, end_at_stop_event, signals):
    driven = [(sim.input_names.index(sig.name), sig) for sig in signals
              if not getattr(sig, "exact", False)]
    known = {*sim.output_names, *sim.state_names, *sim.input_names}
    for where, names in (("record.signals", spec.record_signals or ()),
                         ("metrics", [m.signal for m in spec.metrics if m.signal is not None])):
        bad = [n for n in names if n not in known]
        if bad:
            raise SpecError(f"{where}: unknown signal {bad[0]!r} (outputs: {', '.join(sim.output_names)}; "
                            f"states: {', '.join(sim.state_names)}; inputs: "
                            f"{', '.join(sim.input_names) or 'none'})")
    u = sim.get_inputs()

    def apply_inputs(t):
        if driven:
            for i, sig in driven:
                u[i] = sig.value_at(t)
            sim.set_inputs(u)

    points = communication_points(spec, stop, signals)
    # an adaptive method that cannot reach the tolerance within its budget: refused
    # here (or one warning when another method is far cheaper), not after max_steps
    step_budget.check(sim, stop, max(b - a for a, b in zip([sim.time, *points], points)), len(points),
                      driven=bool(driven or sim.blocks))
    rows = record_times(spec, stop)
    rec = _Recorder(sim)
    apply_inputs(sim.time)
    rec.landed()
    k_row = 1  # next row time to record (rows[0] is the start)
    observer = None
    if rows is not None and not _all_landed(rows, points):
        state = {"end": 0.0}

        def record_rows_inside(integ):
            nonlocal k_row
            end = state["end"]
            k0 = k_row
            while k_row < len(rows) and rows[k_row] <= integ.t and rows[k_row] < end - _tol(end):
                rec.dense(float(rows[k_row]), integ)
                k_row += 1
            if k_row > k0:  # the integrator's own point next to these rows (q'' known here)
                rec.step_residuals()
            if progress is not None:
                progress(integ.t)
        observer = record_rows_inside

    wall0 = _time.perf_counter()
    try:
        for t_next in points:
            if observer is not None:
                state["end"] = t_next
            sim.do_step(sim.time, t_next - sim.time, observer)
            apply_inputs(t_next)  # ZOH: the value at the start of the next step (grid time)
            if rows is None:
                rec.landed()
            else:
                while k_row < len(rows) and rows[k_row] <= t_next + _tol(t_next):
                    if abs(rows[k_row] - t_next) <= _tol(t_next):
                        rec.landed()
                    else:  # after a terminal event: the frozen state (no steps to observe)
                        rec.frozen(float(rows[k_row]))
                    k_row += 1
            if progress is not None:
                progress(sim.time)
            if end_at_stop_event and sim.stopped:
                break
    except KeyboardInterrupt:
        partial = _result(spec, sim, rec, _time.perf_counter() - wall0, stop, stop_source,
                          interrupted=True)
        raise RunInterrupted(partial) from None
    wall = _time.perf_counter() - wall0
    return sim, _result(spec, sim, rec, wall, stop, stop_source)


def run(spec, *, progress=None, allow_files=False, **changes):
    """Run one spec; returns a :class:`RunResult`.

    ``spec``: a :class:`~cosim.spec.SimulationSpec`, a spec or scenario file, the name of
    a shipped scenario (``"pendulum_pd"``) or of a model (``"pendulum"``: its defaults,
    communication steps of 10 ms); see :func:`cosim.spec.load_spec`.  ``changes``: keys
    of the spec vocabulary applied first (``stop_time=1.0``, ``params={"l": 2.0}``).
    ``progress``: None (default) draws a bar on stderr when it is a terminal and the
    run takes longer than 2 s (elsewhere a plain line every 10 s), True always, False never, or a callable ``f(t)`` called
    after every communication step (:mod:`cosim.progress`).  ``allow_files``: a spec
    whose model is ``file.py:Class`` may load that file.  Ctrl-C raises
    :class:`~cosim.errors.RunInterrupted` carrying the rows recorded so far."""
    from .spec import load_spec
    return execute(load_spec(spec, **changes), progress=progress, allow_files=allow_files)[1]


def simulate(model, t_end=None, *, inputs=None, method=None, progress=None, **options):
    """Simulate ``model`` for ``t_end`` seconds in one call; returns a :class:`RunResult`
    (``.to_pandas()`` for a DataFrame with units).

    ``model``: a library name, ``package.module:Class``, ``file.py:Class``, or a model
    class or instance.  ``t_end``: the run's length (default: the model's).
    ``inputs``: a function ``f(t)`` returning ``{name: value}`` or the values in input
    order, a mapping ``{name: value | f(t) | (times, values) | signal spec}``, or a table
    (a DataFrame indexed by time or with a ``time`` column, a structured array with a
    ``time`` field, or a 2-D array ``[time, input1, ...]``); every value is held from its
    time on (zero-order hold).  ``method``: default the model's.  ``options``: keys of the
    spec vocabulary -- ``params``, ``rtol``, ``atol``, ``h``, ``method_options``,
    ``backend``, ``communication_step`` (default: 10 ms with a function input, else none:
    the run lands only on table times, recording 500 rows from the dense output),
    ``record_interval``, ``start_time``, ``max_ic_repair``, ...  ``progress``: as for
    :func:`run`."""
    from .models import Model
    from .signals import python_signals
    from .simulation import Simulation
    from .spec import SimulationSpec
    obj = model if isinstance(model, (type, Model)) else None
    if obj is not None:
        cls = model if isinstance(model, type) else type(model)
        name = model.spec() if isinstance(model, type) and hasattr(model, "robot") else \
            f"{cls.__module__}:{cls.__qualname__}"
    elif isinstance(model, str):
        name = model
    else:
        raise SpecError(f"model must be a name, a model class or a model instance, got "
                        f"{type(model).__name__}")
    options = dict(options)
    start = options.pop("start_time", 0.0)
    record_interval = options.pop("record_interval", None)
    data = {"model": name, "method": method, "start_time": start, **options}
    if t_end is not None:
        data["stop_time"] = finite_float("start_time", start) + finite_float("t_end", t_end,
                                                                              positive=True)
    data.setdefault("communication_step", 0.01 if callable(inputs) or (
        isinstance(inputs, dict) and any(callable(v) for v in inputs.values())) else None)
    if record_interval is not None:
        data["record"] = {"interval": record_interval}
    spec = SimulationSpec.from_dict(data, source="cosim.simulate")
    if obj is None:
        sim = Simulation.from_spec(spec, allow_files=True)
    else:
        sim = Simulation.from_spec(spec, model=obj)
    signals = python_signals(inputs, sim.input_names, sim.get_inputs())
    return execute(spec, sim=sim, progress=progress, signals=signals)[1]


def _plain(value):
    from .spec import thaw
    return thaw(value)


def _units(sim):
    """{column: unit}: the model's outputs and inputs; a block output connected to a plant
    input carries that input's unit; coordinates (and their rates) where the model
    declares ``coordinate_units``."""
    model = sim.model
    units = {s.name: s.unit for s in (*model.outputs, *model.inputs)}
    for src, dst, *_ in sim.connections:
        base = dst[6:] if dst.startswith("plant.") else dst
        if base in units and src not in units:
            units[src] = units[base]
    coord = getattr(model, "coordinate_units", None)
    names = list(sim.coordinate_names)
    if coord and len(coord) == len(names):
        for n, u in zip(names, coord):
            units.setdefault(n, u)
            units.setdefault("d" + n, f"{u}/s")
    return units


def _column_max(values):
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size else math.nan


def _result(spec, sim, rec, wall, stop, stop_source, interrupted=False):
    time, states, outputs, inputs, residuals, order = rec.arrays()
    model = sim.model
    units = _units(sim)
    base = sim.base_step_exact
    energy = None
    if hasattr(model, "energy"):
        e0 = model.energy(time[0], states[0], None)
        e1 = model.energy(time[-1], states[-1], None)
        energy = None if e0 is None or e1 is None else (float(e0), float(e1))
    stats = sim.stats
    if sim.fixed_step_error is not None:   # the largest fixed-step error estimate (cosim.fixed_step)
        stats["fixed_step_error"] = sim.fixed_step_error
    result = RunResult(
        spec=spec, model=model.name, model_kind=model.kind, method=sim.method, backend=sim.backend,
        time=time, states=states, outputs=outputs, inputs=inputs, residuals=residuals, order=order,
        state_names=tuple(sim.state_names), output_names=tuple(sim.output_names),
        input_names=tuple(sim.input_names), coordinate_names=tuple(sim.coordinate_names),
        plant_output_names=tuple(model.output_names), units=units, stats=stats,
        events=sim.event_log, final_state=_final_state(sim, interrupted), wall_time_s=wall,
        t_end=float(stop), t_end_source=stop_source, stopped=sim.stopped, stop_time=sim.stop_time,
        base_step=sim.base_step,
        base_step_exact=None if base is None else f"{base.numerator}/{base.denominator}",
        blocks=[{"name": b.name, "type": b.type_name, "sample_time": float(b.sample_time),
                 "offset": float(b.offset)} for b in sim.blocks],
        max_residuals=tuple(_column_max(residuals[:, j]) for j in range(3)),
        step_max_residuals=tuple(float(x) for x in rec.peak), interrupted=interrupted,
        ic_report=sim.ic_report.as_dict() if sim.ic_report is not None else None,
        energy=energy, coordinate_units=getattr(model, "coordinate_units", None),
        constraint_check=sim.constraint_residual_report)
    result.metrics = {m.name: metric_value(m, result) for m in spec.metrics}
    return result


def _final_state(sim, interrupted):
    if not interrupted:
        return sim.serialize_state()
    try:  # interrupted inside a step: the live state may be half-way
        return sim.serialize_state()
    except Exception:  # noqa: BLE001 - the rows are what an interrupted run keeps
        return b""


def metric_value(metric, result):
    """One declared metric of a run (cosim.spec.Metric): final, max, min, RMS (time-
    weighted, trapezoidal), settling time (from the start until the signal stays within
    the band around its final value), events (count)."""
    if metric.kind == "events":
        return float(result.stats["events"])
    x = result.signal(metric.signal)
    t = result.time
    if metric.kind == "final":
        return float(x[-1])
    if metric.kind == "max":
        return float(np.max(x))
    if metric.kind == "min":
        return float(np.min(x))
    if metric.kind == "rms":
        span = t[-1] - t[0]
        return float(math.sqrt(np.trapezoid(x * x, t) / span)) if span > 0 else float(abs(x[-1]))
    final = x[-1]
    band = metric.tolerance if metric.tolerance is not None else \
        metric.band * max(abs(final - x[0]), np.finfo(float).tiny)
    outside = np.flatnonzero(np.abs(x - final) > band)
    if outside.size == 0:
        return 0.0
    k = outside[-1] + 1
    return float(t[min(k, len(t) - 1)] - t[0])


__all__ = ["RunResult", "run", "simulate", "execute", "default_stop_time", "metric_value", "communication_points",
           "record_times", "DEFAULT_T_END", "FALLBACK_T_END"]

