"""Host-process exit after using a cosim FMU: exit codes over N runs and a valgrind memcheck.

    python scripts/fmu_exit_check.py [--fmu F.fmu] [--runs 100] [--no-valgrind]

Each run is a fresh Python process (fmpy FMU2Slave: two instances, 20 steps each,
a serialized state, terminate, free) that then exits normally.  The memcheck
(``PYTHONMALLOC=malloc``, children traced so the log is complete) reports the
error records whose stack has a frame in the FMU binary (``binaries/linux64``);
``Invalid`` ones are use-after-free / out-of-bounds accesses.  CPython itself
shows "uninitialised value" records without suppressions; they are counted,
not judged.  Slow (a valgrind run takes about a minute): not part of the tests.

Measured with pythonfmu 0.7.0's binary: 0 crashes in 100 runs here, but memcheck
shows an invalid read in ``finalizePythonInterpreter`` at exit (the library
destructor assigns to the static ``shared_ptr<PyState>`` that the C++ exit
handlers already destroyed).  cosim's binary (fmu/native) has no such destructor
and never finalizes the interpreter.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

SESSION = """
import sys
from fmpy import extract, read_model_description
from fmpy.fmi2 import FMU2Slave
path = sys.argv[1]
md = read_model_description(path)
unzip = extract(path)
for k in range(2):
    f = FMU2Slave(guid=md.guid, unzipDirectory=unzip, modelIdentifier=md.coSimulation.modelIdentifier,
                  instanceName=f"s{k}")
    f.instantiate()
    f.setupExperiment(startTime=0.0)
    f.enterInitializationMode()
    f.exitInitializationMode()
    for n in range(20):
        f.doStep(n * 0.01, 0.01)
    s = f.getFMUstate()
    f.serializeFMUstate(s)
    f.freeFMUstate(s)
    f.terminate()
    f.freeInstance()
print("done")
"""


def memcheck_records(log_text, marker="binaries/linux64"):
    """(all record titles, titles of records with a frame containing ``marker``, invalid records)."""
    every, in_fmu, invalid = Counter(), Counter(), []
    for rec in re.split(r"\n==\d+== \n", log_text):
        lines = [re.sub(r"^==\d+== ", "", line) for line in rec.strip().splitlines()]
        if not lines or not re.match(r"(Invalid|Use of uninit|Conditional jump|Mismatched|Syscall)",
                                     lines[0]):
            continue
        every[lines[0]] += 1
        if any(marker in line for line in lines[1:]):
            in_fmu[lines[0]] += 1
            if lines[0].startswith("Invalid"):
                invalid.append("\n".join(lines[:12]))
    return every, in_fmu, invalid


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fmu", default=None, help="FMU to check (default: build pendulum)")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--no-valgrind", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        fmu = Path(args.fmu) if args.fmu else tmp / "Pendulum.fmu"
        if not args.fmu:
            from fmu.builder import build_fmu
            build_fmu("pendulum", fmu)
        script = tmp / "session.py"
        script.write_text(SESSION)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the host has no cosim path
        codes = Counter()
        for _ in range(args.runs):
            proc = subprocess.run([sys.executable, str(script), str(fmu)], capture_output=True,
                                  text=True, env=env, cwd=str(tmp))
            codes[proc.returncode] += 1
        print(f"{fmu.name}: exit codes over {args.runs} runs: {dict(codes)}")
        if args.no_valgrind or not shutil.which("valgrind"):
            return 0 if set(codes) == {0} else 1
        logs = tmp / "vg"
        logs.mkdir()
        subprocess.run(["valgrind", "--tool=memcheck", "--trace-children=yes", "--error-limit=no",
                        "--num-callers=30", f"--log-file={logs}/vg.%p", sys.executable, str(script),
                        str(fmu)], env=dict(env, PYTHONMALLOC="malloc"), cwd=str(tmp),
                       capture_output=True)
        main_log = next(p for p in logs.iterdir() if str(script) in p.read_text()[:2000])
        every, in_fmu, invalid = memcheck_records(main_log.read_text())
        print(f"valgrind memcheck, all error records: {dict(every)}")
        print(f"records with a frame in the FMU binary: {dict(in_fmu)}")
        for rec in invalid:
            print(rec)
        print(f"invalid accesses in the FMU binary: {len(invalid)}")
        return 0 if set(codes) == {0} and not invalid else 1


if __name__ == "__main__":
    sys.exit(main())
