"""Robots as a robotics engineer expects them: URDF <mimic> joints as constraints,
effort limits that say when they clip, URDF files accepted where a model is named."""
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pinocchio")

from cosim import Simulation  # noqa: E402
from cosim.errors import InputLimitWarning, InvalidInputError, UnknownModelError  # noqa: E402
from cosim.models.urdf import example_robot_path, load_urdf, urdf_model_class  # noqa: E402

TWO_LINK = Path(__file__).resolve().parents[1] / "cosim" / "data" / "urdf" / "two_link.urdf"
ARM = [f"panda_joint{i}" for i in range(1, 8)]


def _panda_path():
    try:
        return example_robot_path()
    except UnknownModelError as exc:
        pytest.skip(str(exc))


# -- <mimic> joints ---------------------------------------------------------------------------
def test_panda_mimic_finger_is_a_constraint_matching_pinocchios_mimic_model():
    """The Panda's panda_finger_joint2 mimics panda_finger_joint1: one constraint named after
    the joint, 9 coordinates.  With constant arm efforts (damping and friction off), dopri5
    at rtol 1e-10 follows pinocchio's own mimic model (buildModelFromUrdf(mimic=True): 8
    coordinates, M and the bias in reduced form) integrated by scipy's DOP853 at 1e-13:
    positions within 1e-8 over 0.5 s (measured 1.7e-10); the fingers' positions and
    velocities equal (measured: exactly)."""
    import pinocchio as pin
    from scipy.integrate import solve_ivp

    path = _panda_path()
    cls = load_urdf(path, position_limits=False)  # the reference has no stops
    assert cls.constraint_names == ("panda_finger_joint2_mimic",)
    assert len(cls.coordinates) == 9 and "panda_finger_joint2.q0" not in \
        [p.name for p in cls.parameters]
    pm = pin.buildModelFromUrdf(str(path), mimic=True)
    pd = pm.createData()
    assert pm.nq == pm.nv == 8
    tau = np.array([2.0, 1.0, -1.0, 0.5, 0.2, -0.3, 0.1, 0.0])
    q0 = np.array([0.3, -0.4, 0.2, -1.8, 0.1, 1.4, 0.5, 0.02])

    def f(t, x):
        q, v = x[:8], x[8:]
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        return np.concatenate([v, np.linalg.solve(M, tau - pin.nonLinearEffects(pm, pd, q, v))])

    x0 = np.concatenate([q0, np.zeros(8)])
    x0[8 + 1] = 0.5
    ref = solve_ivp(f, (0.0, 0.5), x0, method="DOP853", rtol=1e-13, atol=1e-13,
                    dense_output=True)
    params = {f"{j}.{k}": 0.0 for j in cls.coordinates for k in ("damping", "friction")}
    params.update({f"{j}.q0": q0[i] for i, j in enumerate(cls.coordinates[:8])})
    params["panda_joint2.v0"] = 0.5
    sim = Simulation(cls, method="dopri5", params=params, rtol=1e-10, atol=1e-10,
                     backend="python")
    sim.set_inputs(dict(zip(cls.coordinates, list(tau) + [0.0])))
    err = 0.0
    for _ in range(10):
        sim.do_step(sim.time, 0.05)
        r = ref.sol(sim.time)
        err = max(err, np.abs(sim.y[:9] - np.append(r[:8], r[7])).max())
        assert abs(sim.y[7] - sim.y[8]) <= 1e-12 and abs(sim.y[9 + 7] - sim.y[9 + 8]) <= 1e-12
    assert err <= 1e-8


def _pd_run(cls, backend, t_end=2.0):
    """The arm under a joint PD (kp 100, kd 20) towards a pose, fingers unactuated,
    generalized-α h = 1 ms, a new effort every step: the fingers' range and the largest
    mimic residual |q1 − q2|."""
    target = np.array([0.3, -0.4, 0.2, -1.8, 0.1, 1.4, 0.5])
    sim = Simulation(cls, method="generalized-alpha", h=1e-3, backend=backend)
    assert sim.backend == backend
    lo, hi, residual = np.inf, -np.inf, 0.0
    for _ in range(int(round(t_end / 1e-3))):
        q, v = sim.y[:7], sim.y[9:16]
        sim.set_inputs(np.concatenate([100.0 * (target - q) - 20.0 * v, [0.0, 0.0]]))
        sim.do_step(sim.time, 1e-3)
        lo, hi = min(lo, *sim.y[7:9]), max(hi, *sim.y[7:9])
        residual = max(residual, abs(sim.y[7] - sim.y[8]))
    return lo, hi, residual


