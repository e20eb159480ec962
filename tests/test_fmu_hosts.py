"""FMUs in every kind of FMI host: a C program without Python, hosts missing a package,
the FMI log a user reads, the binary's portability, and the metadata.

The FMUs here run the python backend (`cosim fmu build --backend python`) wherever the
backend does not matter, so that no test compiles numba kernels.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.cli import main as cosim_main

fmpy = pytest.importorskip("fmpy")
pytest.importorskip("pythonfmu")
from fmpy import extract, read_model_description  # noqa: E402
from fmpy.fmi2 import (FMU2Slave, defaultCallbacks, fmi2CallbackFunctions,  # noqa: E402
                       fmi2CallbackLoggerTYPE)
from fmpy.validation import validate_fmu  # noqa: E402

from fmu.builder import LIBPYTHON_ENV, PACKAGES, PYTHON_REQUIRES, python_runtime  # noqa: E402

pytestmark = pytest.mark.fmu

REPO = Path(__file__).resolve().parents[1]
TWO_LINK_URDF = REPO / "cosim" / "data" / "urdf" / "two_link.urdf"
OK, WARNING, ERROR = 0, 1, 3  # fmi2Status
OUTPUTS = ["angle", "angular_velocity", "rod_force"]


@pytest.fixture(scope="module")
def fmu_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("host_fmus")


@pytest.fixture(scope="module")
def pendulum_py(fmu_dir):
    """The pendulum FMU on the python backend (no compilation anywhere), its method the
    default rule's for a driven plant (dopri5)."""
    path = fmu_dir / "Pendulum.fmu"
    assert cosim_main(["fmu", "build", "pendulum", "-o", str(path), "--backend", "python"]) == 0
    return path


@pytest.fixture(scope="module")
def two_link_urdf_py(fmu_dir):
    path = fmu_dir / "TwoLinkUrdf.fmu"
    assert cosim_main(["fmu", "build", str(TWO_LINK_URDF), "-o", str(path), "--backend", "python",
                       "--name", "TwoLinkUrdf", "--method", "dopri5"]) == 0
    return path


def reference(n, h, backend="python", rtol=1e-6):
    """cosim.Simulation on the grid the hosts use: torque = sin(3 t) held over each step."""
    sim = cosim.Simulation(model="pendulum", method="dopri5", backend=backend, rtol=rtol)
    t, rows = 0.0, []
    for _ in range(n):
        sim.set_inputs({"torque": float(np.sin(3.0 * t))})
        sim.do_step(t, h)
        t += h
        rows.append(sim.get_outputs())
    return np.array(rows)


