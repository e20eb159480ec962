"""``cosim simulate MODEL``: run one model with one method and report.

A thin wrapper over :class:`cosim.Simulation`: the run advances in
communication steps of ``--dt`` (default ``t_end/500``) with the inputs
held (ZOH), exactly as the FMU and the ROS node do, so the three agree.
"""
import json
import math
import sys
import time
import warnings

import numpy as np

from ..errors import ConvergenceError, CosimWarning, InvalidInputError
from ..model_files import resolve_cli_model
from ..options import check_plot_path, check_step_against_grid, check_tolerances, merge_assignments, warn
from ..validation import communication_step_count, finite_float

# Sensible horizons for the library models (seed benchmarks).  A user model
# declares ``default_t_end``; without one the 1 s fall-back is stated.
DEFAULT_T_END = {"andrews": 0.03, "crank_slider": 0.1, "two_link": 10.0,
                 "double_pendulum_natural": 4.0, "pendulum": 5.0, "lti": 10.0,
                 "bouncing_ball": 3.0, "knife_edge": 5.0}
FALLBACK_T_END = 1.0


def stop_time(model, t_end=None):
    """(t_end, source): the given value, the model's ``default_t_end``, the
    library default, or the stated 1 s fall-back."""
    if t_end is not None:
        return finite_float("t_end", t_end, positive=True), "--t-end"
    declared = getattr(model, "default_t_end", None)
    if declared is not None:
        return finite_float(f"{model.name}.default_t_end", declared, positive=True), \
            "the model's default_t_end"
    if type(model).__module__.startswith("cosim.models.") and model.name in DEFAULT_T_END:
        return DEFAULT_T_END[model.name], "library default"
    return FALLBACK_T_END, ("fall-back: the model declares no default_t_end "
                            "and no --t-end was given")


def is_user_model(model):
    return not type(model).__module__.startswith("cosim.")


def parse_assignments(items, what="--param"):
    """["l=2", "m=1.5"] -> {"l": 2.0, ...}; numbers become floats, other values stay
    strings for the model to parse.  A name given twice with two values is an error."""
    pairs = []
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(f"{what} expects NAME=VALUE, got {item!r}")
        pairs.append((name.strip(), _number_or_text(value.strip())))
    return merge_assignments(pairs, what)


def _number_or_text(text):
    try:
        return float(text)
    except ValueError:
        return text  # e.g. a matrix "[[0,1],[-4,-0.4]]" for the LTI model


class _Progress:
    """A one-line progress bar on a terminal (stderr), silent otherwise."""

    def __init__(self, enabled, total):
        self.enabled, self.total, self.last = enabled, total, -1

    def update(self, t):
        if not self.enabled:
            return
        pct = int(100 * t / self.total) if self.total > 0 else 100
        if pct != self.last:
            self.last = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r[{bar:<25s}] {pct:3d}%  t={t:.6g}")
            sys.stderr.flush()

    def close(self):
        if self.enabled:
            sys.stderr.write("\n")


