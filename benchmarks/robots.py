"""cosim against MuJoCo on two arms from ``example-robot-data``: the Franka Panda (its
7 arm joints with the fingers welded, ``panda``, and all 9 joints, ``panda9``: the
second finger follows the first by its ``<mimic>``, a constraint in cosim and a joint
equality in MuJoCo) and the UR5 (6 joints).

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
   loop (read, law, set the effort, step; cosim's loop reads ``sim.q`` and
   ``sim.v`` and sets the effort vector) and the error at T against DOP853
   1e-12 on the same sampled-data loop (the effort held over each 1 ms); then
   the "PD ratio": cosim's cheapest method whose error is at or below MuJoCo
   RK4's (errors below the reference's 1e-12 count as equal), its CPU per step ÷
   MuJoCo RK4's.

3. **Work-precision**: each method over a grid (MuJoCo's three and cosim's rk4 and
   generalized-α at h = 4 ms … 15.6 µs, halving; cosim's dopri5 and scipy's DOP853
   on pinocchio at rtol = 1e-4 … 1e-12), each integrating [0, T] (cosim: one
   ``do_step``); per error level 1e-3 / 1e-5 / 1e-7 rad the cheapest run of cosim and
   of its peers (MuJoCo, pinocchio + scipy) reaching it and the ratio of their CPU
   times.  The reference of ``panda9`` is integrated in its 8 independent
   coordinates.

    python benchmarks/robots.py [--quick] [--robots panda panda9 ur5] [--only steps pd wp]

``--quick``: T = 0.2 s, h = 1 ms only, one repetition.  ``--only``: those tables
(1 ``steps``, 2 ``pd``, 3 ``wp``; the models are checked equal first in any case).  Needs the ``bench`` and
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
    # the same with its fingers (9 joints): panda_finger_joint2 mimics panda_finger_joint1
    "panda9": ("panda_description/urdf/panda.urdf",
               [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02, 0.02],
               [2.0, 1.0, -1.0, 0.5, 0.2, -0.3, 0.1, 0.0, 0.0],
               [0.3, -0.5, 0.2, -2.0, 0.1, 1.8, 0.5, 0.02, 0.02]),
    "ur5": ("ur_description/urdf/ur5_robot.urdf",
            [0.0, -1.2, 1.0, -1.4, -1.57, 0.0],
            [1.0, 2.0, -1.0, 0.3, 0.2, -0.1],
            [0.3, -1.0, 0.8, -1.2, -1.4, 0.2]),
}
OMEGA = 20.0  # PD bandwidth (rad/s), critically damped on the mass matrix's diagonal at q0
MUJOCO_METHODS = ("Euler", "implicitfast", "RK4")
COSIM_METHODS = ("rk4", "generalized-alpha", "dopri5")
PD_REFERENCE_TOL = 1e-12  # DOP853's rtol = atol for the PD loop's reference


def say(msg):
    print(msg, flush=True)


def rigid_body_text(text, fingers=False):
    """The URDF reduced to its rigid bodies (module docstring), with MuJoCo's compiler
    options (ignored by pinocchio and cosim).  ``fingers``: the finger joints stay
    (prismatic, their limits kept for the URDF's sake and switched off in both tools,
    the <mimic> kept: cosim's constraint; MuJoCo gets a joint equality)."""
    text = re.sub(r"<(visual|collision)\b.*?</\1>", "", text, flags=re.S)
    text = re.sub(r"<(visual|collision)\b[^>]*/>", "", text)
    text = re.sub(r"<(dynamics|safety_controller)\b[^>]*/>", "", text)
    if fingers:
        text = re.sub(r'(<joint name="[^"]*"\s+type="revolute".*?)<limit\b[^>]*/>', r"\1", text,
                      flags=re.S)
        text = re.sub(r'<limit\b[^>]*/>', '<limit effort="0" lower="-1" upper="1" velocity="1"/>',
                      text)
    else:
        text = re.sub(r"<(limit|mimic)\b[^>]*/>", "", text)
        text = re.sub(r'(<joint name="[^"]*finger[^"]*" type=")prismatic', r"\1fixed", text)
    text = text.replace('type="revolute"', 'type="continuous"')
    return re.sub(r"(<robot\b[^>]*>)", r'\1<mujoco><compiler discardvisual="true" '
                  r'fusestatic="false" balanceinertia="false" inertiafromgeom="false" '
                  r'angle="radian"/></mujoco>', text, count=1)


class Robot:
    def __init__(self, name):
        import mujoco
        import pinocchio as pin

        from cosim.models.urdf import example_robot_path, urdf_model_class

        rel, q0, tau, target = ROBOTS[name]
        fingers = name == "panda9"
        self.name, self.text = name, rigid_body_text(example_robot_path(rel).read_text(), fingers)
        self.q0, self.tau, self.target = np.array(q0), np.array(tau), np.array(target)
        self.cls = urdf_model_class(self.text, position_limits=False)
        self.n = len(self.cls.coordinates)
        # q = T x + o: the independent coordinates x of the mimic constraints (the reference)
        self.T = np.eye(self.n)
        spec = mujoco.MjSpec.from_string(re.sub(r"<mimic\b[^>]*/>", "", self.text))
        for i, j, k, o in self.cls._mimics:
            if o != 0.0:
                raise SystemExit(f"{name}: a mimic offset is not handled here")
            self.T[:, j] += k * self.T[:, i]
            eq = spec.add_equality()  # MuJoCo: q_i = k q_j as a joint equality
            eq.type = mujoco.mjtEq.mjEQ_JOINT
            eq.name1, eq.name2 = self.cls.coordinates[i], self.cls.coordinates[j]
            eq.data[:5] = [0.0, k, 0.0, 0.0, 0.0]
        keep = [c for c in range(self.n) if c not in {m[0] for m in self.cls._mimics}]
        self.T = self.T[:, keep]
        for joint in spec.joints:  # no joint limits (the finger joints' URDF limits)
            joint.limited = mujoco.mjtLimited.mjLIMITED_FALSE
        self.mj = spec.compile()
        mj_names = [self.mj.joint(i).name for i in range(self.mj.njnt)]
        if mj_names != list(self.cls.coordinates):
            raise SystemExit(f"{name}: MuJoCo joints {mj_names} != cosim's {self.cls.coordinates}")
        self.pm = pin.buildModelFromXML(self.cls.robot.normalized)
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
        """The equations in the independent coordinates x (q = T x, T constant):
        Tᵀ M T x'' = Tᵀ (τ − b(q, T x'))."""
        T, r = self.T, self.T.shape[1]

        def f(t, x):
            q, v = T @ x[:r], T @ x[r:]
            b = self.pin.nonLinearEffects(self.pm, self.pd, q, v)
            return np.concatenate([x[r:], np.linalg.solve(T.T @ self.mass(q) @ T, T.T @ (tau - b))])
        return f

    def _x0(self):
        r = self.T.shape[1]
        return np.concatenate([np.linalg.lstsq(self.T, self.q0, rcond=None)[0], np.zeros(r)])

    def reference(self, t_end):
        from scipy.integrate import solve_ivp
        sol = solve_ivp(self.rhs(self.tau), (0.0, t_end), self._x0(), method="DOP853",
                        rtol=1e-12, atol=1e-12)
        return self.T @ sol.y[:self.T.shape[1], -1]

    def pd_reference(self, t_end, h, tol):
        """The sampled-data PD loop integrated interval by interval (effort held)."""
        from scipy.integrate import solve_ivp
        T, r = self.T, self.T.shape[1]
        x = self._x0()
        for k in range(int(round(t_end / h))):
            tau = self.kp * (self.target - T @ x[:r]) - self.kd * (T @ x[r:])
            x = solve_ivp(self.rhs(tau), (k * h, (k + 1) * h), x, method="DOP853", rtol=tol,
                          atol=tol).y[:, -1]
        return T @ x[:r]


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


def cosim_sim(robot, method, h, **opts):
    from cosim import Simulation

    names = {p.name for p in robot.cls.parameters}
    params = {f"{j}.q0": robot.q0[i] for i, j in enumerate(robot.cls.coordinates)
              if f"{j}.q0" in names}  # (a mimic joint follows its joint)
    if method == "dopri5":
        opts = opts or dict(rtol=1e-8, atol=1e-10)
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
        for _ in range(steps):   # sim.q, sim.v: read-only views of the state, no copy
            set_inputs(kp * (target - sim.q) - kd * sim.v)
            t = do_step(t, h)
        cpu = time.process_time() - t0
    else:
        set_inputs(robot.tau)
        t0 = time.process_time()
        for _ in range(steps):
            t = do_step(t, h)
        cpu = time.process_time() - t0
    return cpu / steps, np.array(sim.y[:n])


# -- work-precision: CPU seconds to reach q(T) within an error ---------------------------------
WP_STEPS = tuple(4e-3 / 2 ** k for k in range(9))          # 4 ms … 15.6 µs
WP_RTOLS = tuple(10.0 ** -k for k in range(4, 13))          # 1e-4 … 1e-12
WP_LEVELS = (1e-3, 1e-5, 1e-7)


def work_precision_runs(robot, t_end, q_ref):
    """(tool, method, setting, CPU s for [0, T], error) for every method over its grid:
    MuJoCo's three with timestep h, cosim's rk4 and generalized-α with fixed step h and
    dopri5 at rtol (atol = rtol/100), each integrating [0, T] in one ``do_step``, and
    scipy's DOP853 on pinocchio's M and bias at rtol (atol = rtol/100)."""
    from scipy.integrate import solve_ivp

    out = []
    for h in WP_STEPS:
        steps = int(round(t_end / h))
        for m in MUJOCO_METHODS:
            cpu, q = mujoco_run(robot, m, h, steps)
            out.append(("MuJoCo", m, f"h={h:.3g}", cpu * steps, np.abs(q - q_ref).max()))
        for m in ("rk4", "generalized-alpha"):
            sim = cosim_sim(robot, m, h)
            sim.set_inputs(robot.tau)
            t0 = time.process_time()
            sim.do_step(0.0, t_end)
            cpu = time.process_time() - t0
            out.append(("cosim", m, f"h={h:.3g}", cpu, np.abs(sim.y[:robot.n] - q_ref).max()))
    for rtol in WP_RTOLS:
        sim = cosim_sim(robot, "dopri5", None, rtol=rtol, atol=rtol * 1e-2)
        sim.set_inputs(robot.tau)
        t0 = time.process_time()
        sim.do_step(0.0, t_end)
        cpu = time.process_time() - t0
        out.append(("cosim", "dopri5", f"rtol={rtol:.0e}", cpu,
                    np.abs(sim.y[:robot.n] - q_ref).max()))
        r = robot.T.shape[1]
        t0 = time.process_time()
        sol = solve_ivp(robot.rhs(robot.tau), (0.0, t_end), robot._x0(), method="DOP853",
                        rtol=rtol, atol=rtol * 1e-2)
        cpu = time.process_time() - t0
        out.append(("pinocchio+scipy", "DOP853", f"rtol={rtol:.0e}", cpu,
                    np.abs(robot.T @ sol.y[:r, -1] - q_ref).max()))
    return out


def work_precision_table(runs):
    """Per error level: the cheapest run of cosim and of its peers that reaches it, and
    the ratio of their CPU times."""
    rows = []
    for level in WP_LEVELS:
        best = {}
        for tool, m, setting, cpu, err in runs:
            side = "cosim" if tool == "cosim" else "peer"
            if err <= level and cpu < best.get(side, (np.inf,))[0]:
                best[side] = (cpu, f"{tool} {m} {setting}")
        c, p = best.get("cosim"), best.get("peer")
        rows.append((f"{level:.0e}",
                     f"{c[0] * 1e3:.2f} ms ({c[1]})" if c else "not reached",
                     f"{p[0] * 1e3:.2f} ms ({p[1]})" if p else "not reached",
                     f"{c[0] / p[0]:.2f}" if c and p else "-"))
    return rows


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
    ap.add_argument("--robots", nargs="+", choices=tuple(ROBOTS), default=tuple(ROBOTS))
    ap.add_argument("--only", nargs="+", choices=("steps", "pd", "wp"), default=("steps", "pd", "wp"),
                    help="print only these tables (per-step, PD loop, work-precision)")
    args = ap.parse_args(argv)
    t_end = 0.2 if args.quick else 1.0
    steps_h = (1e-3,) if args.quick else (5e-4, 1e-3, 2e-3)
    reps = 1 if args.quick else 3
    import mujoco
    say(f"cosim vs MuJoCo {mujoco.__version__}: T = {t_end} s, h = "
        f"{', '.join(f'{h * 1e3:g}' for h in steps_h)} ms, best of {reps} interleaved run(s)")
    for name in args.robots:
        robot = Robot(name)
        dm, db = robot.check_equal()
        say(f"\n{name} ({robot.n} joints): models equal? max|ΔM| = {dm:.1e}, "
            f"max|Δbias| = {db:.1e} (20 random states)")
        if dm > 1e-10 or db > 1e-9:
            raise SystemExit(f"{name}: MuJoCo's and pinocchio's models differ")
        say("  compiling / warming up cosim's methods (cached after the first run) ...")
        for method in COSIM_METHODS:
            cosim_run(robot, method, 1e-3, 2)
        if "steps" in args.only or "wp" in args.only:
            say("  reference (DOP853 1e-12) ...")
            q_ref = robot.reference(t_end)
        if "steps" in args.only:
            per_step_table(robot, t_end, steps_h, reps, q_ref)
        if "pd" in args.only:
            pd_table(robot, t_end, reps)
        if "wp" in args.only:
            say(f"  work-precision (constant efforts, [0, {t_end}] s in one call per run) ...")
            rows = work_precision_table(work_precision_runs(robot, t_end, q_ref))
            say("  CPU time to reach max|q(T) - q_ref(T)| <= error: best cosim / best peer")
            table(rows, ("error rad", "best cosim", "best peer", "ratio"))


def per_step_table(robot, t_end, steps_h, reps, q_ref):
    """Table 1 (module docstring): constant efforts, every method at each h."""
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


def pd_table(robot, t_end, reps):
    """Table 2 (module docstring): the PD loop at 1 kHz."""
    h = 1e-3
    steps = int(round(t_end / h))
    say("  PD loop reference (DOP853 1e-12 per 1 ms interval) ...")
    q_pd = robot.pd_reference(t_end, h, PD_REFERENCE_TOL)
    runners = {("MuJoCo", m): (lambda m=m: mujoco_run(robot, m, h, steps, pd=True))
               for m in MUJOCO_METHODS}
    runners.update({("cosim", m): (lambda m=m: cosim_run(robot, m, h, steps, pd=True))
                    for m in COSIM_METHODS})
    best, end = interleaved(runners, reps)
    rows = [("1", tool, m, f"{cpu * 1e6:.1f}", f"{np.abs(end[(tool, m)] - q_pd).max():.1e}")
            for (tool, m), cpu in best.items()]
    say(f"  PD loop at 1 kHz (new effort every step), error at T = {t_end} s:")
    table(rows, ("h ms", "tool", "method", "CPU µs/step", "max|q - q_ref| rad"))
    # the PD ratio: errors below the reference's tolerance (1e-12) are all alike
    ref = ("MuJoCo", "RK4")
    err = {key: np.abs(q - q_pd).max() for key, q in end.items()}
    bound = max(err[ref], PD_REFERENCE_TOL)
    fit = [key for key in best if key[0] == "cosim" and err[key] <= bound]
    if fit:
        key = min(fit, key=best.get)
        say(f"  PD ratio: cosim {key[1]} (cheapest at or below MuJoCo RK4's error "
            f"{err[ref]:.1e}, or {PD_REFERENCE_TOL:.0e}) {best[key] * 1e6:.1f} µs / MuJoCo RK4 "
            f"{best[ref] * 1e6:.1f} µs = {best[key] / best[ref]:.3f}")
    else:
        say(f"  PD ratio: no cosim method at or below MuJoCo RK4's error {err[ref]:.1e}")


if __name__ == "__main__":
    main()
