"""Installed size of cosim's core dependencies and of each extra (docs/install.md).

Sums the files each installed distribution lists in its RECORD, for the
dependency closure of the core and of each extra (minus the core's), in the
running environment; run it in a venv holding ``cosim[all]``:

    python benchmarks/extras_size.py
"""
import importlib.metadata as md
import os
import re

from packaging.requirements import Requirement

CORE = ["numpy", "scipy", "pyyaml", "matplotlib"]
EXTRAS = {
    "fast": ["numba"],
    "fmu": ["pythonfmu", "fmpy", "libcosimpy"],
    "ros": None,                      # every ros-* distribution
    "robots": ["pin", "example-robot-data"],
    "sweep": ["dask", "distributed", "pyarrow"],
    "pandas": ["pandas"],
    "docs": ["sphinx", "myst-parser"],
    "test": ["pytest", "scikit-sundae"],
    "bench": ["scikit-sundae", "pyinstrument"],
}


def norm(name):
    return re.sub(r"[-_.]+", "-", name.lower())


def main():
    dists = {norm(d.metadata["Name"]): d for d in md.distributions()}

    def closure(names, seen):
        for n in map(norm, names):
            if n in seen or n not in dists:
                continue
            seen.add(n)
            reqs = [Requirement(r) for r in (dists[n].requires or [])]
            closure([r.name for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})], seen)
        return seen

    def size(names):
        total = 0
        for n in names:
            for f in dists[n].files or []:
                try:
                    total += os.path.getsize(dists[n].locate_file(f))
                except OSError:
                    pass
        return total / 1e6

    core = closure(CORE, set())
    print(f"{'core':8s} {size(core):7.0f} MB  ({len(core)} distributions)")
    for extra, names in EXTRAS.items():
        names = [n for n in dists if n.startswith("ros-")] if names is None else names
        missing = [n for n in names if norm(n) not in dists]
        if missing:
            print(f"{extra:8s}     not installed ({', '.join(missing)})")
            continue
        own = closure(names, set()) - core
        print(f"{extra:8s} {size(own):7.0f} MB  ({len(own)} distributions besides the core's)")


if __name__ == "__main__":
    main()