def run_simulation(model, method="generalized-alpha", *, t_end=None, dt=None, rtol=None,
                   atol=None, h=None, params=None, method_options=None, progress=False,
                   backend="auto"):
    """Run ``model`` to ``t_end`` in communication steps ``dt``; returns a result dict
    with time series (``time``, ``y``, ``outputs``, ``residuals``, ``order``).
    ``rtol``/``atol``: None means the defaults 1e-6/1e-8 (a value given to a method
    that does not use it gets a warning)."""
    from ..simulation import Simulation

    check_tolerances(method, [n for n, v in (("--rtol", rtol), ("--atol", atol)) if v is not None])
    rtol = 1e-6 if rtol is None else rtol
    atol = 1e-8 if atol is None else atol
    dt_given = dt is not None

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CosimWarning)
        sim = Simulation(model=resolve_cli_model(model) if isinstance(model, str) else model,
                         method=method, params=params or {}, rtol=rtol, atol=atol, h=h,
                         method_options=method_options or {}, backend=backend)
    for w in caught:  # the IC repair warning is printed by the caller (ic_report)
        if not issubclass(w.category, CosimWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    name = sim.model.name if hasattr(sim, "model") else str(model)
    t_end, t_end_source = stop_time(sim.model, t_end)
    if dt is not None and finite_float("dt", dt, positive=True) > t_end:
        warn(f"--dt {dt:g} is longer than --t-end {t_end:g}: one communication step of {t_end:g} s")
        dt = t_end
    n_steps = 500 if dt is None else communication_step_count(t_end, finite_float("dt", dt, positive=True))
    dt = t_end / n_steps if dt is None else finite_float("dt", dt, positive=True)
    if h is not None:
        check_step_against_grid(h, dt, h_name="--h", grid_name="the communication step " +
                                ("--dt" if dt_given else "(t_end/500)"),
                                fix="give --dt as a multiple of --h")
    integrator = getattr(sim, "integrator", None)

    times, ys, outs, res, orders = [sim.time], [sim.y], [sim.get_outputs()], [sim.constraint_residuals()], []
    orders.append(getattr(integrator, "order", np.nan))
    bar = _Progress(progress, t_end)
    wall0 = time.perf_counter()
    for k in range(n_steps):
        t = sim.time
        h_comm = min(dt, t_end - t) if k < n_steps - 1 else t_end - t
        if h_comm <= 0:
            break
        try:
            sim.do_step(t, h_comm)
        except ConvergenceError as exc:
            if k < 5 and is_user_model(sim.model):
                raise type(exc)(f"{exc} — a failure in the first steps of a user model often "
                                f"means a wrong derivative: run `cosim check {model if isinstance(model, str) else 'MODEL'}`",
                                t=exc.t, h=exc.h, cause=exc.cause) from None
            raise
        times.append(sim.time)
        ys.append(sim.y)
        outs.append(sim.get_outputs())
        res.append(sim.constraint_residuals())
        orders.append(getattr(integrator, "order", np.nan))
        bar.update(sim.time)
        if getattr(sim, "stopped", False):
            break
    wall = time.perf_counter() - wall0
    bar.close()
    return {
        "sim": sim, "model": name, "method": method, "time": np.array(times),
        "y": np.array(ys), "outputs": np.array(outs), "residuals": np.array(res),
        "order": np.array(orders, dtype=float), "wall_time_s": wall,
        "t_end": t_end, "t_end_source": t_end_source,
    }


def summary_dict(result):
    sim = result["sim"]
    y = result["y"][-1]
    names = list(sim.state_names)
    n_q = len(sim.coordinate_names)
    multibody = len(names) == 2 * n_q and getattr(sim.model, "kind", "") == "multibody"
    pos, vel, acc = result["residuals"][-1]
    peak = np.max(np.abs(result["residuals"]), axis=0)
    stats = {k: int(v) for k, v in sim.stats.items()}
    stats["constraint_residuals"] = {"position": float(pos), "velocity": float(vel),
                                     "acceleration": float(acc)}
    stats["max_constraint_residuals"] = {"position": float(peak[0]), "velocity": float(peak[1]),
                                         "acceleration": float(peak[2])}
    stats["wall_time_s"] = result["wall_time_s"]
    out = {
        "model": result["model"], "method": result["method"], "backend": sim.backend,
        "t": float(result["time"][-1]),
        "coordinates": list(sim.coordinate_names),
        "q": [float(x) for x in (y[:n_q] if multibody else y)],
        "v": [float(x) for x in y[n_q:]] if multibody else [],
        "outputs": {k: float(v) for k, v in zip(sim.output_names, result["outputs"][-1])},
        "stats": stats,
        "wall_time_s": result["wall_time_s"],
        "events": list(getattr(sim, "event_log", [])),
        "t_end": result.get("t_end"), "t_end_source": result.get("t_end_source"),
        "ic_report": sim.ic_report.as_dict() if sim.ic_report is not None else None,
    }
    energy = sim.model.energy(result["time"][-1], y, None) if hasattr(sim.model, "energy") else None
    if energy is not None:
        e0 = sim.model.energy(result["time"][0], result["y"][0], None)
        out["energy_drift"] = float(energy - e0)
    return out


def write_csv(path, result):
    sim = result["sim"]
    cols = ["time"] + list(sim.state_names) + list(sim.output_names) + \
        ["residual_position", "residual_velocity", "residual_acceleration"]
    data = [result["time"][:, None], result["y"], result["outputs"].reshape(len(result["time"]), -1),
            result["residuals"]]
    if np.isfinite(result["order"]).any():
        cols.append("order")
        data.append(result["order"][:, None])
    table = np.hstack(data)
    np.savetxt(path, table, delimiter=",", header=",".join(cols), comments="", fmt="%.17g")


def write_plot(path, result):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sim = result["sim"]
    show_order = np.isfinite(result["order"]).any()
    n = 3 if show_order else 2
    fig, axes = plt.subplots(n, 1, figsize=(8, 2.8 * n), sharex=True)
    t = result["time"]
    n_q = len(sim.coordinate_names)
    for i, name in enumerate(sim.coordinate_names):
        axes[0].plot(t, result["y"][:, i], label=name)
    units = getattr(sim.model, "coordinate_units", None)  # optional per-model tuple
    if units and len(units) == n_q and len(set(units)) == 1:
        axes[0].set_ylabel(f"coordinates [{units[0]}]")
    else:
        axes[0].set_ylabel("coordinates [SI: m, rad]" if getattr(sim.model, "kind", "") == "multibody"
                           else "state [SI]")
    axes[0].legend(fontsize=7, ncol=min(4, n_q))
    axes[0].set_title(f"{result['model']} — {result['method']} ({sim.backend} backend)")
    for j, label in enumerate(("position", "velocity", "acceleration")):
        vals = np.abs(result["residuals"][:, j])
        axes[1].semilogy(t, np.maximum(vals, 1e-17), label=label)  # floor: exact zeros
    axes[1].set_ylabel("|constraint residual|")
    axes[1].legend(fontsize=7)
    if show_order:
        axes[2].step(t, result["order"], where="post")
        axes[2].set_ylabel("BDF order")
    axes[-1].set_xlabel("time [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cmd(args):
    method_options = parse_assignments(args.option, "--option")
    if args.max_order is not None:
        if "max_order" in method_options and method_options["max_order"] != args.max_order:
            raise InvalidInputError(f"--max-order {args.max_order} and --option max_order="
                                    f"{method_options['max_order']} disagree; give one")
        method_options["max_order"] = args.max_order
    check_plot_path(args.plot)
    result = run_simulation(
        args.model, args.method, t_end=args.t_end, dt=args.dt, rtol=args.rtol, atol=args.atol,
        h=args.h, params=parse_assignments(args.param), method_options=method_options,
        progress=(not args.json) and sys.stderr.isatty(), backend=args.backend)
    summary = summary_dict(result)
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
    for name, value in zip(summary["coordinates"], summary["q"]):
        print(f"  {name:>12s} = {value: .10e}")
    for name, value in summary["outputs"].items():
        print(f"  {name:>12s} = {value: .10e}  (output)")
    print("  steps {steps}  rejected {rejected}  newton {newton_iterations}  residuals "
          "{residual_evaluations}  jacobians {jacobian_evaluations}  LU {lu_factorizations}".format(**st))
    cr = st["max_constraint_residuals"]
    print(f"  max |constraint residual|: position {cr['position']:.2e}  velocity {cr['velocity']:.2e}"
          f"  acceleration {cr['acceleration']:.2e}")
    if "energy_drift" in summary:
        print(f"  change of kinetic + potential energy {summary['energy_drift']:.3e} J"
              " (a drift where the model is conservative and unforced)")
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
    p.add_argument("--method", default="generalized-alpha", help="integration method (see `cosim methods`)")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance (default 1e-6)")
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance (default 1e-8)")
    p.add_argument("--h", type=float, default=None,
                   help="fixed integration step [s] (fixed-step mode); steps never cross a "
                        "communication point, so h > --dt is cut to --dt (with a warning)")
    p.add_argument("--t-end", type=float, default=None,
                   help="stop time [s] (default: the model's default_t_end, else a stated 1 s)")
    p.add_argument("--dt", type=float, default=None, help="communication/output step [s] (default t_end/500)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="model parameter (repeatable)")
    p.add_argument("--max-order", type=int, default=None, help="BDF: maximum order 1-5")
    p.add_argument("--option", action="append", metavar="NAME=VALUE",
                   help="method option, e.g. rho_inf=0.8 or max_order=2 (repeatable)")
    p.add_argument("--out", metavar="FILE.csv", help="write time, state, outputs, residuals")
    p.add_argument("--plot", metavar="FILE.png", help="plot coordinates and constraint residuals")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--backend", choices=("auto", "numba", "python"), default="auto",
                   help="auto (default): compiled numba kernels where the method and model have them, "
                        "else the Python reference; numba: ask for them (a warning says when they "
                        "cannot run); python: the reference")
    p.set_defaults(func=_cmd)
