"""Write the figures the documentation shows, each by the command a user runs:

    python docs/figures/make_figures.py

* ``pendulum_pd.png``: ``cosim run pendulum_pd --plot`` (also what ``cosim demo`` draws);
* ``andrews.png``: ``cosim simulate andrews --plot`` (Andrews' squeezer, ``cosim demo``);
* ``sweep.png``: ``cosim sweep pendulum_pd --grid l=0.5:2:6 --plot`` (six rod lengths).

The PNG files are written next to this script; the CSV and Parquet files go to a
temporary folder.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

COMMANDS = [
    ("pendulum_pd.png", ["run", "pendulum_pd"]),
    ("andrews.png", ["simulate", "andrews"]),
    ("sweep.png", ["sweep", "pendulum_pd", "--grid", "l=0.5:2:6", "--workers", "2", "--out", "{tmp}/sweep"]),
]


def main():
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in COMMANDS:
            argv = [a.format(tmp=tmp) for a in argv] + ["--plot", str(HERE / name)]
            print("$ cosim " + " ".join(argv), flush=True)
            subprocess.run([sys.executable, "-m", "cosim", *argv], env=env, cwd=tmp, check=True,
                           stdout=subprocess.DEVNULL)
            print(f"  wrote {HERE / name}", flush=True)


if __name__ == "__main__":
    main()