@pytest.mark.filterwarnings("ignore::cosim.errors.InputLimitWarning")  # the PD asks for more
def test_panda_fingers_stay_together_under_an_arm_pd(backend):
    """Zero finger effort, 2 s: the mimic constraint holds the fingers together (residual
    at the Newton tolerance: measured 0 on both backends) and inside their 0..0.04 m travel
    (measured 0.020..0.0243 m; MuJoCo's mimic equality: 0.023 m).  The same URDF without
    its <mimic> element lets them fly apart (measured -0.21 and +0.26 m)."""
    path = _panda_path()
    lo, hi, residual = _pd_run(load_urdf(path), backend)
    assert residual <= 1e-10
    assert 0.0 <= lo and hi <= 0.04
    if backend == "python":
        text = path.read_text()
        assert text.count("<mimic ") == 1
        free = urdf_model_class(text.replace('<mimic joint="panda_finger_joint1"/>', ""),
                                position_limits=False)
        assert free.constraint_names == ()
        lo, hi, residual = _pd_run(free, backend, t_end=1.0)
        assert residual > 0.1 and (lo < -0.05 or hi > 0.09)


def _parallel_discs(mimics):
    """Three discs on vertical revolute joints at the base (M diagonal, no gravity torque):
    izz = 1, 2, 4; ``mimics``: the <mimic> elements of joints b and c."""
    links = "".join(
        f'<link name="{n}"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" '
        f'iyy="1" iyz="0" izz="{izz}"/></inertial></link>'
        for n, izz in (("la", 1), ("lb", 2), ("lc", 4)))
    joints = "".join(
        f'<joint name="{j}" type="continuous"><parent link="base"/><child link="l{j}"/>'
        f'<origin xyz="{x} 0 0"/><axis xyz="0 0 1"/>{mimics.get(j, "")}</joint>'
        for j, x in (("a", 0), ("b", 1), ("c", 2)))
    return f'<robot name="discs"><link name="base"/>{links}{joints}</robot>'


def test_mimic_multiplier_offset_and_chain_closed_form():
    """b mimics a (q_b = -2 q_a + 0.1), c mimics b (q_c = 0.5 q_b): one degree of freedom
    q_a with inertia 1 + 4·2 + 1·4 = 13 and generalized force τ_a − 2 τ_b − τ_c, so
    q_a(t) = q_a0 + ½ (τ_a − 2 τ_b − τ_c)/13 t² (dopri5 is exact on a quadratic: within
    1e-12, measured 4e-15); the initial state follows the chain."""
    cls = urdf_model_class(_parallel_discs({
        "b": '<mimic joint="a" multiplier="-2" offset="0.1"/>',
        "c": '<mimic joint="b" multiplier="0.5"/>'}))
    assert cls.constraint_names == ("b_mimic", "c_mimic")
    sim = Simulation(cls, method="dopri5", params={"a.q0": 0.3, "a.v0": 0.0, "gravity_z": 0.0},
                     rtol=1e-12, atol=1e-12, backend="python")
    qb0 = -2 * 0.3 + 0.1
    assert sim.y[:3].tolist() == pytest.approx([0.3, qb0, 0.5 * qb0], abs=1e-15)
    tau = np.array([1.0, 0.5, -2.0])
    sim.set_inputs(tau)
    for _ in range(5):
        sim.do_step(sim.time, 0.2)
    qa = 0.3 + 0.5 * (tau[0] - 2 * tau[1] - tau[2]) / 13.0 * sim.time ** 2
    assert sim.y[:3] == pytest.approx([qa, -2 * qa + 0.1, 0.5 * (-2 * qa + 0.1)], abs=1e-12)


@pytest.mark.parametrize("mimics, message", [
    ({"b": '<mimic joint="z"/>'}, "joint 'b' <mimic joint='z'>: no such joint"),
    ({"b": '<mimic joint="b"/>'}, "the <mimic> joints b -> b form a cycle"),
    ({"b": '<mimic joint="c"/>', "c": '<mimic joint="b"/>'}, "form a cycle"),
    ({"b": '<mimic joint="a" multiplier="x"/>'}, "multiplier='x' is not a number"),
    ({"b": "<mimic/>"}, "joint 'b' <mimic> needs joint="),
])
def test_bad_mimic_is_one_clear_error(mimics, message):
    with pytest.raises(InvalidInputError, match=message):
        urdf_model_class(_parallel_discs(mimics))


