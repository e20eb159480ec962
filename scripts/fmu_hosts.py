"""Which FMI hosts run cosim's FMUs, and with what result: FMU x host -> runs, max |difference|
of every output against cosim.Simulation on the same time grid.

    python scripts/fmu_hosts.py OUT_DIR [--backend python|auto] [--steps N] [--hosts ...]

Builds six FMUs into OUT_DIR (pendulum, two_link, andrews with bdf, the shipped scenario
pendulum_pd, the shipped two_link.urdf robot, a discrete PD controller) and runs each for N
communication steps of its DefaultExperiment stepSize, inputs held at their start values,
in every host that is installed here:

  fmpy        FMPy's FMU2Slave, in this Python
  libcosim    libcosimpy (libcosim, OSP), in a Python process
  ecos        ecospy (ecos), the FMU in the Python process
  ecos-proxy  ecospy with the FMU in ecos's out-of-process runner (proxyfmu: a C++ program)
  c           a C program that neither links nor preloads libpython (the FMU loads Python)
  oms         OMSimulator's Python API (OMSimulator.FMU: stepUntil, getValue)
  oms-cli     OMSimulator's Python command-line program (python -m OMSimulator X.fmu), CSV result
  oms-native  OMSimulator's native command-line program (C++, on the PATH with OpenModelica),
              CSV result, environment without PYTHON*/LD_* variables

Each host runs in its own process; the C host and ecos's runner get an environment without
any PYTHON*/LD_* variable.  The reference is cosim.Simulation built from the FMU's own
configuration (CosimSlave.simulation_spec, the FMU's one translation), stepped over the
host's communication points (t += h; libcosim: its integer nanoseconds in seconds).
OMSimulator's CSV results hold 12 significant digits: their entries are at most ~5e-12
relative even when the values are identical.
A host that is not installed is reported as such; a run that fails shows its first error.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PD_BLOCK = {"type": "state_feedback", "name": "pd", "sample_time": 0.01, "K": [[40.0, 8.0]],
            "reference_gain": [[40.0]], "inputs": ["angle", "angular_velocity", "reference"],
            "outputs": ["torque"],
            "units": {"angle": "rad", "angular_velocity": "rad/s", "reference": "rad", "torque": "N.m"}}
FMUS = {  # name: cosim fmu build arguments
    "Pendulum": ["pendulum"],
    "TwoLink": ["two_link"],
    "AndrewsBdf": ["andrews", "--method", "bdf"],
    "PendulumPD": ["pendulum_pd"],
    "TwoLinkUrdf": [str(REPO / "cosim" / "data" / "urdf" / "two_link.urdf")],
    "PD": ["fmu.examples:NoPlant", "--method", "rk4", "--step", "0.01", "--block",
           json.dumps(PD_BLOCK), "--stop-time", "2", "--comm-step", "0.01"],
}
HOSTS = ("fmpy", "libcosim", "ecos", "ecos-proxy", "c", "oms", "oms-cli", "oms-native")
LABELS = {"fmpy": "FMPy", "libcosim": "libcosim", "ecos": "ecos",
          "ecos-proxy": "ecos out-of-process (proxyfmu)", "c": "C host, no Python",
          "oms": "OMSimulator Python API", "oms-cli": "OMSimulator command line (Python)",
          "oms-native": "OMSimulator command line (native)"}
NOTES = {"AndrewsBdf": " (`--method bdf`)", "PendulumPD": " (scenario)",
         "TwoLinkUrdf": " (`two_link.urdf`)", "PD": " (controller, `--block`)"}

FMPY_RUN = """
import json, sys
from fmpy import extract, read_model_description
from fmpy.fmi2 import FMU2Slave
path, n, h, names = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
md = read_model_description(path)
vr = {v.name: v.valueReference for v in md.modelVariables}
fmu = FMU2Slave(guid=md.guid, unzipDirectory=extract(path), modelIdentifier=md.coSimulation.modelIdentifier,
                instanceName="fmpy")
fmu.instantiate()
fmu.setupExperiment(startTime=0.0)
fmu.enterInitializationMode()
fmu.exitInitializationMode()
t, rows = 0.0, []
for _ in range(n):
    fmu.doStep(t, h)
    t += h
    rows.append(fmu.getReal([vr[x] for x in names]))
