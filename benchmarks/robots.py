"""cosim against MuJoCo on two arms from ``example-robot-data``: the Franka Panda (its
7 arm joints; the fingers welded) and the UR5 (6 joints).

Both simulators read the same URDF text, stripped to the rigid-body model: no
geometry (no contacts), no ``<limit>``/``<dynamics>``/``<mimic>`` (no stops, damping
or friction; revolute joints as continuous); the finger joints fixed.  The
models are checked equal first: the joint-space mass matrix and the bias forces
of MuJoCo (``mj_fullM``, ``qfrc_bias``) and of pinocchio (what cosim's kernels are
tested against) at 20 random states.

1. **Per-step table** (constant joint efforts from a non-singular pose, t = 0 …
   T): CPU µs per step (best of the interleaved repetitions: every runner runs
   once per repetition, in turn) and the error max|q(T) − q_ref(T)| (rad) against
   scipy's DOP853 at rtol = atol = 1e-12 on pinocchio's M and bias, at matched
   step h = 0.5, 1, 2 ms: MuJoCo's Euler (semi-implicit), implicitfast and RK4
   with timestep h; cosim's rk4 and generalized-α with fixed step h and dopri5
   (adaptive, rtol 1e-8, atol 1e-10), each on the compiled backend through
   ``Simulation.do_step(t, h)`` (one communication step per step).
2. **PD loop at 1 kHz**: a new effort every 1 ms from a PD law on the state
   read after the step (u = K_p (q* − q) − K_d q', K_p = ω² M_ii(q0), K_d = 2ω M_ii(q0),
   ω = 20 rad/s: stable at 1 kHz on every joint); CPU µs per step of the whole
   loop (read, law, set the effort, step) and the error at T against DOP853
   1e-12 on the same sampled-data loop (the effort held over each 1 ms).

    python benchmarks/robots.py [--quick]

``--quick``: T = 0.2 s, h = 1 ms only, one repetition.  Needs the ``bench`` and
``robots`` extras (``mujoco``, ``pin``, ``example-robot-data``) and numba.
"""
import argparse
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROBOTS = {
    # name: (URDF in example-robot-data, initial pose, constant efforts, PD target)
    "panda": ("panda_description/urdf/panda.urdf",
              [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785],
              [2.0, 1.0, -1.0, 0.5, 0.2, -0.3, 0.1],
              [0.3, -0.5, 0.2, -2.0, 0.1, 1.8, 0.5]),
    "ur5": ("ur_description/urdf/ur5_robot.urdf",
            [0.0, -1.2, 1.0, -1.4, -1.57, 0.0],
            [1.0, 2.0, -1.0, 0.3, 0.2, -0.1],
            [0.3, -1.0, 0.8, -1.2, -1.4, 0.2]),
}
OMEGA = 20.0  # PD bandwidth (rad/s), critically damped on the mass matrix's diagonal at q0
MUJOCO_METHODS = ("Euler", "implicitfast", "RK4")
COSIM_METHODS = ("rk4", "generalized-alpha", "dopri5")


def say(msg):
    print(msg, flush=True)


def rigid_body_text(text):
    """The URDF reduced to its rigid bodies (module docstring), with MuJoCo's compiler
    options (ignored by pinocchio and cosim)."""
    text = re.sub(r"<(visual|collision)\b.*?</\1>", "", text, flags=re.S)
    text = re.sub(r"<(visual|collision)\b[^>]*/>", "", text)
    text = re.sub(r"<(dynamics|limit|safety_controller|mimic)\b[^>]*/>", "", text)
    text = text.replace('type="revolute"', 'type="continuous"')
    text = re.sub(r'(<joint name="[^"]*finger[^"]*" type=")prismatic', r"\1fixed", text)
    return re.sub(r"(<robot\b[^>]*>)", r'\1<mujoco><compiler discardvisual="true" '
                  r'fusestatic="false" balanceinertia="false" inertiafromgeom="false" '
                  r'angle="radian"/></mujoco>', text, count=1)