# -- effort limits ------------------------------------------------------------------------------
def test_clipped_effort_is_said_once_per_joint():
    """A requested effort beyond the URDF's <limit effort> is clipped (as before) and the first
    clip of each joint is one InputLimitWarning naming the joint, the value and the limit;
    an adapter's on_notice receives it instead."""
    cls = load_urdf(TWO_LINK)
    sim = Simulation(cls, method="generalized-alpha", h=1e-3, backend="python",
                     params={"joint1.effort_limit": 2.0})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim.set_inputs({"joint1": 1.5})          # inside: nothing said
        sim.do_step(0.0, 0.01)
        sim.set_inputs({"joint1": 50.0})
        sim.do_step(sim.time, 0.01)
        sim.set_inputs({"joint1": -60.0})        # the same joint again: said once
        sim.do_step(sim.time, 0.01)
    said = [str(w.message) for w in caught if issubclass(w.category, InputLimitWarning)]
    assert said == ["input 'joint1' = 50.0 is clipped to 2.0 by the effort limit of joint "
                    "'joint1' (parameter 'joint1.effort_limit', URDF <limit effort>) (said once "
                    "per input)"]
    assert caught[0].filename == __file__  # points at the caller's set_inputs
    # the clip itself: the same run as one with the effort at the limit
    ref = Simulation(cls, method="generalized-alpha", h=1e-3, backend="python")
    for u in (1.5, 2.0, -2.0):
        ref.set_inputs({"joint1": u})
        ref.do_step(ref.time, 0.01)
    assert np.array_equal(ref.y, sim.y)
    heard = []
    other = Simulation(cls, method="generalized-alpha", h=1e-3, backend="python",
                       params={"joint2.effort_limit": 1.0})
    other.on_notice = heard.append
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        other.set_inputs({"joint2": -3.0})
    assert heard == ["input 'joint2' = -3.0 is clipped to -1.0 by the effort limit of joint "
                     "'joint2' (parameter 'joint2.effort_limit', URDF <limit effort>) (said once "
                     "per input)"]


# -- loading ----------------------------------------------------------------------------------
def test_simulation_takes_a_urdf_file_like_a_library_model(tmp_path):
    """Simulation(model="robot.urdf") and model=Path(...) build the robot load_urdf builds:
    the same names and, step for step, the same states (bit-identical)."""
    ref = Simulation(load_urdf(TWO_LINK), method="dopri5", backend="python",
                     params={"joint1.q0": -1.4})
    ref.do_step(0.0, 0.2)
    for model in (str(TWO_LINK), TWO_LINK):
        sim = Simulation(model=model, method="dopri5", backend="python",
                         params={"joint1.q0": -1.4})
        assert sim.coordinate_names == ("joint1", "joint2") and sim.model.name == "two_link"
        sim.do_step(0.0, 0.2)
        assert np.array_equal(sim.y, ref.y)
    with pytest.raises(InvalidInputError, match="cannot read URDF file .*missing.urdf"):
        Simulation(model=tmp_path / "missing.urdf")
    with pytest.raises(InvalidInputError, match="must be a URDF"):
        Simulation(model=tmp_path / "plant.py")


