"""``cosim run SCENARIO.yaml``: run a co-simulation scenario (plant + discrete blocks).

A thin caller of :func:`cosim.run` on the file's :class:`cosim.SimulationSpec`.
``--json`` prints one object: scenario, model, method, t, communication_step,
base_step (seconds, the exact gcd of the sample times; null without blocks),
base_step_exact ("p/q"), blocks, stopped, stop_time, state, outputs, events
(the event log), stats, wall_time_s, real_time_factor.
"""
import json

from ..errors import RunInterrupted
from ..options import check_output_file, check_plot_path
from ..run import execute
from ..scenario import Scenario, scenario_summary, write_scenario_csv, write_scenario_plot
from .simulate import keep_interrupted


def _cmd(args):
    check_plot_path(args.plot)
    check_output_file(args.out)
    scenario = Scenario.load(args.scenario)
    spec = scenario.spec.replace(backend=args.backend)
    if args.t_end is not None:
        spec = spec.replace(stop_time=args.t_end)
    sim = scenario.build(backend=args.backend)  # Simulation.from_spec + what the file's values do
    try:   # a progress bar on a terminal after 2 s (cosim.progress)
        result = execute(spec, sim=sim, progress=False if args.json else None)[1]
    except RunInterrupted as exc:
        return keep_interrupted(exc.result, args.out, args.plot, write_scenario_csv,
                                lambda path, r: write_scenario_plot(path, r, scenario.name))
    summary = scenario_summary(result, scenario.name)
    if args.out:
        write_scenario_csv(args.out, result)
    if args.plot:
        write_scenario_plot(args.plot, result, scenario.name)
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"scenario {summary['scenario']}: model {summary['model']}  method {summary['method']} "
          f"({result.backend})  "
          f"t = {summary['t']:.6g} s  wall {summary['wall_time_s']:.3f} s  "
          f"(real-time factor {summary['real_time_factor']:.3g})")
    if summary["base_step"] is not None:
        blocks = ", ".join(f"{b['name']} ({b['type']}) T={b['sample_time']:g}" for b in summary["blocks"])
        print(f"  base step {summary['base_step']:g} s = {summary['base_step_exact']} s;  blocks: {blocks}")
    for name, value in summary["outputs"].items():
        print(f"  {name:>20s} = {value: .10e}")
    st = summary["stats"]
    print("  communication steps {communication_steps}  integrator steps {steps}  rejected {rejected}  "
          "newton {newton_iterations}  events {events}".format(**st))
    for ev in summary["events"]:
        extra = "  (terminal)" if ev.get("terminal") else ""
        print(f"  event t={ev['time']:.12g}  {ev['kind']:>10s}  {ev['name']}{extra}")
    if summary["stopped"]:
        print(f"  stopped at t={summary['stop_time']:.12g}")
    if args.out:
        print(f"  wrote {args.out}")
    if args.plot:
        print(f"  wrote {args.plot}")
    return 0


def register(sub):
    p = sub.add_parser("run", help="run a co-simulation scenario (YAML)")
    p.add_argument("scenario", help="scenario file, or the name of a shipped scenario (see `cosim scenarios`)")
    p.add_argument("--t-end", type=float, default=None, help="override the scenario's stop time [s]")
    p.add_argument("--out", metavar="FILE.csv", help="write time, states, outputs and inputs")
    p.add_argument("--plot", metavar="FILE.png", help="plot outputs and inputs with the events")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (base_step, events, stats, ...) on stdout")
    p.add_argument("--backend", choices=("auto", "numba", "python"), default="auto",
                   help="auto (default): compiled numba kernels where the plant and method have them; "
                        "python: the reference")
    p.set_defaults(func=_cmd)