class Robot:
    def __init__(self, name):
        import mujoco
        import pinocchio as pin

        from cosim.models.urdf import example_robot_path, urdf_model_class

        rel, q0, tau, target = ROBOTS[name]
        self.name, self.text = name, rigid_body_text(example_robot_path(rel).read_text())
        self.q0, self.tau, self.target = np.array(q0), np.array(tau), np.array(target)
        self.cls = urdf_model_class(self.text)
        self.n = len(self.cls.coordinates)
        self.mj = mujoco.MjModel.from_xml_string(self.text)
        mj_names = [self.mj.joint(i).name for i in range(self.mj.njnt)]
        if mj_names != list(self.cls.coordinates):
            raise SystemExit(f"{name}: MuJoCo joints {mj_names} != cosim's {self.cls.coordinates}")
        self.pm = pin.Model(self.cls._pin_model)
        self.pd = self.pm.createData()
        self.pin = pin
        diag = np.diag(self.mass(self.q0))
        self.kp, self.kd = OMEGA ** 2 * diag, 2.0 * OMEGA * diag

    def check_equal(self, states=20):
        """max |M_mujoco − M_pinocchio|, max |bias_mujoco − bias_pinocchio| over random states."""
        import mujoco

        d = mujoco.MjData(self.mj)
        rng = np.random.default_rng(33)
        dm = db = 0.0
        M = np.zeros((self.n, self.n))
        for _ in range(states):
            q, v = rng.uniform(-2, 2, self.n), rng.uniform(-2, 2, self.n)
            d.qpos[:], d.qvel[:] = q, v
            mujoco.mj_forward(self.mj, d)
            mujoco.mj_fullM(self.mj, d, M)
            dm = max(dm, np.abs(M - self.mass(q)).max())
            db = max(db, np.abs(d.qfrc_bias - self.pin.nonLinearEffects(self.pm, self.pd, q, v)).max())
        return dm, db

    def mass(self, q):
        M = self.pin.crba(self.pm, self.pd, q)
        return np.triu(M) + np.triu(M, 1).T

    def rhs(self, tau):
        n = self.n

        def f(t, x):
            q, v = x[:n], x[n:]
            b = self.pin.nonLinearEffects(self.pm, self.pd, q, v)
            return np.concatenate([v, np.linalg.solve(self.mass(q), tau - b)])
        return f

    def reference(self, t_end):
        from scipy.integrate import solve_ivp
        x0 = np.concatenate([self.q0, np.zeros(self.n)])
        sol = solve_ivp(self.rhs(self.tau), (0.0, t_end), x0, method="DOP853", rtol=1e-12,
                        atol=1e-12)
        return sol.y[:self.n, -1]

    def pd_reference(self, t_end, h):
        """The sampled-data PD loop integrated interval by interval (effort held)."""
        from scipy.integrate import solve_ivp
        x = np.concatenate([self.q0, np.zeros(self.n)])
        for k in range(int(round(t_end / h))):
            tau = self.kp * (self.target - x[:self.n]) - self.kd * x[self.n:]
            x = solve_ivp(self.rhs(tau), (k * h, (k + 1) * h), x, method="DOP853", rtol=1e-12,
                          atol=1e-12).y[:, -1]
        return x[:self.n]


# -- runners: each returns (CPU seconds per step, q at the end) ---------------------------------
def mujoco_run(robot, method, h, steps, pd=False):
    import mujoco

    m = robot.mj
    m.opt.timestep = h
    m.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{method.upper()}")
    d = mujoco.MjData(m)
    d.qpos[:] = robot.q0
    step, target, kp, kd = mujoco.mj_step, robot.target, robot.kp, robot.kd
    if pd:
        t0 = time.process_time()
        for _ in range(steps):
            d.qfrc_applied[:] = kp * (target - d.qpos) - kd * d.qvel
            step(m, d)
        cpu = time.process_time() - t0
    else:
        d.qfrc_applied[:] = robot.tau
        t0 = time.process_time()
        for _ in range(steps):
            step(m, d)
        cpu = time.process_time() - t0
    return cpu / steps, np.array(d.qpos)


def cosim_sim(robot, method, h):
    from cosim import Simulation

    params = {f"{j}.q0": robot.q0[i] for i, j in enumerate(robot.cls.coordinates)}
    if method == "dopri5":
        opts = dict(rtol=1e-8, atol=1e-10)
    else:
        opts = dict(h=h)
    return Simulation(robot.cls, method=method, params=params, backend="numba", **opts)