# -- 1. a C host that has no Python ----------------------------------------------------------------
C_HOST = r"""
/* An FMI 2.0 co-simulation host in C without Python: it neither links nor preloads
   libpython.  dlopen the FMU binary; instantiate, set up, initialize, n x (setReal
   torque = sin(3 t), doStep, getReal), terminate, free.  Prints one line of outputs per step. */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *fmi2Component;
typedef unsigned int fmi2ValueReference;
typedef void (*logger_t)(void *, const char *, int, const char *, const char *, ...);
typedef struct {
    logger_t logger;
    void *(*allocateMemory)(size_t, size_t);
    void (*freeMemory)(void *);
    void *stepFinished;
    void *componentEnvironment;
} fmi2CallbackFunctions;

static void logger(void *env, const char *name, int status, const char *cat, const char *msg, ...) {
    va_list ap; va_start(ap, msg);
    fprintf(stderr, "[status=%d %s] ", status, cat ? cat : "");
    vfprintf(stderr, msg, ap); fprintf(stderr, "\n"); va_end(ap);
}

typedef fmi2Component (*instantiate_t)(const char *, int, const char *, const char *,
                                       const fmi2CallbackFunctions *, int, int);
typedef int (*setup_t)(fmi2Component, int, double, double, int, double);
typedef int (*plain_t)(fmi2Component);
typedef int (*step_t)(fmi2Component, double, double, int);
typedef int (*real_t)(fmi2Component, const fmi2ValueReference *, size_t, double *);
typedef int (*setreal_t)(fmi2Component, const fmi2ValueReference *, size_t, const double *);
typedef void (*free_t)(fmi2Component);
#define LOAD(type, name) type name = (type)dlsym(lib, #name); if (!name) { fprintf(stderr, "missing %s\n", #name); return 2; }

int main(int argc, char **argv) {
    /* argv: library guid resourceURI n h vr_torque vr_out1 vr_out2 vr_out3 */
    if (argc < 10) return 2;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    LOAD(instantiate_t, fmi2Instantiate)
    LOAD(setup_t, fmi2SetupExperiment)
    LOAD(plain_t, fmi2EnterInitializationMode)
    LOAD(plain_t, fmi2ExitInitializationMode)
    LOAD(setreal_t, fmi2SetReal)
    LOAD(step_t, fmi2DoStep)
    LOAD(real_t, fmi2GetReal)
    LOAD(plain_t, fmi2Terminate)
    LOAD(free_t, fmi2FreeInstance)
    fmi2CallbackFunctions cb = {logger, calloc, free, NULL, NULL};
    fmi2Component c = fmi2Instantiate("chost", 1, argv[2], argv[3], &cb, 0, 1);
    if (!c) { fprintf(stderr, "instantiate failed\n"); return 3; }
    int n = atoi(argv[4]); double h = atof(argv[5]);
    fmi2ValueReference in = (fmi2ValueReference)atoi(argv[6]);
    fmi2ValueReference out[3] = {(fmi2ValueReference)atoi(argv[7]), (fmi2ValueReference)atoi(argv[8]),
                                 (fmi2ValueReference)atoi(argv[9])};
    if (fmi2SetupExperiment(c, 0, 0.0, 0.0, 0, 0.0) || fmi2EnterInitializationMode(c)
        || fmi2ExitInitializationMode(c)) return 4;
    double t = 0.0, y[3];
    for (int k = 0; k < n; k++) {
        double u = sin(3.0 * t);
        if (fmi2SetReal(c, &in, 1, &u)) return 5;
        int s = fmi2DoStep(c, t, h, 1);
        if (s) { fprintf(stderr, "doStep status %d\n", s); return 5; }
        t += h;  /* the master's own time, as the Python hosts keep it */
        if (fmi2GetReal(c, out, 3, y)) return 6;
        printf("%.17g %.17g %.17g\n", y[0], y[1], y[2]);
    }
    if (fmi2Terminate(c)) return 7;
    fmi2FreeInstance(c);
    return 0;
}
"""


@pytest.fixture(scope="module")
def c_host(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc, clang) to build the C host")
    folder = tmp_path_factory.mktemp("c_host")
    (folder / "host.c").write_text(C_HOST)
    subprocess.run([cc, "-O1", "-o", str(folder / "host"), str(folder / "host.c"), "-ldl", "-lm"],
                   check=True, capture_output=True, timeout=120)
    return folder / "host"


