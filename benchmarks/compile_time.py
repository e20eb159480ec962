"""What compiling each method costs, and where it goes: one method per fresh process
on an empty compile cache (``COSIM_CACHE_DIR`` = a new folder), CPU seconds of the
process (user + system, ``getrusage(RUSAGE_CHILDREN)``: on a shared machine the wall
time says more about the other processes than about the compile), wall seconds, the
generated module's lines and bytes, and the bytes of numba's cache files (``.nbc``:
every compiled function keeps the machine code of everything it calls, so their sum
is close to the amount of code LLVM optimised and generated).

    PYTHONPATH=$PWD python benchmarks/compile_time.py [--methods spark bdf] [--repeat 2]
        [--tree OLD_WORKTREE --tree NEW_WORKTREE]   # A/B, alternated run by run
    PYTHONPATH=$PWD python benchmarks/compile_time.py --functions spark   # the largest .nbc

With ``--tree`` each worktree's cosim is imported in turn (``PYTHONPATH`` = the tree), old
and new alternate, and their order flips every round.
"""
import argparse
import glob
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

METHODS = ["generalized-alpha", "spark", "local-index1", "bdf", "dopri5", "block-lstable", "rkc-penalty"]
CHILD = "import sys; from cosim.integrators import compile_method; compile_method(sys.argv[1])"


def nbc_sizes(cache):
    """Bytes of numba's cache files under ``cache``, per compiled function."""
    sizes = {}
    for path in glob.glob(os.path.join(cache, "**", "*.nbc"), recursive=True):
        name = re.sub(r"-\d+\.py\d+.*$", "", os.path.basename(path).split(".", 1)[1])
        sizes[name] = sizes.get(name, 0) + os.path.getsize(path)
    return sizes


def compile_once(tree, method):
    """(CPU s, wall s, source lines, source bytes, .nbc bytes per function) of compiling
    ``method`` from ``tree`` (None: this cosim) on an empty cache."""
    cache = tempfile.mkdtemp(prefix="cosim-compile-time-")
    env = dict(os.environ, COSIM_CACHE_DIR=cache)
    if tree:
        env["PYTHONPATH"] = tree
    try:
        before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run([sys.executable, "-c", CHILD, method], env=env, cwd=tree or None, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        sources = glob.glob(os.path.join(cache, "entries", "cosim_method_*.py"))
        text = "".join(open(p, encoding="utf-8").read() for p in sources)
        return cpu, wall, text.count("\n"), len(text.encode()), nbc_sizes(cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--tree", action="append", default=[], help="a worktree to compare (give two)")
    ap.add_argument("--functions", metavar="METHOD", help="list one method's largest .nbc files")
    args = ap.parse_args()
    if args.functions:
        cpu, wall, lines, size, nbc = compile_once(None, args.functions)
        print(f"{args.functions}: {cpu:.1f} s CPU, {wall:.1f} s wall, {lines} lines, "
              f"{sum(nbc.values())} .nbc bytes")
        for name, b in sorted(nbc.items(), key=lambda kv: -kv[1])[:25]:
            print(f"  {name:36s} {b:10d}")
        return
    trees = args.tree or [None]
    print(f"{'method':18s} {'tree':24s} {'CPU s':>18s} {'wall s':>8s} {'lines':>6s} {'bytes':>7s} "
          f"{'.nbc bytes':>11s}", flush=True)
    for method in args.methods:
        runs = {t: [] for t in trees}
        for r in range(args.repeat):
            for tree in (trees if r % 2 == 0 else trees[::-1]):
                runs[tree].append(compile_once(tree, method))
        for tree in trees:
            cpus = [x[0] for x in runs[tree]]
            cpu, wall, lines, size, nbc = runs[tree][-1]
            print(f"{method:18s} {(tree or 'this cosim')[-24:]:24s} "
                  f"{statistics.median(cpus):6.1f} ({'/'.join(f'{c:.0f}' for c in cpus):>9s}) "
                  f"{statistics.median(x[1] for x in runs[tree]):8.1f} {lines:6d} {size:7d} "
                  f"{sum(nbc.values()):11d}", flush=True)


if __name__ == "__main__":
    main()