def cosim_run(robot, method, h, steps, pd=False):
    sim = cosim_sim(robot, method, h)
    n, target, kp, kd = robot.n, robot.target, robot.kp, robot.kd
    do_step, set_inputs = sim.do_step, sim.set_inputs
    t = 0.0
    if pd:
        t0 = time.process_time()
        for _ in range(steps):
            y = sim.y
            set_inputs(kp * (target - y[:n]) - kd * y[n:])
            t = do_step(t, h)
        cpu = time.process_time() - t0
    else:
        set_inputs(robot.tau)
        t0 = time.process_time()
        for _ in range(steps):
            t = do_step(t, h)
        cpu = time.process_time() - t0
    return cpu / steps, np.array(sim.y[:n])


def table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    say("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        say("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def interleaved(runners, reps):
    """Best CPU time per step of each runner over ``reps`` rounds (each runner once per
    round, in turn), and its end state (the same every round)."""
    best, end = {}, {}
    for _ in range(reps):
        for key, run in runners.items():
            cpu, q = run()
            best[key] = min(best.get(key, np.inf), cpu)
            end[key] = q
    return best, end


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="T = 0.2 s, h = 1 ms, one repetition")
    args = ap.parse_args(argv)
    t_end = 0.2 if args.quick else 1.0
    steps_h = (1e-3,) if args.quick else (5e-4, 1e-3, 2e-3)
    reps = 1 if args.quick else 3
    import mujoco
    say(f"cosim vs MuJoCo {mujoco.__version__}: T = {t_end} s, h = "
        f"{', '.join(f'{h * 1e3:g}' for h in steps_h)} ms, best of {reps} interleaved run(s)")
    for name in ROBOTS:
        robot = Robot(name)
        dm, db = robot.check_equal()
        say(f"\n{name} ({robot.n} joints): models equal? max|ΔM| = {dm:.1e}, "
            f"max|Δbias| = {db:.1e} (20 random states)")
        if dm > 1e-10 or db > 1e-9:
            raise SystemExit(f"{name}: MuJoCo's and pinocchio's models differ")
        say("  reference (DOP853 1e-12) ...")
        q_ref = robot.reference(t_end)
        say("  compiling / warming up cosim's methods (cached after the first run) ...")
        for method in COSIM_METHODS:
            cosim_run(robot, method, 1e-3, 2)
        rows = []
        for h in steps_h:
            steps = int(round(t_end / h))
            runners = {("MuJoCo", m): (lambda m=m: mujoco_run(robot, m, h, steps))
                       for m in MUJOCO_METHODS}
            runners.update({("cosim", m): (lambda m=m: cosim_run(robot, m, h, steps))
                            for m in COSIM_METHODS})
            best, end = interleaved(runners, reps)
            for (tool, m), cpu in best.items():
                err = np.abs(end[(tool, m)] - q_ref).max()
                rows.append((f"{h * 1e3:g}", tool, m, f"{cpu * 1e6:.1f}", f"{err:.1e}"))
        say(f"  constant efforts, error at T = {t_end} s:")
        table(rows, ("h ms", "tool", "method", "CPU µs/step", "max|q - q_ref| rad"))
        h = 1e-3
        steps = int(round(t_end / h))
        say("  PD loop reference (DOP853 1e-12 per 1 ms interval) ...")
        q_pd = robot.pd_reference(t_end, h)
        runners = {("MuJoCo", m): (lambda m=m: mujoco_run(robot, m, h, steps, pd=True))
                   for m in MUJOCO_METHODS}
        runners.update({("cosim", m): (lambda m=m: cosim_run(robot, m, h, steps, pd=True))
                        for m in COSIM_METHODS})
        best, end = interleaved(runners, reps)
        rows = [("1", tool, m, f"{cpu * 1e6:.1f}", f"{np.abs(end[(tool, m)] - q_pd).max():.1e}")
                for (tool, m), cpu in best.items()]
        say(f"  PD loop at 1 kHz (new effort every step), error at T = {t_end} s:")
        table(rows, ("h ms", "tool", "method", "CPU µs/step", "max|q - q_ref| rad"))


if __name__ == "__main__":
    main()