def bare_environment(**extra):
    """The environment of a host that has nothing to do with Python."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "LD_", "VIRTUAL_ENV", "CONDA", "COSIM_FMU"))}
    env.update(extra)
    return env


def run_c_host(host, fmu, unzip, n=40, h=0.01, env=None):
    zipfile.ZipFile(fmu).extractall(unzip)
    md = read_model_description(str(fmu))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    library = unzip / "binaries" / "linux64" / f"{md.coSimulation.modelIdentifier}.so"
    args = [str(host), str(library), md.guid, (unzip / "resources").as_uri(), str(n), repr(h),
            str(vr["torque"])] + [str(vr[name]) for name in OUTPUTS]
    return subprocess.run(args, capture_output=True, text=True, timeout=300,
                          env=env if env is not None else bare_environment(), cwd=str(unzip))


def test_c_host_without_python_runs_the_fmu_identically(pendulum_py, c_host, tmp_path):
    """A C program that neither links nor preloads libpython runs the pendulum FMU: the
    binary loads the Python recorded at build time itself.  Outputs vs cosim.Simulation
    on the same grid and inputs: max difference 0 (tolerance 0, the same code runs)."""
    n, h = 40, 0.01
    proc = run_c_host(c_host, pendulum_py, tmp_path / "fmu", n, h)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.array([[float(x) for x in line.split()] for line in proc.stdout.splitlines()])
    want = reference(n, h)
    assert got.shape == want.shape == (n, 3)
    assert np.max(np.abs(got - want)) == 0.0
    runtime = python_runtime()
    assert (f"[status=0 cosimRuntime] Python runtime: Python {runtime['full_version']} loaded "
            f"from {runtime['libpython']} (the host had none; home {runtime['home']})") in proc.stderr


def test_c_host_with_the_library_named_by_the_environment(pendulum_py, c_host, tmp_path):
    """$COSIM_FMU_LIBPYTHON overrides the recorded library: the same run with the variable
    naming this interpreter's libpython gives the same numbers; naming a missing file, the
    instantiation fails with one FMI-logged line saying what was tried and how to fix it."""
    libpython = python_runtime()["libpython"]
    if not libpython:
        pytest.skip("this Python has no shared libpython")
    ok = run_c_host(c_host, pendulum_py, tmp_path / "a", 5, 0.01,
                    env=bare_environment(**{LIBPYTHON_ENV: libpython}))
    assert ok.returncode == 0, ok.stderr[-3000:]
    got = np.array([[float(x) for x in line.split()] for line in ok.stdout.splitlines()])
    assert np.max(np.abs(got - reference(5, 0.01))) == 0.0

    missing = str(tmp_path / "no" / "libpython9.9.so")
    bad = run_c_host(c_host, pendulum_py, tmp_path / "b", 5, 0.01,
                     env=bare_environment(**{LIBPYTHON_ENV: missing}))
    assert bad.returncode == 3 and bad.stdout == ""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    lines = [line for line in bad.stderr.splitlines() if line.startswith("[status=")]
    assert lines == [
        f"[status=3 logStatusError] fmi2Instantiate failed: no Python runtime: the host process "
        f"has no Python loaded and this FMU needs CPython >={PYTHON_REQUIRES[0]}.{PYTHON_REQUIRES[1]} "
        f"(built with {version}) as a shared library with the packages named in its "
        f"modelDescription.xml; tried ${LIBPYTHON_ENV} {missing}: cannot open shared object file: "
        f"No such file or directory. Set {LIBPYTHON_ENV} to the path of a libpython{version}.so "
        f"(e.g. the lib folder of the Python that built the FMU) and PYTHONPATH to a "
        f"site-packages with those packages, or preload that library in the host"]


def test_binary_references_no_python_symbol_and_needs_glibc_2_28_at_most(pendulum_py, tmp_path):
    """`objdump -T` of the shipped binary: no undefined Python symbol (a host without Python
    can load it) and the highest GLIBC symbol version <= 2.28 (loads on Debian 10, RHEL 8,
    Ubuntu 20.04 and newer)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump (binutils) is not installed")
    with zipfile.ZipFile(pendulum_py) as zf:
        (tmp_path / "Pendulum.so").write_bytes(zf.read("binaries/linux64/Pendulum.so"))
    table = subprocess.run([objdump, "-T", str(tmp_path / "Pendulum.so")], capture_output=True,
                           text=True, check=True).stdout
    undefined = [line.split()[-1] for line in table.splitlines() if "*UND*" in line]
    assert undefined and not [s for s in undefined if re.match(r"_?Py", s)], undefined
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", table)}
    assert versions and max(versions) <= (2, 28), sorted(versions)
    assert "GLIBCXX_" not in table and "CXXABI_" not in table  # libstdc++ is linked statically