def test_cli_says_a_clipped_effort_once_on_stderr(tmp_path, capsys):
    """``cosim run`` of a scenario driving a URDF robot beyond its effort limit: one
    ``cosim: warning:`` line on stderr naming the joint, the value and the limit (a
    constant input asked at every communication step, said once)."""
    from cosim.cli import main as cosim_main

    (tmp_path / "arm.urdf").write_text(TWO_LINK.read_text())
    (tmp_path / "arm.yaml").write_text(
        "model: {urdf: arm.urdf, params: {joint1.effort_limit: 2.0}}\n"
        "stop_time: 0.05\ncommunication_step: 0.01\n"
        "inputs: {joint1: {type: constant, value: 5.0}}\n")
    assert cosim_main(["run", str(tmp_path / "arm.yaml"), "--json"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "is clipped" in line]
    assert err == ["cosim: warning: input 'joint1' = 5.0 is clipped to 2.0 by the effort limit "
                   "of joint 'joint1' (parameter 'joint1.effort_limit', URDF <limit effort>) "
                   "(said once per input)"]


@pytest.mark.fmu
def test_fmu_logs_a_clipped_effort_once(tmp_path):
    """The FMU of a URDF robot: an effort beyond the joint's limit is one fmi2Warning
    through the FMI logger, naming the joint, the value and the limit (the first doStep
    after fmi2SetReal runs through Python, where inputs are looked at)."""
    pytest.importorskip("fmpy")
    pytest.importorskip("pythonfmu")
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import (FMU2Slave, defaultCallbacks, fmi2CallbackFunctions,
                           fmi2CallbackLoggerTYPE)

    from cosim.cli import main as cosim_main

    path = tmp_path / "arm.fmu"
    assert cosim_main(["fmu", "build", str(TWO_LINK), "-o", str(path), "--step", "0.001",
                       "--comm-step", "0.01", "--param", "joint1.effort_limit=2"]) == 0
    md = read_model_description(str(path))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    messages = []
    cb = fmi2CallbackFunctions()
    cb.logger = fmi2CallbackLoggerTYPE(lambda e, i, s, c, m: messages.append((s, m.decode())))
    cb.allocateMemory, cb.freeMemory = defaultCallbacks.allocateMemory, defaultCallbacks.freeMemory
    fmu = FMU2Slave(guid=md.guid, unzipDirectory=extract(str(path)),
                    modelIdentifier=md.coSimulation.modelIdentifier, instanceName="arm")
    fmu.instantiate(callbacks=cb, loggingOn=True)
    fmu.setupExperiment(startTime=0.0)
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    t = 0.0
    for u in (1.0, 1.5, 1.0, 5.0, -7.0, 5.0):
        fmu.setReal([vr["joint1"]], [u])
        fmu.doStep(t, 0.01)
        t += 0.01
    fmu.terminate()
    fmu.freeInstance()
    clipped = [(s, m) for s, m in messages if "is clipped" in m]
    assert clipped == [(1, "input 'joint1' = 5.0 is clipped to 2.0 by the effort limit of joint "
                           "'joint1' (parameter 'joint1.effort_limit', URDF <limit effort>) (said "
                           "once per input)")]  # 1 = fmi2Warning


# -- position-limit stops -----------------------------------------------------------------------
@pytest.mark.parametrize("restitution", [1.0, 0.5])
def test_limit_impact_energy_bookkeeping(restitution):
    """Panda, no damping or friction, joint 4 driven into its upper limit: the impact is an
    impulse Λ along the joint (Newton's law through M and the mimic constraint), so the
    kinetic energy drops by (1 − e²) v_i² / (2 w_i), w_i the joint's response to a unit
    impulse (from pinocchio's M and C_q of the finger constraint): restitution 1 keeps the
    energy (measured 4e-11 J of 109 J; reversing the joint's velocity alone added 15.2 J),
    restitution 0.5 loses 0.917 J (the bookkeeping: within 2.3e-10 J).
    Total energy 0.1 s after the start vs E0 minus that loss: within 1e-8 J."""
    import pinocchio as pin

    path = _panda_path()
    cls = load_urdf(path, position_limits=True)
    params = {f"{j}.{k}": 0.0 for j in cls.coordinates for k in ("damping", "friction")}
    params.update({"panda_joint4.q0": -0.3, "panda_joint4.v0": 2.0, "panda_joint6.q0": 1.5,
                   "restitution": restitution})
    opts = dict(method="dopri5", params=params, rtol=1e-11, atol=1e-11, backend="python")
    sim = Simulation(cls, **opts)
    e0 = sim.model.energy(0.0, sim.y)
    for _ in range(10):
        sim.do_step(sim.time, 0.01)
    assert [e["name"] for e in sim.event_log] == ["panda_joint4_upper_limit"]
    free = Simulation(load_urdf(path, position_limits=False), **opts)
    free.do_step(0.0, sim.event_log[0]["time"])  # the state just before the impact
    q, v = free.y[:9], free.y[9:]
    pm = pin.buildModelFromUrdf(str(path))
    M = pin.crba(pm, pm.createData(), q)
    K = np.zeros((10, 10))
    K[:9, :9] = np.triu(M) + np.triu(M, 1).T
    K[9, 7:9] = K[7:9, 9] = [-1.0, 1.0]  # panda_finger_joint2 − panda_finger_joint1 = 0
    w = np.linalg.solve(K, np.eye(10)[3])[:9]
    loss = (1.0 - restitution ** 2) * v[3] ** 2 / (2.0 * w[3])
    assert abs(sim.model.energy(sim.time, sim.y) - (e0 - loss)) <= 1e-8


def test_effort_limit_changed_at_run_time_is_watched():
    """effort_limit is tunable: a limit set during the run applies to the notices too."""
    sim = Simulation(load_urdf(TWO_LINK), method="generalized-alpha", h=1e-3, backend="python")
    heard = []
    sim.on_notice = heard.append
    sim.set_inputs({"joint1": 0.8})
    sim.do_step(0.0, 0.01)
    assert heard == []  # no limit (0 = none)
    sim.set_parameter("joint1.effort_limit", 0.5)
    sim.set_inputs({"joint1": 0.9})
    sim.do_step(sim.time, 0.01)
    assert len(heard) == 1 and heard[0].startswith("input 'joint1' = 0.9 is clipped to 0.5")
