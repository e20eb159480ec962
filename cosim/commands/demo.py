"""``cosim demo``: the README's first command (``bash scripts/demo.sh`` runs it
after the set-up).  Two runs, each printing its usual report, then a short
summary with the paths of the files written:

1. Andrews' squeezer (seed 000 §8.1) with generalized-alpha, rtol 1e-6
   (``cosim simulate andrews --rtol 1e-6``);
2. the shipped multirate scenario ``pendulum_pd``: pendulum held by a PD
   controller at 1 ms and a supervisor at 2.5 ms (``cosim run pendulum_pd``).

A first run of a model/method pair with compiled kernels compiles them
(``cosim: compiling kernels for ...`` on stderr, tens of seconds, cached on
disk); the summary says when that happened and how long it took.
"""
import argparse
import time
from pathlib import Path

STEPS = (
    ("andrews", "Andrews' squeezer, generalized-alpha, rtol 1e-6",
     ["simulate", "andrews", "--method", "generalized-alpha", "--rtol", "1e-6"]),
    ("pendulum_pd", "pendulum + PD at 1 ms + supervisor at 2.5 ms (multirate scenario)",
     ["run", "pendulum_pd"]),
)


def _compiled():
    """Kernel sets compiled in this process (the notices cosim.jit printed)."""
    from .. import jit
    return {k[1:] for k in jit._state["announced"] if k and k[0] == "compile"}


def _cmd(args):
    from ..cli import build_parser
    from ..jit import cache_dir

    out = Path(args.out_dir).resolve()
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
        print(f"    {row[4][1]}")
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