fmu.terminate()
fmu.freeInstance()
print(json.dumps(rows))
"""

LIBCOSIM_RUN = """
import json, sys
from libcosimpy.CosimExecution import CosimExecution
from libcosimpy.CosimLogging import CosimLogLevel, log_output_level
from libcosimpy.CosimObserver import CosimObserver
from libcosimpy.CosimSlave import CosimLocalSlave
log_output_level(CosimLogLevel.ERROR)
path, n, h, names = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
ex = CosimExecution.from_step_size(round(h * 1e9))
i = ex.add_local_slave(CosimLocalSlave(fmu_path=path, instance_name="m"))
refs = {v.name.decode(): v.reference for v in ex.slave_variables(i)}
obs = CosimObserver.create_last_value()
ex.add_observer(obs)
rows = []
for _ in range(n):
    assert ex.step(1)
    rows.append(list(obs.last_real_values(i, [refs[x] for x in names])))
print(json.dumps(rows))
"""

ECOS_RUN = """
import json, sys
from ecospy import EcosSimulation, EcosSimulationStructure
from ecospy.lib import EcosLib
EcosLib.set_log_level("err")
uri, n, h, names = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
rows = []
with EcosSimulationStructure() as ss:
    ss.add_model("m", uri)
    with EcosSimulation(structure=ss, step_size=h) as sim:
        sim.init()
        for _ in range(n):
            sim.step()
            rows.append([sim.get_real("m::" + x) for x in names])
        sim.terminate()
print(json.dumps(rows))
"""

OMS_RUN = """
import json, sys
from OMSimulator import FMU
path, n, h, names = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
fmu = FMU(path)
fmu.startTime, fmu.stopTime, fmu.stepSize = 0.0, (n + 10) * h, h  # tolerance: the FMU's own
fmu.instantiate()
fmu.initialize()
t, rows = 0.0, []
for _ in range(n):
    t += h
    fmu.stepUntil(t)
    rows.append([float(fmu.getValue(x)) for x in names])
fmu.terminate()
fmu.delete()
print(json.dumps(rows))
"""

C_HOST = r"""
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
typedef void *fmi2Component;
typedef unsigned int fmi2ValueReference;
typedef struct { void (*logger)(void *, const char *, int, const char *, const char *, ...);
                 void *(*allocateMemory)(size_t, size_t); void (*freeMemory)(void *);
                 void *stepFinished; void *componentEnvironment; } fmi2CallbackFunctions;
static void logger(void *e, const char *i, int status, const char *c, const char *msg, ...) {
    if (status < 2) return;
    va_list ap; va_start(ap, msg); vfprintf(stderr, msg, ap); fprintf(stderr, "\n"); va_end(ap);
}
#define LOAD(type, name) __typeof__(type) name = (__typeof__(type))dlsym(lib, #name); if (!name) return 2;
int main(int argc, char **argv) {  /* library guid resourceURI n h vr... */
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    LOAD(fmi2Component (*)(const char *, int, const char *, const char *, const fmi2CallbackFunctions *, int, int), fmi2Instantiate)
    LOAD(int (*)(fmi2Component, int, double, double, int, double), fmi2SetupExperiment)
    LOAD(int (*)(fmi2Component), fmi2EnterInitializationMode)
    LOAD(int (*)(fmi2Component), fmi2ExitInitializationMode)
    LOAD(int (*)(fmi2Component, double, double, int), fmi2DoStep)
    LOAD(int (*)(fmi2Component, const fmi2ValueReference *, size_t, double *), fmi2GetReal)
    LOAD(int (*)(fmi2Component), fmi2Terminate)
    LOAD(void (*)(fmi2Component), fmi2FreeInstance)
    fmi2CallbackFunctions cb = {logger, calloc, free, NULL, NULL};
    fmi2Component c = fmi2Instantiate("c", 1, argv[2], argv[3], &cb, 0, 0);
    if (!c) return 3;
    int n = atoi(argv[4]), m = argc - 6; double h = atof(argv[5]), t = 0.0, y[64];
    fmi2ValueReference vr[64];
    for (int k = 0; k < m && k < 64; k++) vr[k] = (fmi2ValueReference)atoi(argv[6 + k]);
    if (fmi2SetupExperiment(c, 0, 0.0, 0.0, 0, 0.0) || fmi2EnterInitializationMode(c) || fmi2ExitInitializationMode(c)) return 4;
    printf("[");
    for (int k = 0; k < n; k++) {
        if (fmi2DoStep(c, t, h, 1)) return 5;
        t += h;
        if (fmi2GetReal(c, vr, m, y)) return 6;
        printf(k ? ",[" : "[");
        for (int j = 0; j < m; j++) printf(j ? ",%.17g" : "%.17g", y[j]);
        printf("]");
    }
    printf("]\n");
    fmi2Terminate(c);
    fmi2FreeInstance(c);
    return 0;
}
"""


def bare_environment(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "LD_", "VIRTUAL_ENV", "CONDA", "COSIM_FMU"))}
    env.update(extra)
    return env


def build(out, backend):
    from cosim.cli import main as cosim_main
    paths = {}
    for name, args in FMUS.items():
        path = out / f"{name}.fmu"
        if cosim_main(["fmu", "build", *args, "-o", str(path), "--name", name, "--backend", backend]) != 0:
            raise SystemExit(f"building {name} failed")
        paths[name] = path
    return paths


def grid(host, n, h):
    """The communication points a host steps over: t += h (fmpy, ecos, the C host), or libcosim's
    integer nanoseconds converted to seconds, t_k = k*step_ns/1e9 (h_k = t_k+1 - t_k)."""
    if host == "libcosim":
        step_ns = round(h * 1e9)
        return [(k * step_ns) / 1e9 for k in range(n + 1)]
    points = [0.0]
    for _ in range(n):
        points.append(points[-1] + h)
    return points


def reference(path, n, host):
    """(output names, rows, h) of cosim.Simulation built from the FMU's configuration, stepped
    over the host's communication points."""
    from fmpy import read_model_description

    from fmu.slave import CONFIG_FILE, CosimSlave
    md = read_model_description(str(path))
    h = float(md.defaultExperiment.stepSize)
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(path) as zf:
            zf.extract(f"resources/{CONFIG_FILE}", tmp)
        slave = CosimSlave(instance_name="reference", resources=str(Path(tmp) / "resources"))
    outputs = slave._cfg["variables"]["outputs"]
    names = [v["name"] for v in outputs]
    sim = slave._build_simulation()
    sim.set_inputs([float(v["start"]) for v in slave._cfg["variables"]["inputs"]])
    points, rows = grid(host, n, h), []
    for t, t_next in zip(points[:-1], points[1:]):
        sim.do_step(t, t_next - t)
        out = sim.get_output_dict()
        rows.append([out[v["key"]] for v in outputs])
    return names, np.array(rows), h