# -- 2. the host contract ----------------------------------------------------------------------------
def test_model_description_and_documentation_declare_the_host_contract(pendulum_py, two_link_urdf_py,
                                                                        tmp_path):
    """modelDescription.xml (VendorAnnotations, tool "cosim") and documentation/index.html name
    the Python range and every package the FMU needs, with its pip requirement; pinocchio for a
    URDF robot; generationTool is cosim."""
    import xml.etree.ElementTree as ET
    python = f">={PYTHON_REQUIRES[0]}.{PYTHON_REQUIRES[1]}"
    for fmu, modules in ((pendulum_py, ["numpy", "scipy"]),
                         (two_link_urdf_py, ["numpy", "scipy", "pinocchio"])):
        assert validate_fmu(str(fmu)) == []
        with zipfile.ZipFile(fmu) as zf:
            root = ET.fromstring(zf.read("modelDescription.xml"))
            doc = zf.read("documentation/index.html").decode()
            runtime = zf.read("resources/cosim_python.cfg").decode()
        assert root.get("generationTool") == f"cosim {cosim.__version__} (cosim fmu build)"
        req = root.find("VendorAnnotations/Tool[@name='cosim']/HostRequirements")
        assert req.get("python") == python and req.get("backend") == "python"
        packages = [(p.get("module"), p.get("pip"), p.get("required")) for p in req.findall("Package")]
        assert packages == [(m, f"{PACKAGES[m][0]}>={PACKAGES[m][1]}", "true") for m in modules]
        assert f"CPython <code>{python.replace('>', '&gt;')}</code>" in doc
        for module in modules:
            assert f"<code>{PACKAGES[module][0]}&gt;={PACKAGES[module][1]}</code>" in doc
        assert LIBPYTHON_ENV in doc and f"libpython={python_runtime()['libpython']}\n" in runtime


def test_host_contract_versions_follow_pyproject():
    """The contract's Python range and minimum versions are the package's own (pyproject.toml)."""
    import tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == f">={PYTHON_REQUIRES[0]}.{PYTHON_REQUIRES[1]}"
    declared = project["dependencies"] + project["optional-dependencies"]["fast"] \
        + project["optional-dependencies"]["robots"]
    for module, (pip, minimum, _) in PACKAGES.items():
        assert f"{pip}>={minimum}" in declared, module


BLOCKING_HOST = textwrap.dedent("""
    import json, sys
    BLOCKED = {blocked!r}
    class Block:  # these packages are missing in this host: importing them fails as there
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
    sys.meta_path.insert(0, Block())
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave, defaultCallbacks, fmi2CallbackFunctions, fmi2CallbackLoggerTYPE
    md = read_model_description({path!r})
    messages = []
    cb = fmi2CallbackFunctions()
    cb.logger = fmi2CallbackLoggerTYPE(
        lambda e, i, s, c, m: messages.append((s, (c or b"").decode(), m.decode())))
    cb.allocateMemory, cb.freeMemory = defaultCallbacks.allocateMemory, defaultCallbacks.freeMemory
    fmu = FMU2Slave(guid=md.guid, unzipDirectory={unzip!r} or extract({path!r}),
                    modelIdentifier=md.coSimulation.modelIdentifier, instanceName="host")
    try:
        fmu.instantiate(callbacks=cb, loggingOn=True)
    except Exception:
        print(json.dumps({{"instantiated": False, "messages": messages}}))
        raise SystemExit(0)
    fmu.setupExperiment(startTime=0.0)
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    fmu.doStep(0.0, 0.01)
    fmu.terminate()
    fmu.freeInstance()
    print(json.dumps({{"instantiated": True, "messages": messages}}))
""")


def run_blocking_host(path, blocked=(), unzip=None, tmp_path=None):
    proc = subprocess.run([sys.executable, "-c", BLOCKING_HOST.format(
        blocked=tuple(blocked), path=str(path), unzip=str(unzip) if unzip else None)],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path) if tmp_path else None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _missing(module):
    pip = "{}>={}".format(*PACKAGES[module][:2])
    what = pip if PACKAGES[module][0] == module else f"{module} (pip: {pip})"
    return f"{what} is missing (ModuleNotFoundError: No module named '{module}')", f"'{pip}'"


def _errors(result):
    return [m for s, _, m in result["messages"] if s == ERROR]


