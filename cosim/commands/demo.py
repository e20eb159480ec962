"""``cosim demo``: the README's first command (``bash scripts/demo.sh`` runs it
after the set-up).  Two runs, each printing its usual report, then a short
summary with the paths of the files written:

1. Andrews' squeezer (seed 000 §8.1) at rtol 1e-6 with the default method
   (``cosim simulate andrews --rtol 1e-6``);
2. the shipped multirate scenario ``pendulum_pd``: pendulum held by a PD
   controller at 1 ms and a supervisor at 2.5 ms (``cosim run pendulum_pd``),
   and 30 ms after its reference step at 2 s recorded on the 0.5 ms base step:
   the PD output held over each 1 ms sample (a staircase) against the
   continuous plant.

A first run of a model/method pair with compiled kernels compiles them
(``cosim: compiling kernels for ...`` on stderr, tens of seconds, cached on
disk); the summary says when that happened and how long it took.
"""
import argparse
import time
from pathlib import Path

STEPS = (
    ("andrews", "Andrews' squeezer, rtol 1e-6, the default method",
     ["simulate", "andrews", "--rtol", "1e-6"]),
    ("pendulum_pd", "pendulum + PD at 1 ms + supervisor at 2.5 ms (multirate scenario)",
     ["run", "pendulum_pd"]),
)


def _compiled():
    """Kernel sets compiled in this process (the notices cosim.jit printed)."""
    from .. import jit
    return {k[1:] for k in jit._state["announced"] if k and k[0] == "compile"}


def write_staircase_plot(path, name="pendulum_pd", block="pd", t_zoom=2.0, window=0.03, backend="auto"):
    """Scenario ``name`` run to ``t_zoom`` (default: the supervisor's reference
    step at 2 s), then ``window`` seconds recorded on its base step: the plant's
    first output (continuous) above, ``block``'s output (sample and hold, drawn
    as steps) below, with the block's sample instants.  Returns the path.
    (The zoom holds the external inputs; the shipped ``pendulum_pd`` has none.)"""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from ..scenario import Scenario

    scenario = Scenario.load(name)
    sim = scenario.run(stop_time=t_zoom, backend=backend).sim
    base = float(sim.base_step_exact)
    times, outs = [sim.time], [sim.get_outputs()]
    for _ in range(int(round(window / base))):
        sim.do_step(sim.time, base)
        times.append(sim.time)
        outs.append(sim.get_outputs())
    t_ms, outs = 1e3 * (np.array(times) - t_zoom), np.array(outs)
    blk = next(b for b in sim.blocks if b.name == block)
    units = {s.name: s.unit for s in sim.model.outputs}
    in_units = {s.name: s.unit for s in sim.model.inputs}
    drives = {src: dst for src, dst, *_ in sim.connections}

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.6), sharex=True)
    name0 = sim.model.output_names[0]
    top.plot(t_ms, outs[:, 0], ".-", ms=3, label=f"{name0} (plant output, every {1e3 * base:g} ms)")
    top.set_ylabel(f"{name0} [{units.get(name0, '1')}]")
    for out in blk.output_names:
        col = sim.output_names.index(f"{blk.name}.{out}")
        dst = drives.get(f"{blk.name}.{out}")
        label = f"{blk.name}.{out}" + (f" -> {dst}" if dst else "")
        # the value recorded at t_k was held over (t_k - base, t_k]: steps "pre"
        bottom.step(t_ms, outs[:, col], where="pre", label=f"{label} (sample and hold)")
        bottom.set_ylabel(f"{label} [{in_units.get(dst, '1') if dst else '1'}]")
    period = float(blk.sample_time)
    first = np.ceil((t_zoom - float(blk.offset)) / period - 1e-9) * period + float(blk.offset)
    for k, t_s in enumerate(np.arange(first, t_zoom + window + 1e-12, period)):
        for ax in (top, bottom):
            ax.axvline(1e3 * (t_s - t_zoom), color="0.8", lw=0.6, zorder=0,
                       label=f"{blk.name} sample instants (every {1e3 * period:g} ms)" if k == 0 else None)
    top.legend(fontsize=8)
    bottom.legend(fontsize=8)
    bottom.set_xlabel(f"time after t = {t_zoom:g} s [ms]")
    top.set_title(f"{scenario.name} ({sim.model.name}, {sim.method}): {blk.name} output held "
                  f"between samples", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _cmd(args):
    from ..cli import build_parser
    from ..jit import cache_dir

    from ..options import check_output_dir
    out = Path(check_output_dir(args.out_dir, "--out-dir")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    parser = build_parser()
    rows, t_all = [], time.perf_counter()
    for name, what, argv in STEPS:
        files = [out / f"{name}.csv", out / f"{name}.png"]
        argv = argv + ["--out", str(files[0]), "--plot", str(files[1]), "--backend", args.backend]
        print(f"$ cosim {' '.join(argv)}", flush=True)
        before = _compiled()
        t0 = time.perf_counter()
        sub = parser.parse_args(argv)
        sub.func(sub)
        if name == "pendulum_pd":
            files.append(out / "pendulum_pd_staircase.png")
            write_staircase_plot(files[-1], backend=args.backend)
            print(f"  wrote {files[-1]} (30 ms after the reference step at 2 s on the 0.5 ms base step: "
                  "the PD output's staircase)")
        wall = time.perf_counter() - t0
        rows.append((name, what, wall, sorted(_compiled() - before), files))
        print(flush=True)
    total = time.perf_counter() - t_all
    print(f"cosim demo: done in {total:.1f} s")
    for name, what, wall, compiled, files in rows:
        note = ""
        if compiled:
            kernels = ", ".join("/".join(k) for k in compiled)
            note = f"; includes compiling kernels for {kernels} (first run only)"
        print(f"  {name:12s} {what}: {wall:.1f} s{note}")
    if any(r[3] for r in rows):
        print(f"  compiled kernels are cached in {cache_dir()}; the next run starts in about a second")
    print("  plots:")
    for row in rows:
        for path in row[4][1:]:
            print(f"    {path}")
    print("  data (CSV):")
    for row in rows:
        print(f"    {row[4][0]}")
    return 0


def register(sub):
    p = sub.add_parser("demo", help="run the README's demo: Andrews' squeezer and a multirate "
                                    "PD scenario; write CSV and plots",
                       description=__doc__.split("\n\n")[0].replace("``", "`"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", default="out", metavar="DIR",
                   help="folder for the CSV files and plots (default: out)")
    p.add_argument("--backend", choices=("auto", "numba", "python"), default="auto",
                   help="auto (default): compiled numba kernels where they exist; python: the reference")
    p.set_defaults(func=_cmd)