def c_host(folder):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None
    (folder / "host.c").write_text(C_HOST)
    subprocess.run([cc, "-O1", "-o", str(folder / "host"), str(folder / "host.c"), "-ldl"],
                   check=True, capture_output=True)
    return folder / "host"


def proxyfmu_path(folder):
    """ecos's out-of-process runner, executable (the ecospy 0.7.2 wheel installs it without
    the executable bit): a copy in ``folder``, or None without ecospy."""
    try:
        import ecospy
    except Exception:  # noqa: BLE001 - not installed, or its native library does not load
        return None
    source = Path(ecospy.__file__).parent / "binaries" / "proxyfmu"
    if not source.exists():
        return None
    target = folder / "proxyfmu"
    shutil.copy2(source, target)
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return target


def read_csv_result(path, names, n):
    """Rows after t = 0 (the last one per time) of an OMSimulator CSV result, ``names`` order."""
    import csv
    with open(path, newline="", encoding="utf-8") as fh:
        table = [row for row in csv.reader(fh, skipinitialspace=True) if row]
    header = [c.strip().strip('"') for c in table[0]]
    columns = []
    for x in names:
        found = [i for i, c in enumerate(header) if c == x or c.endswith("." + x)]
        if not found:
            raise ValueError(f"no column for {x!r} in the result")
        columns.append(min(found, key=lambda i: len(header[i])))
    by_time = {float(row[0]): [float(row[i]) for i in columns] for row in table[1:]}
    return [by_time[t] for t in sorted(by_time)[1:n + 1]]


