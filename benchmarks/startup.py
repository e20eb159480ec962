"""What a first run costs: methods compiled once per machine, then a new model.

On an empty compile cache (``COSIM_CACHE_DIR`` = a fresh folder), each in a new
process (wall seconds, and the compile time the run itself reports on stderr):

1. compile every method once, independently of the model, two at a time (``cosim
   warmup --methods -j 2``, what ``scripts/setup.sh`` does on two cores; it also
   compiles the one kernel set every URDF robot shares);
2. with those methods cached, the first run of
   * a library model whose kernels were never compiled (``cosim simulate``),
   * a URDF robot (the Panda of example-robot-data; every robot shares one kernel set),
   * a user's kernel model (a module written to a temp folder, run with ``Simulation``);
3. the same three again (everything cached): the warm start;
4. constructing ``cosim.Simulation(MODEL, METHOD)`` after ``import cosim`` in a fresh
   process on that warm cache, wall and CPU seconds (each the smallest of 3 processes;
   backends auto and python).

The longest silence of each run (the largest gap between two lines it printed,
including the start and the end) is printed too.

    python benchmarks/startup.py [--method generalized-alpha]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

USER_MODEL = textwrap.dedent('''
    """A user's model written as kernels: a damped pendulum on a spring (not in the library)."""
    import math

    import numpy as np

    from cosim.models.base import Parameter, Signal
    from cosim.models.kernels import KernelModel, MultibodyKernels


    def mass(q, t, p, M):
        M[0, 0] = p[0]
        M[1, 1] = p[0] * q[0] * q[0]


    def forces(q, v, t, u, p, Q):
        Q[0] = p[0] * q[0] * v[1] * v[1] - p[1] * (q[0] - 1.0) + p[0] * 9.81 * math.cos(q[1]) - 0.1 * v[0]
        Q[1] = -2.0 * p[0] * q[0] * v[0] * v[1] - p[0] * 9.81 * q[0] * math.sin(q[1]) + u[0]


    def constraints(q, t, p, C):
        pass


    class SpringPendulum(KernelModel):
        name = "spring_pendulum"
        coordinates = ("r", "theta")
        constraint_names = ()
        parameters = (Parameter("mass", 1.0, "kg", "bob mass"),
                      Parameter("stiffness", 50.0, "N/m", "spring stiffness"))
        inputs = (Signal("torque", "N.m", "torque about the pivot"),)
        constant_mass = False
        kernel_set = MultibodyKernels(mass, forces, constraints)

        def kernel_parameters(self):
            return np.array([self.params["mass"], self.params["stiffness"]])

        def initial_state(self):
            return np.array([1.1, 0.5]), np.zeros(2)
''')

USER_RUN = textwrap.dedent('''
    import sys
    sys.path.insert(0, {folder!r})
    import cosim
    from user_model import SpringPendulum
    sim = cosim.Simulation(model=SpringPendulum(), method={method!r}, backend="numba", rtol=1e-6)
    for k in range(10):
        sim.do_step(sim.time, 0.01)
    print("t", sim.time, "y", sim.y[:2])
''')

URDF_RUN = textwrap.dedent('''
    import cosim
    from cosim.models.urdf import example_robot_path, load_urdf
    sim = cosim.Simulation(model=load_urdf(example_robot_path())(), method={method!r}, backend="numba",
                           h=1e-3)
    for k in range(10):
        sim.do_step(sim.time, 1e-3)
    print("t", sim.time)
''')


CONSTRUCT = textwrap.dedent('''
    import time
    import cosim
    t0, c0 = time.perf_counter(), time.process_time()
    cosim.Simulation(model={model!r}, method={method!r}, backend={backend!r})
    print(time.perf_counter() - t0, time.process_time() - c0)
''')


def construction_seconds(model, method, backend, env, repeat=3):
    """(wall, CPU) seconds of ``cosim.Simulation(...)`` after ``import cosim`` (the import
    itself not counted), each the smallest of ``repeat`` fresh processes."""
    code = CONSTRUCT.format(model=model, method=method, backend=backend)
    runs = [[float(x) for x in subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO,
                                              check=True, capture_output=True,
                                              text=True).stdout.split()[-2:]]
            for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


def run(argv, env):
    """(wall seconds, compile seconds reported, longest silence, stderr) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    stamps, err = [0.0], []

    def read(stream, keep):
        for line in stream:
            stamps.append(time.perf_counter() - t0)
            if keep:
                err.append(line)
    threads = [threading.Thread(target=read, args=(proc.stdout, False)),
               threading.Thread(target=read, args=(proc.stderr, True))]
    for th in threads:
        th.start()
    proc.wait()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    stamps = sorted(stamps + [wall])
    silence = max(b - a for a, b in zip(stamps, stamps[1:]))
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed:\n{''.join(err)[-3000:]}")
    compiled = sum(float(line.split(" in ")[-1].split()[0]) for line in err
                   if line.startswith("cosim: compiled ") and " in " in line)
    return wall, compiled, silence, "".join(err)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="generalized-alpha")
    parser.add_argument("--model", default="andrews", help="library model of the first run")
    parser.add_argument("--cache", help="use this cache folder instead of an empty one (e.g. to run "
                                        "the model rows again after the methods were compiled)")
    a = parser.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    py = sys.executable
    where = f"the cache {a.cache}" if a.cache else "an empty cache"
    print(f"first runs on {where}, method {a.method} (load {os.getloadavg()[0]:.1f}):")
    print(f"  {'run':48s} {'wall s':>8s} {'compiling s':>12s} {'longest silence s':>18s}")
    with tempfile.TemporaryDirectory() as tmp_cache, tempfile.TemporaryDirectory() as user:
        env["COSIM_CACHE_DIR"] = a.cache or tmp_cache
        with open(os.path.join(user, "user_model.py"), "w", encoding="utf-8") as fh:
            fh.write(USER_MODEL)
        runs = [("compile the methods once (setup: warmup -j 2)",
                 [py, "-m", "cosim.cli", "warmup", "--methods", "-j", "2"]),
                (f"new library model: cosim simulate {a.model}",
                 [py, "-m", "cosim.cli", "simulate", a.model, "--method", a.method, "--t-end", "0.01",
                  "--backend", "numba", "--json"]),
                ("new URDF robot: the Panda", [py, "-c", URDF_RUN.format(method=a.method)]),
                ("new user kernel model", [py, "-c", USER_RUN.format(folder=user, method=a.method)])]
        for label, cmd in runs:
            wall, compiled, silence, _ = run(cmd, env)
            print(f"  {label:48s} {wall:8.1f} {compiled:12.1f} {silence:18.1f}", flush=True)
        print("the same again, everything cached:")
        for label, cmd in runs[1:]:
            wall, compiled, silence, _ = run(cmd, env)
            print(f"  {label:48s} {wall:8.1f} {compiled:12.1f} {silence:18.1f}", flush=True)
        for backend in ("auto", "python"):
            wall, cpu = construction_seconds(a.model, a.method, backend, env)
            print(f"  Simulation({a.model}, {a.method}, backend {backend}) after import cosim: "
                  f"{wall:.2f} s wall, {cpu:.2f} s CPU (smallest of 3 processes)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
