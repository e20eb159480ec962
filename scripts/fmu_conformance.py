"""Conformance check of every FMU `cosim fmu build` makes, through fmpy only.

    python scripts/fmu_conformance.py build DIR     # needs cosim: one FMU per case into DIR
    python scripts/fmu_conformance.py check DIR     # needs only fmpy + numpy (+ scipy for the FMU)
    python scripts/fmu_conformance.py all DIR [--check-python PY | --bare-venv VENV]

Cases: each library model with its default method and one other method, and
each shipped scenario (``scenarios/*.yaml``).  ``check`` imports neither
cosim nor fmu: it is what an importing machine runs.  Per FMU it checks
``fmpy.validate_fmu`` and, through ``FMU2Slave``: instantiate, setup,
initialization, steps with inputs, fmi2GetFMUstate / fmi2SerializeFMUstate /
fmi2DeSerializeFMUstate / fmi2SetFMUstate (the continuation is bit-identical),
fmi2Reset (the run repeats bit for bit), fmi2Terminate, fmi2FreeInstance.
Prints one line per FMU and exits 1 if any fails.  ``--check-python`` runs
the check with another interpreter; ``--bare-venv`` makes a venv that sees
only fmpy + numpy + scipy (and fmpy's requirements) of this interpreter: no
cosim, no pythonfmu (what an importing machine has).
"""
import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OTHER_METHODS = ("bdf", "dopri5", "generalized-alpha-i2", "rk4")  # first one the model accepts
N_STEPS = 6


def cases():
    """(file stem, build arguments) of every FMU to check."""
    from cosim import Simulation
    from cosim.errors import CosimError
    from cosim.models import MODEL_REGISTRY
    from cosim.scenario import default_method

    def accepts(model, method):
        try:
            Simulation(model=model, method=method)
        except CosimError:
            return False
        return True

    out = []
    for name in MODEL_REGISTRY:
        default = default_method(name, driven=True)   # an FMU is driven
        other = next(m for m in OTHER_METHODS if m != default and accepts(name, m))
        out.append((f"{name}__default", [name]))
        out.append((f"{name}__{other}", [name, "--method", other]))
    for path in sorted((REPO / "scenarios").glob("*.yaml")):
        out.append((f"scenario__{path.stem}", [str(path)]))
    return out


def build(directory):
    from cosim.cli import main as cosim_main

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for stem, args in cases():
        fmu = directory / f"{stem}.fmu"
        if not fmu.exists():
            assert cosim_main(["fmu", "build", *args, "-o", str(fmu)]) == 0, args
    return sorted(directory.glob("*.fmu"))


# -- check: fmpy and numpy only ---------------------------------------------------------------
def _run(fmu, inputs, vr_out, t0, h, n):
    """n steps with each input = its start value + 0.01 sin(3t + j)."""
    rows = []
    t = t0
    vr_in = [vr for vr, _ in inputs]
    for k in range(n):
        if vr_in:
            fmu.setReal(vr_in, [start + 0.01 * math.sin(3.0 * t + j)
                                for j, (_, start) in enumerate(inputs)])
        fmu.doStep(t, h)
        t = t0 + (k + 1) * h
        rows.append(list(fmu.getReal(vr_out)))
    return t, rows


def _initialize(fmu, t0):
    fmu.setupExperiment(startTime=t0)
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()


