"""OMSimulator (OpenModelica's FMI/SSP co-simulation tool) runs cosim's FMUs: the pendulum and
the ``pendulum_pd`` scenario, through its Python API, its Python command-line program
(``python -m OMSimulator``) and, where an OpenModelica installation puts it on the PATH, its
native command-line program ``OMSimulator`` (a C++ program: the FMU loads Python itself).
Outputs are compared with :class:`cosim.Simulation` on OMSimulator's communication grid.

OMSimulator's PyPI package (``pip install OMSimulator``) is a source package whose build step
downloads the binaries from OpenModelica's own server; where that server cannot be reached
(a machine that reaches only PyPI) it does not install, and these tests skip with the reason.
Nothing here fails for a missing OMSimulator.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from cosim.cli import main as cosim_main

pytest.importorskip("fmpy")
pytest.importorskip("pythonfmu")
from fmpy import read_model_description  # noqa: E402

pytestmark = pytest.mark.fmu

FMUS = {"Pendulum": ["pendulum"], "PendulumPD": ["pendulum_pd"]}  # cosim fmu build arguments
STEPS = 50
CSV_RTOL = 1e-11  # OMSimulator writes CSV results with 12 significant digits ("%.12g")


def _probe():
    """None when OMSimulator's Python package imports here, else why not (one line)."""
    proc = subprocess.run([sys.executable, "-c", "import OMSimulator; print(OMSimulator.version)"],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode == 0:
        return None
    last = ([line for line in proc.stderr.splitlines() if line.strip()] or ["?"])[-1]
    if "No module named 'OMSimulator'" in last:
        return ("OMSimulator is not installed (pip install OMSimulator: its source package "
                "downloads the binaries from OpenModelica's server at install time, which fails "
                "where only PyPI is reachable)")
    return f"OMSimulator does not import here: {last[:200]}"


@pytest.fixture(scope="module")
def omsimulator():
    reason = _probe()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def native_omsimulator():
    program = shutil.which("OMSimulator")
    if program is None:
        pytest.skip("no native OMSimulator program on the PATH (OpenModelica's installation "
                    "has it; the PyPI package ships only the Python one)")
    return program


@pytest.fixture(scope="module")
def fmus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("oms_fmus")
    paths = {}
    for name, args in FMUS.items():
        path = folder / f"{name}.fmu"
        assert cosim_main(["fmu", "build", *args, "-o", str(path), "--name", name,
                           "--backend", "python"]) == 0
        paths[name] = path
    return paths


def bare_environment():
    """The environment of a host that has nothing to do with Python."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "LD_", "VIRTUAL_ENV", "CONDA", "COSIM_FMU"))}


def grid(h, n):
    """OMSimulator's communication points (its weakly-coupled master: t_next = t + h)."""
    points = [0.0]
    for _ in range(n):
        points.append(points[-1] + h)
    return points


def reference(path, n):
    """(output names, rows, h, tolerance): cosim.Simulation built from the FMU's configuration
    (its one translation), inputs at their start values, stepped over OMSimulator's grid."""
    from fmu.slave import CONFIG_FILE, CosimSlave
    md = read_model_description(str(path))
    h, tol = float(md.defaultExperiment.stepSize), float(md.defaultExperiment.tolerance)
    with zipfile.ZipFile(path) as zf:
        zf.extract(f"resources/{CONFIG_FILE}", path.parent / f"{path.stem}_cfg")
    slave = CosimSlave(instance_name="reference", resources=str(path.parent / f"{path.stem}_cfg" / "resources"))
    outputs = slave._cfg["variables"]["outputs"]
    sim = slave._build_simulation()
    sim.set_inputs([float(v["start"]) for v in slave._cfg["variables"]["inputs"]])
    points, rows = grid(h, n), []
    for t, t_next in zip(points[:-1], points[1:]):
        sim.do_step(t, t_next - t)
        out = sim.get_output_dict()
        rows.append([out[v["key"]] for v in outputs])
    return [v["name"] for v in outputs], np.array(rows), h, tol


OMS_API = """
import json, sys
from OMSimulator import FMU
path, n, h, tol, names = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
fmu = FMU(path)
# before instantiate(): they reach the FMU's fmi2SetupExperiment (OMSimulator 3.0's FMU API)
fmu.startTime, fmu.stopTime, fmu.tolerance, fmu.stepSize = 0.0, (n + 10) * h, tol, h
fmu.instantiate()
fmu.initialize()
t, rows = 0.0, []
for _ in range(n):
    t += h
    fmu.stepUntil(t)
    rows.append([float(fmu.getValue(x)) for x in names])
fmu.terminate()
fmu.delete()
print("ROWS " + json.dumps(rows))
"""


def _rows_of(proc):
    line = next((x for x in proc.stdout.splitlines() if x.startswith("ROWS ")), None)
    assert proc.returncode == 0 and line, (proc.stdout[-2000:], proc.stderr[-2000:])
    return np.array(json.loads(line[5:]), dtype=float)


@pytest.mark.parametrize("name", list(FMUS))
def test_omsimulator_python_api_runs_the_fmu_identically(omsimulator, fmus, name, tmp_path):
    """OMSimulator's Python API (``OMSimulator.FMU``: instantiate, initialize, stepUntil,
    getValue), 50 steps of the DefaultExperiment stepSize at the FMU's own tolerance: every
    output equals cosim.Simulation on the same grid (max difference 0, the same code runs in
    this Python)."""
    names, want, h, tol = reference(fmus[name], STEPS)
    proc = subprocess.run([sys.executable, "-c", OMS_API, str(fmus[name]), str(STEPS), repr(h),
                           repr(tol), json.dumps(names)], capture_output=True, text=True,
                          timeout=900, cwd=str(tmp_path))
    got = _rows_of(proc)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) == 0.0