def test_missing_scipy_and_pinocchio_fail_instantiation_with_one_line(pendulum_py, two_link_urdf_py,
                                                                      tmp_path):
    """A host without scipy (and, for a URDF robot, pinocchio): fmi2Instantiate returns NULL
    after one fmi2Error line naming every missing package and the pip command."""
    where = f"{sys.executable}, Python {sys.version.split()[0]}"
    scipy, scipy_pip = _missing("scipy")
    pin, pin_pip = _missing("pinocchio")
    res = run_blocking_host(pendulum_py, ["scipy"], tmp_path=tmp_path)
    assert res["instantiated"] is False
    assert _errors(res) == [
        f"fmi2Instantiate failed: ImportError: this FMU cannot run in this Python ({where}): {scipy}; "
        f"install with: {sys.executable} -m pip install {scipy_pip}"]
    res = run_blocking_host(two_link_urdf_py, ["pinocchio"], tmp_path=tmp_path)
    assert res["instantiated"] is False
    assert _errors(res) == [
        f"fmi2Instantiate failed: ImportError: this FMU cannot run in this Python ({where}): {pin}; "
        f"install with: {sys.executable} -m pip install {pin_pip}"]
    res = run_blocking_host(two_link_urdf_py, ["scipy", "pinocchio"], tmp_path=tmp_path)
    assert _errors(res) == [
        f"fmi2Instantiate failed: ImportError: this FMU cannot run in this Python ({where}): {scipy}; "
        f"{pin}; install with: {sys.executable} -m pip install {scipy_pip} {pin_pip}"]


def test_python_outside_the_range_fails_instantiation_with_one_line(pendulum_py, tmp_path):
    """A Python outside the FMU's range (here: the range raised to >=3.99 in the unzipped
    FMU's configuration) is refused at fmi2Instantiate with one line."""
    unzip = tmp_path / "fmu"
    zipfile.ZipFile(pendulum_py).extractall(unzip)
    config = unzip / "resources" / "cosim_fmu.json"
    cfg = json.loads(config.read_text())
    cfg["host"].update(python=">=3.99", python_min=[3, 99])
    config.write_text(json.dumps(cfg))
    res = run_blocking_host(pendulum_py, unzip=unzip, tmp_path=tmp_path)
    version = sys.version.split()[0]
    assert res["instantiated"] is False
    assert _errors(res) == [
        f"fmi2Instantiate failed: ImportError: this FMU cannot run in this Python ({sys.executable}, "
        f"Python {version}): it needs CPython >=3.99, this is {version} (a host without Python: set "
        f"{LIBPYTHON_ENV} to a libpython in that range)"]


def test_without_numba_the_auto_backend_runs_python_and_says_why(fmu_dir, tmp_path):
    """Backend "auto" (the default) in a host without numba: the FMU runs, on the python backend,
    and the FMI log says so as a warning, with the reason and the package to install; built with
    backend "numba", the same host is refused at instantiation."""
    auto = fmu_dir / "LtiAuto.fmu"
    assert cosim_main(["fmu", "build", "lti", "-o", str(auto)]) == 0
    res = run_blocking_host(auto, ["numba"], tmp_path=tmp_path)
    assert res["instantiated"] is True
    runtime = [(s, m) for s, c, m in res["messages"] if c == "cosimRuntime"]
    assert runtime[1:] == [(WARNING, "backend python runs state-transition, not the compiled one: "
                                     "numba is not importable (ModuleNotFoundError: No module named "
                                     "'numba'); install numba>=0.60 in this Python for it")]
    assert runtime[0] == (OK, f"Python runtime: the host's Python {sys.version.split()[0]} "
                              f"({python_runtime()['libpython'] or sys.executable})")
    with zipfile.ZipFile(auto) as zf:
        text = zf.read("modelDescription.xml").decode()
    assert '<Package module="numba" pip="numba&gt;=0.60" required="false"' in text

    strict = fmu_dir / "LtiNumba.fmu"
    assert cosim_main(["fmu", "build", "lti", "-o", str(strict), "--backend", "numba"]) == 0
    res = run_blocking_host(strict, ["numba"], tmp_path=tmp_path)
    numba, numba_pip = _missing("numba")
    assert res["instantiated"] is False
    assert _errors(res) == [
        f"fmi2Instantiate failed: ImportError: this FMU cannot run in this Python ({sys.executable}, "
        f"Python {sys.version.split()[0]}): {numba}; install with: {sys.executable} -m pip install "
        f"{numba_pip}"]


