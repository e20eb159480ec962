"""``cosim simulate MODEL``: run one model with one method and report.

A thin caller of :func:`cosim.run.execute`: the run is one communication step
to ``--t-end`` recorded every ``t_end/500`` from the integrator's dense output
(it does not land on output points); with ``--dt`` it advances in communication
steps of ``--dt`` with the inputs held (ZOH), landing on and recording each,
exactly as the FMU and the ROS node do, so the three agree.
"""
import argparse
import json
import sys
import warnings

import numpy as np

from .. import fixed_step
from ..errors import ConvergenceError, CosimWarning, InvalidInputError, RunInterrupted
from ..model_files import resolve_cli_model
from ..options import check_output_file, check_plot_path, check_step_against_grid, check_tolerances, parse_assignments, warn
from ..run import DEFAULT_T_END, FALLBACK_T_END, default_stop_time, execute
from ..spec import SimulationSpec, thaw
from ..validation import communication_step_count, finite_float

__all__ = ["DEFAULT_T_END", "FALLBACK_T_END", "parse_assignments", "run_simulation", "stop_time",
           "summary_dict", "write_csv", "write_plot"]


def stop_time(model, t_end=None):
    """(t_end, source): the given value (``--t-end``), else :func:`cosim.run.default_stop_time`."""
    if t_end is not None:
        return finite_float("t_end", t_end, positive=True), "--t-end"
    return default_stop_time(model)




def simulation_spec(model, method="auto", *, t_end=None, dt=None, rtol=None, atol=None,
                    h=None, params=None, method_options=None, backend="auto", max_ic_repair=None):
    """The :class:`~cosim.spec.SimulationSpec` of a ``cosim simulate`` run: one
    communication step to ``t_end`` (nothing changes the inputs) recorded every
    ``t_end/500`` from the dense output; ``dt`` given: communication steps of ``dt``,
    landed and recorded (the integrator lands on every one)."""
    if isinstance(model, type) and hasattr(model, "robot"):  # a URDF robot: its text travels
        name = model.spec()
    else:
        name = model if isinstance(model, str) else \
            f"{(model if isinstance(model, type) else type(model)).__module__}:" \
            f"{(model if isinstance(model, type) else type(model)).__qualname__}"
    return SimulationSpec.from_dict({
        "model": name, "params": dict(params or {}), "method": method, "rtol": rtol, "atol": atol,
        "h": h, "method_options": dict(method_options or {}), "backend": backend, "stop_time": t_end,
        "communication_step": dt, "max_ic_repair": max_ic_repair}, source="cosim simulate")


def is_urdf_class(plant):
    return isinstance(plant, type) and hasattr(plant, "robot") and hasattr(plant, "spec")