def read_csv_result(path, names, n):
    """The last row of each communication point after t = 0 in OMSimulator's CSV result, columns
    in ``names`` order (a column is named ``<instance>.<variable>`` or with the system path)."""
    with open(path, newline="", encoding="utf-8") as fh:
        table = [row for row in csv.reader(fh, skipinitialspace=True) if row]
    header = [c.strip().strip('"') for c in table[0]]
    columns = []
    for x in names:
        candidates = [i for i, c in enumerate(header) if c == x or c.endswith("." + x)]
        assert candidates, f"no column for {x!r} in {header}"
        columns.append(min(candidates, key=lambda i: len(header[i])))
    by_time = {}
    for row in table[1:]:
        by_time[float(row[0])] = [float(row[i]) for i in columns]  # the last row at that time wins
    times = sorted(by_time)[1:]  # after the initial point
    assert len(times) == n, times
    return np.array(times), np.array([by_time[t] for t in times])


def _check_csv(result, names, want, h):
    times, got = read_csv_result(result, names, len(want))
    assert np.max(np.abs(times - np.array(grid(h, len(want))[1:]))) <= CSV_RTOL * times[-1]
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= CSV_RTOL * np.abs(want)), np.max(np.abs(got - want))


@pytest.mark.parametrize("name", list(FMUS))
def test_omsimulator_python_command_line_runs_the_fmu(omsimulator, fmus, name, tmp_path):
    """The package's command-line program, ``python -m OMSimulator X.fmu --result-file res.csv
    --stop-time T --step-size h --tolerance TOL``: the CSV result equals cosim.Simulation on the
    same grid to the 12 significant digits OMSimulator writes (relative difference <= 1e-11)."""
    names, want, h, tol = reference(fmus[name], STEPS)
    stop = grid(h, STEPS)[-1]
    result = tmp_path / "res.csv"
    proc = subprocess.run([sys.executable, "-m", "OMSimulator", str(fmus[name]), "--result-file",
                           str(result), "--stop-time", repr(stop), "--step-size", repr(h),
                           "--tolerance", repr(tol)], capture_output=True, text=True, timeout=900,
                          cwd=str(tmp_path))
    assert proc.returncode == 0 and result.exists(), (proc.stdout[-2000:], proc.stderr[-2000:])
    _check_csv(result, names, want, h)


@pytest.mark.parametrize("name", list(FMUS))
def test_omsimulator_native_command_line_without_python_runs_the_fmu(native_omsimulator, fmus, name,
                                                                      tmp_path):
    """OMSimulator's native command-line program (C++; on the PATH with an OpenModelica
    installation), in an environment without any PYTHON*/LD_* variable: the FMU loads the
    Python recorded at build time itself, and the CSV result equals cosim.Simulation to the 12
    significant digits written (relative difference <= 1e-11)."""
    program = native_omsimulator
    names, want, h, tol = reference(fmus[name], STEPS)
    stop = grid(h, STEPS)[-1]
    result = tmp_path / "res.csv"
    proc = subprocess.run([program, str(fmus[name]), f"--resultFile={result}", f"--stopTime={stop!r}",
                           f"--stepSize={h!r}", f"--tolerance={tol!r}", f"--tempDir={tmp_path}"],
                          capture_output=True, text=True, timeout=900, cwd=str(tmp_path),
                          env=bare_environment())
    assert proc.returncode == 0 and result.exists(), (proc.stdout[-2000:], proc.stderr[-2000:])
    _check_csv(result, names, want, h)