def available(host):
    modules = {"fmpy": "fmpy", "libcosim": "libcosimpy", "ecos": "ecospy", "ecos-proxy": "ecospy",
               "oms": "OMSimulator", "oms-cli": "OMSimulator"}
    if host == "oms-native":
        return None if shutil.which("OMSimulator") else "no OMSimulator program on the PATH"
    if host == "c":
        return None if (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")) \
            else "no C compiler"
    proc = subprocess.run([sys.executable, "-c", f"import {modules[host]}"], capture_output=True,
                          text=True, timeout=300)  # in its own process (OMSimulator loads a library)
    if proc.returncode != 0:
        last = ([x for x in proc.stderr.splitlines() if x.strip()] or ["?"])[-1]
        return f"{modules[host]} not importable ({last[:100]})"
    return None


def run_host(host, path, names, n, h, work):
    md_vr = None
    if host == "c":
        from fmpy import read_model_description
        md = read_model_description(str(path))
        md_vr = {v.name: v.valueReference for v in md.modelVariables}
        unzip = work / f"{path.stem}_c"
        zipfile.ZipFile(path).extractall(unzip)
        lib = unzip / "binaries" / "linux64" / f"{md.coSimulation.modelIdentifier}.so"
        cmd = [str(work / "host"), str(lib), md.guid, (unzip / "resources").as_uri(), str(n), repr(h)]
        cmd += [str(md_vr[x]) for x in names]
        env = bare_environment()
    elif host in ("oms-cli", "oms-native"):
        from fmpy import read_model_description
        tol = float(read_model_description(str(path)).defaultExperiment.tolerance)
        stop = grid(host, n, h)[-1]
        result = work / f"{path.stem}_{host}.csv"
        if host == "oms-cli":
            cmd = [sys.executable, "-m", "OMSimulator", str(path), "--result-file", str(result),
                   "--stop-time", repr(stop), "--step-size", repr(h), "--tolerance", repr(tol)]
            env = dict(os.environ)
        else:
            cmd = [shutil.which("OMSimulator"), str(path), f"--resultFile={result}",
                   f"--stopTime={stop!r}", f"--stepSize={h!r}", f"--tolerance={tol!r}",
                   f"--tempDir={work}"]
            env = bare_environment()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env, cwd=str(work))
        if proc.returncode != 0 or not result.exists():
            lines = [x for x in (proc.stderr + proc.stdout).splitlines() if x.strip()]
            return None, f"exit {proc.returncode}: {(lines[-1] if lines else 'no result')[:160]}"
        try:
            return np.array(read_csv_result(result, names, n), dtype=float), None
        except (ValueError, KeyError, IndexError) as exc:
            return None, f"result {result.name}: {exc}"
    elif host == "ecos-proxy":
        cmd = [sys.executable, "-c", ECOS_RUN, f"proxyfmu://localhost?file={path}", str(n), repr(h),
               json.dumps(names)]
        env = dict(os.environ, PATH=f"{work}{os.pathsep}{os.environ.get('PATH', '')}")
    else:
        script = {"fmpy": FMPY_RUN, "libcosim": LIBCOSIM_RUN, "ecos": ECOS_RUN, "oms": OMS_RUN}[host]
        cmd = [sys.executable, "-c", script, str(path), str(n), repr(h), json.dumps(names)]
        env = dict(os.environ)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env, cwd=str(work))
    if proc.returncode != 0:
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        return None, f"exit {proc.returncode}: {(lines[-1] if lines else '')[:160]}"
    rows = [x for x in proc.stdout.splitlines() if x.startswith("[")][-1]  # OMSimulator logs "info: …"
    return np.array(json.loads(rows), dtype=float), None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the FMUs and the hosts")
    parser.add_argument("--backend", default="python", choices=("python", "auto"),
                        help="FMU backend (python: nothing compiles; auto: numba where importable)")
    parser.add_argument("--steps", type=int, default=50, help="communication steps per run")
    parser.add_argument("--hosts", default=",".join(HOSTS), help="comma-separated subset of " + ", ".join(HOSTS))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    hosts = [h for h in args.hosts.split(",") if h]
    work = args.out / "hosts"
    work.mkdir(exist_ok=True)
    if "c" in hosts:
        c_host(work)
    if "ecos-proxy" in hosts:
        proxyfmu_path(work)
    print(f"building {len(FMUS)} FMUs (backend {args.backend}) in {args.out}", flush=True)
    paths = build(args.out, args.backend)
    missing = {h: available(h) for h in hosts}
    results = {}
    for name, path in paths.items():
        for host in hosts:
            names, want, h = reference(path, args.steps, host)
            if missing[host]:
                results[name, host] = f"not run: {missing[host]}"
                continue
            got, error = run_host(host, path, names, args.steps, h, work)
            if error:
                results[name, host] = f"fails: {error}"
            else:
                diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("nan")
                results[name, host] = f"runs, {diff:.1e}" if diff else "runs, 0"
            print(f"{name} x {host}: {results[name, host]}", flush=True)
    print(f"\n{args.steps} steps of the DefaultExperiment stepSize; entry: max |output - "
          f"cosim.Simulation| over all outputs and steps\n")
    print("| FMU | " + " | ".join(LABELS[h] for h in hosts) + " |")
    print("|---|" + "---|" * len(hosts))
    for name in paths:
        print(f"| {name}{NOTES.get(name, '')} | " + " | ".join(results[name, h] for h in hosts) + " |")
    return 0 if all(r.startswith(("runs", "not run")) for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