def check_one(path):
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave
    from fmpy.validation import validate_fmu

    problems = validate_fmu(str(path))
    if problems:
        return f"validate: {problems}"
    md = read_model_description(str(path))
    inputs = [(v.valueReference, float(v.start or 0.0)) for v in md.modelVariables
              if v.causality == "input" and v.type == "Real"]
    outputs = [v.valueReference for v in md.modelVariables if v.causality == "output" and v.type == "Real"]
    de = md.defaultExperiment
    t0 = float(de.startTime or 0.0) if de else 0.0
    h = float(de.stepSize) if de and de.stepSize else 0.01
    fmu = FMU2Slave(guid=md.guid, unzipDirectory=extract(str(path)),
                    modelIdentifier=md.coSimulation.modelIdentifier, instanceName="conformance")
    fmu.instantiate()
    try:
        _initialize(fmu, t0)
        first = list(fmu.getReal(outputs))
        if not all(math.isfinite(x) for x in first):
            return f"initial outputs not finite: {first}"
        t, rows = _run(fmu, inputs, outputs, t0, h, N_STEPS)
        state = fmu.getFMUstate()
        blob = bytes(fmu.serializeFMUstate(state))
        _, ahead = _run(fmu, inputs, outputs, t, h, N_STEPS)
        restored = fmu.deSerializeFMUstate(blob)
        fmu.setFMUstate(restored)
        _, again = _run(fmu, inputs, outputs, t, h, N_STEPS)
        if again != ahead:
            return "serialized state does not continue bit-identically"
        fmu.setFMUstate(state)
        _, again = _run(fmu, inputs, outputs, t, h, N_STEPS)
        if again != ahead:
            return "in-memory state does not continue bit-identically"
        fmu.freeFMUstate(state)
        fmu.freeFMUstate(restored)
        fmu.reset()
        _initialize(fmu, t0)
        if list(fmu.getReal(outputs)) != first or _run(fmu, inputs, outputs, t0, h, N_STEPS)[1] != rows:
            return "fmi2Reset does not repeat the run"
        if not all(math.isfinite(x) for row in rows + ahead for x in row):
            return "outputs not finite"
        fmu.terminate()
    except Exception as exc:  # noqa: BLE001 - reported per FMU
        return f"{type(exc).__name__}: {exc}"
    finally:
        fmu.freeInstance()
    return None


def check(directory):
    failed = 0
    paths = sorted(Path(directory).glob("*.fmu"))
    for path in paths:
        problem = check_one(path)
        failed += problem is not None
        print(json.dumps({"fmu": path.name, "ok": problem is None, "problem": problem}), flush=True)
    print(f"{len(paths) - failed}/{len(paths)} FMUs conform "
          f"(python {sys.version.split()[0]}, cosim importable: {_importable('cosim')}, "
          f"pythonfmu importable: {_importable('pythonfmu')})")
    return 1 if failed or not paths else 0


def _importable(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


BARE_PACKAGES = ("fmpy", "numpy", "scipy", "attr", "attrs", "jinja2", "markupsafe", "lxml",
                 "msgpack", "lark")  # fmpy + numpy + scipy and fmpy's own requirements


def bare_venv(directory):
    """A venv (no pip) that sees only BARE_PACKAGES of this interpreter (symlinks + .pth):
    no cosim, no pythonfmu.  Returns its python."""
    import importlib.util
    import os
    import venv

    directory = Path(directory)
    python = directory / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(directory)
    site = directory / "bare-site"
    site.mkdir(exist_ok=True)
    for name in BARE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        src = Path(list(spec.submodule_search_locations)[0]) if spec.submodule_search_locations \
            else Path(spec.origin)
        for path in [src] + sorted(src.parent.glob(f"{name}.libs")):
            link = site / path.name
            if not link.exists():
                os.symlink(path, link)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "bare-site.pth").write_text(str(site) + "\n")
    return python


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "check", "all"))
    parser.add_argument("directory")
    parser.add_argument("--check-python", default=None,
                        help="interpreter for the check (default: this one)")
    parser.add_argument("--bare-venv", default=None, metavar="DIR",
                        help="make (or reuse) a venv in DIR holding only fmpy + numpy + scipy and "
                             "run the check with it")
    args = parser.parse_args(argv)
    if args.command in ("build", "all"):
        for path in build(args.directory):
            print(f"built {path.name}")
    if args.command in ("check", "all"):
        python = bare_venv(args.bare_venv) if args.bare_venv else args.check_python
        if python:
            import os
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
            return subprocess.run([str(python), "-s", str(Path(__file__).resolve()), "check",
                                   str(Path(args.directory).resolve())], cwd=args.directory,
                                  env=env).returncode
        return check(args.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