def run_simulation(model, method="auto", *, t_end=None, dt=None, rtol=None,
                   atol=None, h=None, params=None, method_options=None, progress=False,
                   backend="auto", frames=(), position_limits=None, max_ic_repair=None, check=None):
    """Run ``model`` to ``t_end`` (:func:`cosim.run.execute`); returns a dict with the
    :class:`~cosim.run.RunResult` (``result``), its time series (``time``, ``y``,
    ``outputs``, ``residuals``, ``order``) and the live simulation (``sim``).
    ``rtol``/``atol``: None means the defaults 1e-6/1e-8 (a value given to a method
    that does not use it gets a warning).  ``progress``: see :mod:`cosim.progress`
    (False: none).  Ctrl-C raises :class:`~cosim.errors.RunInterrupted` with the rows
    recorded so far."""
    from ..simulation import Simulation

    from ..models import Model, model_class

    check_tolerances(method, [n for n, v in (("--rtol", rtol), ("--atol", atol)) if v is not None])
    rtol = 1e-6 if rtol is None else rtol
    atol = 1e-8 if atol is None else atol
    plant = resolve_cli_model(model, frames, position_limits) if isinstance(model, str) else model
    t_end, t_end_source = stop_time(plant if isinstance(plant, (type, Model)) else model_class(plant), t_end)
    if method in (None, "auto"):   # the default rule on the plant the command line loaded
        from ..method_choice import default_method
        method = default_method(plant if isinstance(plant, (type, Model)) else model_class(plant),
                                fixed_step=h, params=params, backend=backend)
    if dt is not None and finite_float("dt", dt, positive=True) > t_end:
        warn(f"--dt {dt:g} is longer than --t-end {t_end:g}: one communication step of {t_end:g} s")
        dt = t_end
    if dt is not None:
        communication_step_count(t_end, finite_float("dt", dt, positive=True))
    if h is not None:
        check_step_against_grid(h, dt if dt is not None else t_end, h_name="--h",
                                grid_name="the communication step --dt" if dt is not None else
                                "the run (--t-end)", fix="give --dt as a multiple of --h")
    spec = simulation_spec(plant if is_urdf_class(plant) else model, method, t_end=t_end, dt=dt, rtol=rtol, atol=atol, h=h, params=params,
                           method_options=method_options, backend=backend, max_ic_repair=max_ic_repair)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CosimWarning)
        if isinstance(model, str):  # the command line: a file.py:Class plant may be loaded
            sim = Simulation.from_spec(spec, allow_files=True, check=check)
        else:  # a class or an instance given in Python: no spec name reaches it
            sim = Simulation(model=model, method=method, params=params or {}, rtol=rtol, atol=atol, h=h,
                             method_options=dict(spec.method_options), backend=backend,
                             max_ic_repair=max_ic_repair, check=check)
    for w in caught:  # the IC repair warning is printed by the caller (ic_report)
        if not issubclass(w.category, CosimWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    try:
        sim, result = execute(spec, sim=sim, progress=progress, end_at_stop_event=True)
    except ConvergenceError as exc:
        # Simulation adds the checker hint with module:Class; name the model as typed here
        if isinstance(model, str) and "`cosim check " in str(exc):
            cls = type(sim.model)
            raise type(exc)(str(exc).replace(f"`cosim check {cls.__module__}:{cls.__qualname__}`",
                                             f"`cosim check {model}`"),
                            t=exc.t, h=exc.h, cause=exc.cause) from None
        raise
    except RunInterrupted as exc:
        exc.result.t_end_source = t_end_source
        raise
    result.t_end_source = t_end_source
    return {"sim": sim, "result": result, "model": result.model, "method": method, "time": result.time,
            "y": result.states, "outputs": result.outputs, "residuals": result.residuals,
            "order": result.order, "wall_time_s": result.wall_time_s, "t_end": t_end,
            "t_end_source": t_end_source}


def _run_result(result):
    return result["result"] if isinstance(result, dict) else result


def summary_dict(result, derivatives=False):
    """The ``--json`` object of ``cosim simulate`` from a :class:`~cosim.run.RunResult`;
    ``derivatives``: add how each derivative is computed (``--verbose``: on the compiled
    backend the report compiles probe kernels, seconds on a first call in a process)."""
    r = _run_result(result)
    y = r.states[-1]
    n_q = len(r.coordinate_names)
    multibody = len(r.state_names) == 2 * n_q and r.model_kind == "multibody"
    pos, vel, acc = r.residuals[-1]
    stats = {k: v if k == "fixed_step_error" else int(v) for k, v in r.stats.items()}
    stats["constraint_residuals"] = {"position": float(pos), "velocity": float(vel),
                                     "acceleration": _number(acc)}
    stats["max_constraint_residuals"] = _levels(r.max_residuals)          # over the recorded rows
    stats["max_constraint_residuals_at_steps"] = _levels(r.step_max_residuals or r.max_residuals)
    enforced, why = constraint_levels(r.method, thaw(r.spec.method_options) if r.spec else {})
    stats["acceleration_enforced"] = "acceleration" in enforced
    stats["constraint_check"] = getattr(r, "constraint_check", None)
    stats["rows"] = len(r.time)
    stats["interpolated_rows"] = int(np.count_nonzero(np.isnan(r.residuals[:, 2]))) \
        if r.model_kind == "multibody" else 0
    stats["wall_time_s"] = r.wall_time_s
    out = {
        "model": r.model, "method": r.method, "backend": r.backend,
        "method_options": thaw(r.spec.method_options) if r.spec else {},
        "t": float(r.time[-1]),
        "coordinates": list(r.coordinate_names),
        "q": [float(x) for x in (y[:n_q] if multibody else y)],
        "v": [float(x) for x in y[n_q:]] if multibody else [],
        "outputs": {k: float(v) for k, v in zip(r.output_names, r.outputs[-1])},
        "stats": stats,
        "wall_time_s": r.wall_time_s,
        "events": list(r.events),
        "t_end": r.t_end, "t_end_source": r.t_end_source,
        "ic_report": r.ic_report,
    }
    if r.energy is not None:
        out["energy_drift"] = float(r.energy[1] - r.energy[0])
    sim = result.get("sim") if isinstance(result, dict) else None
    if derivatives and sim is not None and sim.derivative_report is not None:
        out["derivatives"] = {row["term"]: row["path"] for row in sim.derivative_report}
    return out


def _number(x):
    return None if not np.isfinite(x) else float(x)


def _levels(values):
    return {k: _number(v) for k, v in zip(("position", "velocity", "acceleration"), values)}


# which constraint levels a method's steps satisfy (to solver tolerance); q'' of the others
# need not satisfy the acceleration-level constraint C_q q'' = gamma (measured: bench in
# docs/concepts.md, `cosim simulate pendulum --dt 0.01 --method M`)
_LEVELS = {
    "generalized-alpha": (("position",), "an index-3 method: it enforces positions"),
    "bdf": (("position",), "an index-3 method: it enforces positions"),
    "generalized-alpha-i2": (("position", "velocity"), "an index-2 (GGL) method: it enforces "
                             "positions and velocities"),
    "bdf-i2": (("position", "velocity"), "an index-2 (GGL) method: it enforces positions and "
               "velocities"),
    "rkc-penalty": ((), "a penalty method: the constraints hold approximately"),
}
_ALL_LEVELS = (("position", "velocity", "acceleration"), "")


def constraint_levels(method, method_options=None):
    """(levels a method's steps enforce, why the others are not): index 3 positions,
    index 2 (GGL) positions and velocities, index-1 forms and projections all three."""
    if method == "block-lstable":
        index = int(dict(method_options or {}).get("index", 3))
        return {3: _LEVELS["bdf"], 2: _LEVELS["bdf-i2"]}.get(index, _ALL_LEVELS)
    return _LEVELS.get(method, _ALL_LEVELS)


def residual_lines(summary, method_label):
    """The summary's constraint-residual lines (empty without constraints)."""
    st = summary["stats"]
    rows, at_rows, at_steps = st["rows"], st["max_constraint_residuals"], \
        st["max_constraint_residuals_at_steps"]
    if not any(at_rows[k] or at_steps[k] for k in ("position", "velocity")):
        return []   # no constraints (or an ODE)
    lines = [f"  max |constraint residual| over the {rows} recorded rows: position "
             f"{at_rows['position']:.2e}  velocity {at_rows['velocity']:.2e}"]
    n_int = st["interpolated_rows"]
    if n_int:
        lines.append(f"    {n_int} of the rows are interpolated from the dense output; at the "
                     f"integrator's own points: position {at_steps['position']:.2e}  velocity "
                     f"{at_steps['velocity']:.2e}")
    if st["acceleration_enforced"]:
        acc = at_rows["acceleration"] if at_rows["acceleration"] is not None else \
            at_steps["acceleration"]
        where = "" if not n_int else f" (at the {rows - n_int} rows that end a step)"
        lines.append(f"    acceleration {acc:.2e}{where}")
    else:
        _, why = constraint_levels(summary["method"], summary.get("method_options"))
        lines.append(f"    acceleration level: not shown; {method_label} is {why}, its q'' need "
                     f"not satisfy C_q q'' = gamma")
    check = st.get("constraint_check")
    if check:
        lines.append(f"  constraint check (all constraints, every communication step): worst "
                     f"position {check['position']:.2e} at t = {check['position_time']:.6g} s, "
                     f"velocity {check['velocity']:.2e} at t = {check['velocity_time']:.6g} s")
        if check["exceeded"]:
            lines.append(f"    above the bounds derived from the tolerances (position "
                         f"{check['position_bound']:.2e}, velocity {check['velocity_bound']:.2e} at "
                         f"the end): {method_label} only bounds the drift")
        if check["reselections"]:
            lines.append(f"    independent constraint subset chosen anew {check['reselections']} "
                         f"times along the run (redundant constraints)")
    return lines


def write_csv(path, result):
    r = _run_result(result)
    cols = ["time"] + list(r.state_names) + list(r.output_names) + \
        ["residual_position", "residual_velocity", "residual_acceleration"]
    data = [r.time[:, None], r.states, r.outputs, r.residuals]
    if np.isfinite(r.order).any():
        cols.append("order")
        data.append(r.order[:, None])
    table = np.hstack(data)
    np.savetxt(path, table, delimiter=",", header=",".join(cols), comments="", fmt="%.17g")


def write_plot(path, result):
    """``--plot``: the model's outputs (and the inputs that change) with one panel per
    unit, the constraint residuals of the recorded rows where the model has constraints
    (acceleration where the method enforces it), the BDF order where it varies
    (:func:`cosim.plotting.write_run_plot`)."""
    from ..plotting import write_run_plot
    r = _run_result(result)
    levels, _ = constraint_levels(r.method, thaw(r.spec.method_options) if r.spec else {})
    return write_run_plot(path, r, residuals=True, levels=["position", "velocity"] + (
        ["acceleration"] if "acceleration" in levels else []))


def keep_interrupted(result, out, plot, write_csv, write_plot):
    """Ctrl-C: write what was computed (``--out``, ``--plot``), say so on stderr; 130."""
    t, n = float(result.time[-1]), len(result.time)
    kept = []
    if out:
        write_csv(out, result)
        kept.append(out)
    if plot and n > 1:
        write_plot(plot, result)
        kept.append(plot)
    where = f": wrote the {n} rows computed so far to {' and '.join(kept)}" if kept else \
        f" ({n} rows computed; nothing written: no --out)"
    print(f"cosim: interrupted at t = {t:.6g} s of {result.t_end:g} s{where}", file=sys.stderr,
          flush=True)
    return 130


def _cmd(args):
    method_options = parse_assignments(args.option, "--option")
    if args.max_order is not None:
        if "max_order" in method_options and method_options["max_order"] != args.max_order:
            raise InvalidInputError(f"--max-order {args.max_order} and --option max_order="
                                    f"{method_options['max_order']} disagree; give one")
        method_options["max_order"] = args.max_order
    check_plot_path(args.plot)
    check_output_file(args.out)
    try:
        result = run_simulation(
            args.model, args.method, t_end=args.t_end, dt=args.dt, rtol=args.rtol, atol=args.atol,
            h=args.h, params=parse_assignments(args.param), method_options=method_options,
            progress=False if args.json else None, backend=args.backend,
            frames=tuple(args.frame or ()), position_limits=args.position_limits,
            max_ic_repair=args.max_ic_repair, check=args.check)
    except RunInterrupted as exc:
        return keep_interrupted(exc.result, args.out, args.plot, write_csv, write_plot)
    summary = summary_dict(result, derivatives=args.verbose)
    if args.out:
        write_csv(args.out, result)
    if args.plot:
        write_plot(args.plot, result)
    if args.json:
        print(json.dumps(summary))
        return 0
    st = summary["stats"]
    print(f"model {summary['model']}  method {summary['method']} ({summary['backend']})  "
          f"t = {summary['t']:.6g} s  "
          f"wall {summary['wall_time_s']:.3f} s")
    if summary["t_end_source"] != "--t-end":
        print(f"  stop time {summary['t_end']:g} s ({summary['t_end_source']})")
    ic = result["sim"].ic_report
    if ic is not None and ic.repaired:
        print("  initial state repaired by the IC analysis (seed 000 eqs. 6-9):")
        for line in ic.summary():
            print(f"    {line}")
    if args.verbose and result["sim"].backend_reason:
        print(f"  backend python: {result['sim'].backend_reason}")
    if args.verbose and result["sim"].derivative_report is not None:
        print("  derivatives (cosim.derivatives; compiled: cosim.models.auto_kernels):")
        for row in result["sim"].derivative_report:
            print(f"    {row['term']:<14s} {row['path']}" + (f"  ({row['note']})" if row["note"] else ""))
    width = max([12, *map(len, summary["coordinates"]), *map(len, summary["outputs"])])
    for name, value in zip(summary["coordinates"], summary["q"]):
        print(f"  {name:>{width}s} = {value: .10e}")
    for name, value in summary["outputs"].items():
        print(f"  {name:>{width}s} = {value: .10e}  (output)")
    print("  steps {steps}  rejected {rejected}  newton {newton_iterations}  residuals "
          "{residual_evaluations}  jacobians {jacobian_evaluations}  LU {lu_factorizations}".format(**st))
    if "fixed_step_error" in st:
        print(f"  fixed step: largest local error estimate {st['fixed_step_error']:.3g} times the "
              f"tolerance weights (warned above {fixed_step.WARN_FACTOR:g})")
    for line in residual_lines(summary, summary["method"]):
        print(line)
    if "energy_drift" in summary:
        conservative = getattr(result["sim"].model, "conservative", False)
        why = ("the model is conservative: with zero inputs this is the integration error"
               if conservative else "the model is not declared conservative (forces, damping, impacts"
               " or a drive change its energy): not an error measure")
        print(f"  change of kinetic + potential energy {summary['energy_drift']:.3e} J ({why})")
    for ev in summary["events"]:
        print(f"  event {ev}")
    if args.out:
        print(f"  wrote {args.out}")
    if args.plot:
        print(f"  wrote {args.plot}")
    return 0


def register(sub):
    p = sub.add_parser("simulate", help="simulate one library or user model")
    p.add_argument("model", help="library model name (see `cosim models`), path/to/file.py:Class "
                   "or package.module:Class (importable)")
    p.add_argument("--method", default="auto",
                   help="integration method (see `cosim methods`); auto (default): dopri5 for "
                        "a multibody model or an ODE; with --h rk4 where it is stable at that step, "
                        "else generalized-alpha; "
                        "state-transition for LTI")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance (default 1e-6)")
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance (default 1e-8)")
    p.add_argument("--h", type=float, default=None,
                   help="fixed integration step [s] (fixed-step mode); steps never cross a "
                        "communication point, so h > --dt is cut to --dt (with a warning)")
    p.add_argument("--t-end", type=float, default=None,
                   help="stop time [s] (default: the model's default_t_end, else a stated 1 s)")
    p.add_argument("--dt", type=float, default=None, help="communication step [s]: the integrator lands on every multiple and a row is "
                        "recorded there (default: none; rows every t_end/500 from the dense output)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="model parameter (repeatable)")
    p.add_argument("--max-order", type=int, default=None, help="BDF: maximum order 1-5")
    p.add_argument("--option", action="append", metavar="NAME=VALUE",
                   help="method option, e.g. rho_inf=0.8 or max_order=2 (repeatable)")
    p.add_argument("--out", metavar="FILE.csv", help="write time, state, outputs, residuals")
    p.add_argument("--plot", metavar="FILE.png", help="plot coordinates and constraint residuals")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--frame", action="append", metavar="NAME",
                   help="robot from URDF: a link/joint frame whose pose becomes outputs NAME_x … NAME_qw (repeatable)")
    p.add_argument("--max-ic-repair", type=float, default=None, metavar="D",
                   help="an initial state the IC analysis would move by more than D (max abs change of "
                        "a position or velocity) is an error instead of a warned repair")
    p.add_argument("--position-limits", action=argparse.BooleanOptionalAction, default=None,
                   help="robot from URDF: the joints' position limits as stops that hold (default: "
                        "on; --no-position-limits: the joints move past them)")
    p.add_argument("--check", choices=("quick", "off"), default=None,
                   help="model check at set-up (default: quick for user models, off for the library's)")
    p.add_argument("--verbose", action="store_true",
                   help="also print how each derivative is computed (analytic / complex-step / "
                   "hyper-dual / differences; with --json: the key 'derivatives')")
    p.add_argument("--backend", choices=("auto", "numba", "python"), default="auto",
                   help="auto (default): compiled numba kernels where the method and model have them, "
                        "else the Python reference; numba: ask for them (a warning says when they "
                        "cannot run); python: the reference")
    p.set_defaults(func=_cmd)
