"""Franka Panda from URDF (example-robot-data, 9 joints) at 1 kHz: cost per step.

Generalized-α with fixed h = 1 ms, communication step 1 ms, a sinusoidal
effort on joint 1 (a new input every step: the integrator restarts each step,
as under a 1 kHz controller).  Rows:

* model terms alone (pinocchio from Python): M (CRBA), Q (RNEA), (Q_q, Q_v)
  (RNEA derivatives), (M a)_q, and one generalized-α residual evaluation
  (M(q) q'' − Q as the Newton iteration forms it);
* the same terms from the compiled rigid-body kernels (cosim.models.rigid_body,
  each kernel njit-ed on its own and called from Python, so ~0.3-1 µs of each
  figure is numba's dispatch; compiled once, cached);
* ``Simulation``: ``set_inputs`` + ``do_step`` per communication step, on the
  Python reference (pinocchio) and on the compiled backend (the rigid-body
  kernels inside the compiled generalized-α);
* FMU: ``setReal`` + ``fmi2DoStep`` through fmpy (``cosim fmu build panda.urdf``);
* ROS node, lock step: state published -> JointState effort command -> next
  state received, in-process plant node + tester node over DDS on loopback
  (``--ros``; needs rclpy).

Real-time factor = simulated time / wall time.  Goal (issue 18): RTF >= 20
through ``Simulation``.  For scale, the library pendulum through the same loop
on the Python reference and on the compiled (numba) backend.  The FMU and ROS
rows use the default backend (``auto``: compiled when numba is importable).

    python benchmarks/urdf_panda.py [--steps N] [--ros]
"""
import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cosim import Simulation  # noqa: E402
from cosim.models.urdf import example_robot_path, load_urdf  # noqa: E402

H = 1e-3


def _per_call(fn, n=2000):
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def model_terms(cls):
    m = cls()
    q, v = m.initial_state()
    v = v + 0.1
    u, a = np.zeros(m.n_q), np.full(m.n_q, 0.5)
    rows = [("M(q): pinocchio crba", _per_call(lambda: m.mass(q, 0.0))),
            ("Q(q, v, u): rnea", _per_call(lambda: m.forces(q, v, 0.0, u))),
            ("Q_q, Q_v: rnea derivatives", _per_call(lambda: m.force_jacobians(q, v, 0.0, u))),
            ("(M a)_q: rnea derivatives", _per_call(lambda: m.mass_jacobian_term(q, a, 0.0))),
            ("residual M q'' - Q", _per_call(lambda: m.mass(q, 0.0) @ a - m.forces(q, v, 0.0, u)))]
    return rows


def compiled_terms(cls):
    """The rigid-body kernels njit-ed one by one (their helpers registered)."""
    from cosim import jit
    from cosim.models import rigid_body as rb

    if not jit.numba_available():
        return []
    kernels = cls().kernels()
    jit._kernel_helpers(kernels.functions())  # register_jitable the marked helpers
    t0 = time.perf_counter()
    mass, forces, fjac, mjac = (jit.njit()(f) for f in (
        rb.tree_mass, rb.tree_forces, rb.tree_force_jacobians, rb.tree_mass_jacobian_term))
    m = cls()
    q, v = m.initial_state()
    v = v + 0.1
    n, p = m.n_q, m._p
    u, a = np.zeros(n), np.full(n, 0.5)
    M, Q, Qq, Qv, J = (np.zeros((n, n)), np.zeros(n), np.zeros((n, n)), np.zeros((n, n)),
                       np.zeros((n, n)))
    for fn, args in ((mass, (q, 0.0, p, M)), (forces, (q, v, 0.0, u, p, Q)),
                     (fjac, (q, v, 0.0, u, p, Qq, Qv)), (mjac, (q, a, 0.0, p, J))):
        fn(*args)  # compile (or load)
    first = time.perf_counter() - t0
    rows = [("M(q): kernel CRBA", _per_call(lambda: mass(q, 0.0, p, M), 20000)),
            ("Q(q, v, u): kernel RNEA + joint terms", _per_call(lambda: forces(q, v, 0.0, u, p, Q), 20000)),
            ("Q_q, Q_v: kernel, analytic RNEA derivatives", _per_call(lambda: fjac(q, v, 0.0, u, p, Qq, Qv))),
            ("(M a)_q: kernel, analytic RNEA derivatives", _per_call(lambda: mjac(q, a, 0.0, p, J)))]
    return rows, first


def through_simulation(model, n, method="generalized-alpha", input_name="panda_joint1",
                       backend="auto"):
    sim = Simulation(model, method=method, h=H, backend=backend)
    t0, c0 = time.perf_counter(), time.process_time()
    for k in range(n):
        sim.set_inputs({input_name: np.sin(sim.time)})
        sim.do_step(sim.time, H)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    stats = sim.stats
    through_simulation.cpu_us = cpu / n * 1e6  # this process's CPU time (other jobs excluded)
    return wall / n * 1e6, n * H / wall, stats["newton_iterations"] / n, sim.backend


def through_fmu(path, n, workdir):
    from fmu.builder import build_fmu
    from fmu.host import open_slave

    fmu_path = build_fmu(str(path), Path(workdir) / "panda.fmu", step=H, step_size=H)
    fmu, vr = open_slave(fmu_path, "bench")
    t = 0.0
    t0 = time.perf_counter()
    for k in range(n):
        fmu.setReal([vr["panda_joint1"]], [np.sin(t)])
        fmu.doStep(t, H)
        t = (k + 1) * H
    wall = time.perf_counter() - t0
    fmu.terminate()
    fmu.freeInstance()
    return wall / n * 1e6, n * H / wall