# -- 3. what the importer changed goes to the FMI log ------------------------------------------------
class LoggedSlave:
    def __init__(self, path, name):
        self.md = read_model_description(str(path))
        self.vr = {v.name: v.valueReference for v in self.md.modelVariables}
        self.messages = []
        cb = fmi2CallbackFunctions()
        cb.logger = fmi2CallbackLoggerTYPE(
            lambda e, i, s, c, m: self.messages.append((s, (c or b"").decode(), m.decode())))
        cb.allocateMemory, cb.freeMemory = defaultCallbacks.allocateMemory, defaultCallbacks.freeMemory
        self.callbacks = cb
        self.fmu = FMU2Slave(guid=self.md.guid, unzipDirectory=extract(str(path)),
                             modelIdentifier=self.md.coSimulation.modelIdentifier, instanceName=name)
        self.fmu.instantiate(callbacks=cb, loggingOn=True)

    def category(self, name):
        return [(s, m) for s, c, m in self.messages if c == name]

    def close(self):
        self.fmu.terminate()
        self.fmu.freeInstance()


def test_importer_tolerance_and_backend_are_logged(pendulum_py):
    """fmi2SetupExperiment with a tolerance other than the FMU's: one fmi2Warning line in
    category cosimSettings naming both (the run then equals cosim.Simulation at the importer's
    rtol); the same tolerance: an fmi2OK line.  The backend in use: an fmi2OK line."""
    slave = LoggedSlave(pendulum_py, "tol")
    slave.fmu.setupExperiment(tolerance=1e-4, startTime=0.0)
    slave.fmu.enterInitializationMode()
    slave.fmu.exitInitializationMode()
    assert slave.category("cosimSettings") == [
        (WARNING, "fmi2SetupExperiment: the importer's tolerance 0.0001 replaces the FMU's relative "
                  "tolerance 1e-06 (solver.rtol); results differ from a run at 1e-06")]
    assert slave.category("cosimRuntime")[1:] == [
        (OK, "backend python runs dopri5 (the FMU was built with backend python)")]
    t, rows = 0.0, []
    for _ in range(20):
        slave.fmu.setReal([slave.vr["torque"]], [float(np.sin(3.0 * t))])
        slave.fmu.doStep(t, 0.01)
        t += 0.01
        rows.append(slave.fmu.getReal([slave.vr[n] for n in OUTPUTS]))
    slave.close()
    assert np.max(np.abs(np.array(rows) - reference(20, 0.01, rtol=1e-4))) == 0.0

    same = LoggedSlave(pendulum_py, "same")
    same.fmu.setupExperiment(tolerance=1e-6, startTime=0.0)
    assert same.category("cosimSettings") == [
        (OK, "fmi2SetupExperiment: relative tolerance 1e-06 (solver.rtol, the FMU's own)")]
    same.fmu.freeInstance()


# -- 5. metadata --------------------------------------------------------------------------------------
def test_urdf_fmu_names_are_structured_name_safe(two_link_urdf_py):
    """A URDF robot's input `joint1` and its parameter `joint1.q0` cannot both exist under
    structured naming: the parameter is `joint1_q0` (its description keeps the cosim name),
    and setting it changes the start as `joint1.q0` does in cosim.Simulation."""
    md = read_model_description(str(two_link_urdf_py))
    variables = {v.name: v for v in md.modelVariables}
    assert variables["joint1"].causality == "input"
    assert variables["joint1_q0"].causality == "parameter"
    assert "(cosim name 'joint1.q0')" in variables["joint1_q0"].description
    names = set(variables)
    for name in names:  # no name is both a scalar and a record prefix
        parts = name.split(".")
        assert not any(".".join(parts[:i]) in names for i in range(1, len(parts))), name
    res = fmpy.simulate_fmu(str(two_link_urdf_py), stop_time=0.1, output_interval=0.01,
                            start_values={"joint1_q0": -1.4}, output=["joint1_position"])
    from cosim.models.urdf import load_urdf
    sim = cosim.Simulation(load_urdf(str(TWO_LINK_URDF)), method="dopri5", backend="python",
                           params={"joint1.q0": -1.4})
    want = [sim.get_output_dict()["joint1_position"]]
    for k in range(10):
        sim.do_step(k * 0.01, (k + 1) * 0.01 - k * 0.01)
        want.append(sim.get_output_dict()["joint1_position"])
    assert want[0] == -1.4
    assert np.max(np.abs(res["joint1_position"] - np.array(want))) <= 1e-12


