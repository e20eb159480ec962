"""``cosim simulate MODEL``: run one model with one method and report.

A thin wrapper over :class:`cosim.Simulation`: the run advances in
communication steps of ``--dt`` (default ``t_end/500``) with the inputs
held (ZOH), exactly as the FMU and the ROS node do, so the three agree.
"""
import json
import math
import sys
import time

import numpy as np

from ..errors import InvalidInputError
from ..validation import communication_step_count, finite_float

# Sensible horizons for the library models (seed benchmarks); others: 1 s.
DEFAULT_T_END = {"andrews": 0.03, "crank_slider": 0.1, "two_link": 10.0,
                 "double_pendulum_natural": 4.0, "pendulum": 5.0, "lti": 10.0,
                 "bouncing_ball": 3.0, "knife_edge": 5.0}


def parse_assignments(items, what="--param"):
    """["l=2", "m=1.5"] -> {"l": "2", ...}; values stay strings for the model to parse."""
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InvalidInputError(f"{what} expects NAME=VALUE, got {item!r}")
        out[name.strip()] = _number_or_text(value.strip())
    return out


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


def run_simulation(model, method="generalized-alpha", *, t_end=None, dt=None, rtol=1e-6,
                   atol=1e-8, h=None, params=None, method_options=None, progress=False,
                   backend="auto"):
    """Run ``model`` to ``t_end`` in communication steps ``dt``; returns a result dict
    with time series (``time``, ``y``, ``outputs``, ``residuals``, ``order``)."""
    from ..simulation import Simulation

    sim = Simulation(model=model, method=method, params=params or {}, rtol=rtol, atol=atol, h=h,
                     method_options=method_options or {}, backend=backend)
    name = sim.model.name if hasattr(sim, "model") else str(model)
    if t_end is None:
        t_end = DEFAULT_T_END.get(name, 1.0)
    t_end = finite_float("t_end", t_end, positive=True)
    n_steps = 500 if dt is None else communication_step_count(t_end, finite_float("dt", dt, positive=True))
    dt = t_end / n_steps if dt is None else finite_float("dt", dt, positive=True)
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
        sim.do_step(t, h_comm)
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
    axes[0].set_ylabel("coordinates")
    axes[0].legend(fontsize=7, ncol=min(4, n_q))
    axes[0].set_title(f"{result['model']} — {result['method']}")
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
        method_options["max_order"] = args.max_order
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
    p.add_argument("model", help="library model name (see `cosim models`) or package.module:Class")
    p.add_argument("--method", default="generalized-alpha", help="integration method (see `cosim methods`)")
    p.add_argument("--rtol", type=float, default=1e-6, help="relative tolerance (adaptive mode)")
    p.add_argument("--atol", type=float, default=1e-8, help="absolute tolerance (adaptive mode)")
    p.add_argument("--h", type=float, default=None, help="fixed integration step [s] (fixed-step mode)")
    p.add_argument("--t-end", type=float, default=None, help="stop time [s] (default: per model)")
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