class _Env:
    """The two environment calls ros_nodes.testing.Harness makes on pytest's monkeypatch."""

    def setenv(self, key, value):
        os.environ[key] = value

    def delenv(self, key, raising=True):
        os.environ.pop(key, None)


def through_ros(path, n, workdir):
    from sensor_msgs.msg import JointState

    from ros_nodes.testing import Harness

    yaml_path = Path(workdir) / "panda.yaml"
    yaml_path.write_text("cosim_sim:\n  ros__parameters:\n"
                         f"    urdf_file: {path}\n    method: generalized-alpha\n"
                         f"    integrator_step: {H}\n    communication_step: {H}\n"
                         "    mode: lock_step\n")
    hs = Harness(_Env(), "urdf_panda_bench", (), str(yaml_path))
    try:
        from ros_nodes.testing import RECORD_QOS

        names = list(load_urdf(path).coordinates)
        arrived, expect = threading.Event(), [0]

        def on_state(msg):  # woken by the state itself (Harness.wait_state polls every 5 ms)
            if msg.header.stamp.sec * 10 ** 9 + msg.header.stamp.nanosec == expect[0]:
                arrived.set()
        hs.node.create_subscription(JointState, "joint_states", on_state, RECORD_QOS)
        hs.wait_state(0)
        t0 = time.perf_counter()
        for k in range(n):
            msg = JointState(name=names, effort=[np.sin(k * H)] + [0.0] * (len(names) - 1))
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(expect[0], 10 ** 9)
            arrived.clear()
            expect[0] = round((k + 1) * H * 1e9)
            hs.joint_cmd.publish(msg)
            if not arrived.wait(10.0):
                raise RuntimeError(f"no state stamped {expect[0]} ns")
        wall = time.perf_counter() - t0
    finally:
        hs.close()
    return wall / n * 1e6, n * H / wall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="communication steps per row")
    parser.add_argument("--ros", action="store_true", help="also the ROS node (lock step)")
    args = parser.parse_args(argv)
    path = example_robot_path()
    cls = load_urdf(path)
    print(f"Franka Panda ({path.name}, {cls().n_q} joints), generalized-alpha h = 1 ms, "
          f"{args.steps} communication steps of 1 ms")
    print(f"{'model term (Python -> pinocchio)':44s} {'µs/call':>9s}")
    for label, us in model_terms(cls):
        print(f"{label:44s} {us:9.1f}")
    compiled = compiled_terms(cls)
    if compiled:
        rows, first = compiled
        print(f"{'model term (compiled kernel, from Python)':44s} {'µs/call':>9s}"
              f"   (first call, compile or cache load: {first:.1f} s)")
        for label, us in rows:
            print(f"{label:44s} {us:9.1f}")
    print()
    print(f"{'path':44s} {'µs/step':>9s} {'RTF':>7s}   (CPU µs/step: this process's CPU time,"
          f" not counting other jobs on a shared machine)")
    rtf = 0.0
    for be in ("python", "numba"):
        t0 = time.perf_counter()
        Simulation(cls, method="generalized-alpha", h=H, backend=be).do_step(0.0, H)
        first = time.perf_counter() - t0  # the compiled entry: compile or load from the cache
        us, rtf_be, newton, backend = through_simulation(cls, args.steps, backend=be)
        rtf = max(rtf, rtf_be)
        cpu = through_simulation.cpu_us
        print(f"{'cosim.Simulation (' + backend + ' backend)':44s} {us:9.1f} {rtf_be:7.2f}"
              f"   (CPU {cpu:.1f} µs/step = RTF {1e3 / cpu:.1f}; {newton:.2f} Newton iterations/step;"
              f" first step {first:.2f} s)")
    us4, rtf4, _, _ = through_simulation(cls, args.steps, method="rk4")
    print(f"{'cosim.Simulation, rk4 h = 1 ms (explicit)':44s} {us4:9.1f} {rtf4:7.2f}")
    # the floor of the Python reference: the library pendulum (3 coordinates, trivial
    # terms) through the same loop
    for be in ("python", "numba"):
        usp, rtfp, _, bep = through_simulation("pendulum", args.steps, input_name="torque",
                                               backend=be)
        print(f"{'for scale: pendulum, generalized-alpha, ' + bep:44s} {usp:9.1f} {rtfp:7.2f}"
              f"   (CPU {through_simulation.cpu_us:.1f} µs/step)")
    with tempfile.TemporaryDirectory() as workdir:
        try:
            us_f, rtf_f = through_fmu(path, args.steps, workdir)
            print(f"{'FMU via fmpy (setReal + doStep)':44s} {us_f:9.1f} {rtf_f:7.2f}")
        except ImportError as exc:
            print(f"FMU: skipped ({exc})")
        if args.ros:
            us_r, rtf_r = through_ros(path, args.steps, workdir)
            print(f"{'ROS node lock step (command -> state)':44s} {us_r:9.1f} {rtf_r:7.2f}")
    verdict = "met" if rtf >= 20 else "NOT met"
    print(f"goal: RTF >= 20 through Simulation (wall time) -> {verdict} (RTF {rtf:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