def test_fmu_carries_only_what_a_slave_imports(pendulum_py):
    """No command line, sweep or ROS files in the FMU's private package (cosim.sweep is a stub
    that says so); the slave runs (the other tests) from what is there."""
    with zipfile.ZipFile(pendulum_py) as zf:
        names = [n.split("/", 2)[2] for n in zf.namelist() if n.startswith("resources/cosim_fmu_")]
        stub = next(zf.read(n).decode() for n in zf.namelist() if n.endswith("/cosim/sweep.py"))
    assert "cosim/simulation.py" in names and "fmu/slave.py" in names
    for banned in ("cosim/commands/", "cosim/cli.py", "cosim/__main__.py", "cosim/variations.py",
                   "cosim/data/launch/"):
        assert not [n for n in names if n.startswith(banned)], banned
    assert "not part of an FMU" in stub and "dask" not in stub.split('"""')[2]


# -- 6. ecos (PyPI ecospy) as a second master, in-process and out-of-process ---------------------
ECOS_HOST = textwrap.dedent("""
    import json, math, sys
    from ecospy import EcosSimulation, EcosSimulationStructure
    from ecospy.lib import EcosLib
    EcosLib.set_log_level("err")
    uri, n, h, names = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
    rows = []
    with EcosSimulationStructure() as ss:
        ss.add_model("p", uri)
        with EcosSimulation(structure=ss, step_size=h) as sim:
            sim.init()
            for _ in range(n):
                sim.set_real("p::torque", math.sin(3.0 * sim.get_time()))
                sim.step()
                rows.append([sim.get_real("p::" + x) for x in names])
            sim.terminate()
    print(json.dumps(rows))
""")


def _ecospy():
    """ecospy's package folder, or a skip saying why it cannot run here."""
    try:
        import ecospy
    except ImportError:
        pytest.skip("ecospy is not installed (pip install 'cosim[test]')")
    except OSError as exc:  # its native library needs a system library, e.g. libtbb.so.12
        pytest.skip(f"ecospy's native library does not load here: {exc}")
    return Path(ecospy.__file__).parent


@pytest.mark.parametrize("mode", ["in-process", "out-of-process"])
def test_ecos_runs_the_fmu_identically(pendulum_py, tmp_path, mode):
    """ecos (ecospy) as the master, torque = sin(3 t) set before each step: in its own
    process, and in its out-of-process runner (proxyfmu, a C++ program without Python: the
    FMU loads Python itself).  Outputs vs cosim.Simulation on the same grid: identical (max
    difference 0)."""
    package = _ecospy()
    env = bare_environment()
    uri = str(pendulum_py)
    if mode == "out-of-process":
        runner = package / "binaries" / "proxyfmu"
        if not runner.exists():
            pytest.skip(f"ecospy has no out-of-process runner ({runner})")
        # the ecospy 0.7.2 wheel installs proxyfmu without the executable bit: run a copy
        local = tmp_path / "bin" / "proxyfmu"
        local.parent.mkdir()
        shutil.copy2(runner, local)
        local.chmod(0o755)
        env["PATH"] = f"{local.parent}{os.pathsep}{env.get('PATH', '')}"
        uri = f"proxyfmu://localhost?file={pendulum_py}"
    n, h = 40, 0.01
    proc = subprocess.run([sys.executable, "-c", ECOS_HOST, uri, str(n), repr(h), json.dumps(OUTPUTS)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.array(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert np.max(np.abs(got - reference(n, h))) == 0.0
