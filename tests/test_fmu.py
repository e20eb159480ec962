"""FMI 2.0 co-simulation FMUs built by `cosim fmu build`, checked with real importers.

fmpy validates and simulates them (results equal cosim.Simulation driven the
same way), rolls back and (de)serializes FMU states across processes, and
libcosim (libcosimpy) co-simulates a plant FMU with a discrete-PD controller
FMU.  Every FMU is built once per test session.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from fractions import Fraction

import numpy as np
import pytest

import cosim
from cosim import jit
from cosim.cli import main as cosim_main

fmpy = pytest.importorskip("fmpy")
pytest.importorskip("pythonfmu")
from fmpy import extract, read_model_description, simulate_fmu  # noqa: E402
from fmpy.fmi1 import FMICallException  # noqa: E402
from fmpy.fmi2 import (FMU2Slave, defaultCallbacks, fmi2CallbackFunctions,  # noqa: E402
                       fmi2CallbackLoggerTYPE, fmi2Discard)
from fmpy.simulation import Input  # noqa: E402
from fmpy.validation import validate_fmu  # noqa: E402

pytestmark = pytest.mark.fmu
# an FMU built without --method runs the default rule's choice for a driven plant
# (docs/methods/index.md "Default method"): dopri5 for the pendulum and the ball
DEFAULT = "dopri5"

REPO = Path(__file__).resolve().parents[1]
T_PD = 0.01  # controller sample time = libcosim communication step
PD_BLOCK = {"type": "state_feedback", "name": "pd", "sample_time": T_PD,
            "K": [[40.0, 8.0]], "reference_gain": [[40.0]],
            "inputs": ["angle", "angular_velocity", "reference"], "outputs": ["torque"]}
FMI2_LAST_SUCCESSFUL_TIME, FMI2_TERMINATED = 2, 3  # fmi2StatusKind
FMI2_ERROR = 3  # fmi2Status


@pytest.fixture(scope="session")
def fmu_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fmus")


@pytest.fixture(scope="session")
def pendulum_fmu(fmu_dir):
    """Pendulum, adaptive, the default method (DEFAULT), built through the CLI."""
    path = fmu_dir / "Pendulum.fmu"
    assert cosim_main(["fmu", "build", "pendulum", "-o", str(path)]) == 0
    return path


@pytest.fixture(scope="session")
def pendulum_ga_fmu(fmu_dir):
    """Pendulum, adaptive generalized-alpha (named: a Newton method's state, a second-order
    method's step budget)."""
    path = fmu_dir / "PendulumGA.fmu"
    assert cosim_main(["fmu", "build", "pendulum", "-o", str(path), "--method", "generalized-alpha",
                       "--name", "PendulumGA"]) == 0
    return path


@pytest.fixture(scope="session")
def pendulum_fixed_fmu(fmu_dir):
    """Pendulum with fixed integration step and a changed parameter."""
    path = fmu_dir / "PendulumFixed.fmu"
    assert cosim_main(["fmu", "build", "pendulum", "-o", str(path), "--step", "0.001",
                       "--method", "generalized-alpha", "--param", "l=1.5", "--option", "rho_inf=0.6",
                       "--name", "PendulumFixed"]) == 0
    return path


@pytest.fixture(scope="session")
def ball_fmu(fmu_dir):
    path = fmu_dir / "BouncingBall.fmu"
    assert cosim_main(["fmu", "build", "bouncing_ball", "-o", str(path)]) == 0
    return path


@pytest.fixture(scope="session")
def pd_fmu(fmu_dir):
    """A discrete PD controller (a state-feedback block) as its own FMU, from the CLI."""
    path = fmu_dir / "PD.fmu"
    assert cosim_main(["fmu", "build", "fmu.examples:NoPlant", "-o", str(path), "--method", "rk4",
                       "--step", str(T_PD), "--block", json.dumps(PD_BLOCK), "--name", "PD",
                       "--stop-time", "2", "--comm-step", str(T_PD)]) == 0
    return path


# -- helpers -------------------------------------------------------------------------------
class Slave:
    """An fmpy FMU2Slave with variable lookup and an optional message log."""

    def __init__(self, path, name="instance", unzip=None, params=None, logging=False,
                 initialize=True):
        self.md = read_model_description(str(path))
        self.unzip = unzip or extract(str(path))
        self.vr = {v.name: v.valueReference for v in self.md.modelVariables}
        self.messages = []
        self.callbacks = None
        if logging:
            cb = fmi2CallbackFunctions()
            cb.logger = fmi2CallbackLoggerTYPE(self._log)
            cb.allocateMemory = defaultCallbacks.allocateMemory
            cb.freeMemory = defaultCallbacks.freeMemory
            self.callbacks = cb
        self.fmu = FMU2Slave(guid=self.md.guid, unzipDirectory=self.unzip,
                             modelIdentifier=self.md.coSimulation.modelIdentifier,
                             instanceName=name)
        self.fmu.instantiate(callbacks=self.callbacks, loggingOn=logging)
        if initialize:
            self.initialize(params)

    def _log(self, env, instance, status, category, message):
        self.messages.append((status, (category or b"").decode(), (message or b"").decode()))

    def initialize(self, params=None):
        self.fmu.setupExperiment(startTime=0.0)
        for key, value in (params or {}).items():
            self.fmu.setReal([self.vr[key]], [value])
        self.fmu.enterInitializationMode()
        self.fmu.exitInitializationMode()

    def get(self, names):
        return self.fmu.getReal([self.vr[n] for n in names])

    def set(self, values):
        self.fmu.setReal([self.vr[n] for n in values], list(values.values()))

    def close(self):
        self.fmu.terminate()
        self.fmu.freeInstance()


PENDULUM_OUT = ["angle", "angular_velocity", "rod_force"]


def drive(slave, t, n, h=0.01):
    """n steps of h with torque = sin(t); returns (t_end, outputs after every step)."""
    rows = []
    for _ in range(n):
        slave.set({"torque": float(np.sin(3.0 * t))})
        slave.fmu.doStep(t, h)
        t += h
        rows.append(slave.get(PENDULUM_OUT))
    return t, np.array(rows)


# -- modelDescription ------------------------------------------------------------------------
def test_model_description_is_valid_and_complete(pendulum_fmu, pendulum_fixed_fmu, pd_fmu, ball_fmu):
    for path in (pendulum_fmu, pendulum_fixed_fmu, pd_fmu, ball_fmu):
        assert validate_fmu(str(path)) == [], path
    md = read_model_description(str(pendulum_fixed_fmu))
    cs = md.coSimulation
    assert md.fmiVersion == "2.0" and cs.modelIdentifier == "PendulumFixed"
    assert cs.canHandleVariableCommunicationStepSize and cs.canGetAndSetFMUstate
    assert cs.canSerializeFMUstate and not cs.canInterpolateInputs
    var = {v.name: v for v in md.modelVariables}
    for name in ("torque", "fx", "fy"):  # every model input, continuous, with a start value
        assert var[name].causality == "input" and var[name].variability == "continuous"
        assert float(var[name].start) == 0.0
    assert var["torque"].unit == "N.m" and var["torque"].description == "torque about the pivot"
    for name in PENDULUM_OUT:
        assert var[name].causality == "output"
    assert var["l"].causality == "parameter" and var["l"].variability == "fixed"
    assert float(var["l"].start) == 1.5 and var["l"].unit == "m"
    assert float(var["solver.step"].start) == 0.001 and var["solver.step"].variability == "fixed"
    assert var["solver.method"].start == "generalized-alpha" and var["solver.method"].type == "String"
    for path in (pendulum_fmu, ball_fmu):   # no --method: the default rule, driven
        default = {v.name: v for v in read_model_description(str(path)).modelVariables}
        assert default["solver.method"].start == DEFAULT, path
    assert float(var["solver.rho_inf"].start) == 0.6 and var["solver.rho_inf"].variability == "fixed"
    assert var["event_count"].type == "Integer" and var["event_count"].causality == "output"
    de = md.defaultExperiment
    assert float(de.stopTime) == 5.0 and float(de.tolerance) == 1e-6
    ball = {v.name: v for v in read_model_description(str(ball_fmu)).modelVariables}
    assert ball["e"].variability == "tunable" and ball["h0"].variability == "fixed"
    pd = {v.name: v for v in read_model_description(str(pd_fmu)).modelVariables}
    assert pd["pd.reference"].causality == "input" and pd["pd.torque"].causality == "output"


# -- fmpy simulation vs cosim.Simulation -------------------------------------------------------
def test_fmpy_simulation_with_input_matches_simulation(pendulum_fmu):
    t_end, dt = 1.0, 0.01
    ts = np.linspace(0.0, t_end, 11)
    signal = np.array([(t, 0.5 * np.sin(3.0 * t)) for t in ts], dtype=[("time", float), ("torque", float)])
    calls = []
    res = simulate_fmu(str(pendulum_fmu), stop_time=t_end, output_interval=dt, input=signal,
                       output=PENDULUM_OUT, validate=True, fmi_call_logger=calls.append)
    statuses = [c.rsplit("->", 1)[1].strip() for c in calls
                if "->" in c and not c.startswith("fmi2Instantiate")]
    assert len(statuses) > 300 and set(statuses) == {"OK"}  # every FMI call succeeded
    assert sum(c.startswith("fmi2SetReal") for c in calls) >= 100  # the input signal was applied

    # the same run through cosim.Simulation: fmpy's communication grid (t_n = n*dt) and
    # fmpy's own input interpolation at each communication point (ZOH over the step)
    sim = cosim.Simulation(model="pendulum", method=DEFAULT, rtol=1e-6, atol=1e-8)
    table = np.asarray(np.stack([signal["torque"]]), dtype=float)
    rows, t, n = [sim.get_outputs()], 0.0, 0
    while not (t > t_end or np.isclose(t, t_end)):
        t_next = (n + 1) * dt
        u, _ = Input.interpolate(time=t, t=signal["time"], table=table, discrete=False, after_event=True)
        sim.set_inputs({"torque": float(u.flatten()[0])})
        sim.do_step(t, t_next - t)
        rows.append(sim.get_outputs())
        t, n = t_next, n + 1
    ref = np.array(rows)
    assert len(res) == len(ref) == 101
    np.testing.assert_allclose(res["time"][-1], t_end, rtol=0, atol=1e-12)
    for j, name in enumerate(PENDULUM_OUT):
        assert np.max(np.abs(res[name] - ref[:, j])) <= 1e-12, name
    assert abs(res["angle"][-1] - res["angle"][0]) > 0.1  # it moved


def test_fmu_matches_cosim_simulate_cli(pendulum_fixed_fmu, tmp_path):
    """The FMU stepped on the CLI's communication grid equals `cosim simulate --out`."""
    csv = tmp_path / "run.csv"
    assert cosim_main(["simulate", "pendulum", "--h", "0.001", "--method", "generalized-alpha",
                       "--param", "l=1.5", "--t-end", "0.5", "--dt", "0.01", "--option", "rho_inf=0.6",
                       "--out", str(csv)]) == 0
    table = np.genfromtxt(csv, delimiter=",", names=True)
    slave = Slave(pendulum_fixed_fmu, "cli")
    t, rows = 0.0, [slave.get(PENDULUM_OUT)]
    for k in range(50):  # the CLI's grid (cosim.run, issue 17): t_k = k·dt in exact decimals
        t_next = float(Fraction("0.01") * (k + 1))
        slave.fmu.doStep(t, t_next - t)
        t = t_next
        rows.append(slave.get(PENDULUM_OUT))
    slave.close()
    rows = np.array(rows)
    for j, name in enumerate(PENDULUM_OUT):
        assert np.max(np.abs(rows[:, j] - table[name])) <= 1e-12, name


# -- FMU state: rollback, serialization across processes -------------------------------------------
def test_rollback_with_get_set_fmu_state(pendulum_fmu):
    slave = Slave(pendulum_fmu, "rollback")
    t, _ = drive(slave, 0.0, 10)
    state = slave.fmu.getFMUstate()
    t1, first = drive(slave, t, 25)
    slave.fmu.setFMUstate(state)
    assert slave.get(["angle"]) != list(first[-1][:1])  # really back
    t2, second = drive(slave, t, 25)
    assert t1 == t2 and np.array_equal(first, second)  # bit for bit
    slave.fmu.setFMUstate(state)  # a state can be restored again
    _, third = drive(slave, t, 25)
    assert np.array_equal(first, third)
    slave.fmu.reset()  # and into the fresh slave object fmi2Reset creates
    slave.initialize()
    slave.fmu.setFMUstate(state)
    _, fourth = drive(slave, t, 25)
    assert np.array_equal(first, fourth)
    slave.fmu.freeFMUstate(state)
    slave.close()


SUBPROCESS_CONTINUE = textwrap.dedent("""
    import json, os, sys
    # hide the development install: the FMU must run on the cosim bundled in its resources
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in repr(f)]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != {repo!r}]
    assert "cosim" not in sys.modules
    import numpy as np
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave
    path, blob_file, t, n = {path!r}, {blob!r}, {t!r}, {n!r}
    md = read_model_description(path)
    unzip = extract(path)
    vr = {{v.name: v.valueReference for v in md.modelVariables}}
    fmu = FMU2Slave(guid=md.guid, unzipDirectory=unzip,
                    modelIdentifier=md.coSimulation.modelIdentifier, instanceName="fresh")
    fmu.instantiate()
    fmu.setupExperiment(startTime=0.0)
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    state = fmu.deSerializeFMUstate(open(blob_file, "rb").read())
    fmu.setFMUstate(state)
    fmu.freeFMUstate(state)
    rows = []
    for _ in range(n):
        fmu.setReal([vr["torque"]], [float(np.sin(3.0 * t))])
        fmu.doStep(t, 0.01)
        t += 0.01
        rows.append(fmu.getReal([vr["angle"], vr["angular_velocity"], vr["rod_force"]]))
    private = [m for m in sys.modules if m.startswith("cosim_fmu_") and "." not in m]
    bundled = (len(private) == 1 and "cosim" not in sys.modules
               and os.path.realpath(sys.modules[private[0] + ".cosim"].__file__).startswith(
                   os.path.realpath(unzip)))
    entries = sorted(m for m in sys.modules if m.startswith(("cosim_entry_", "cosim_method_")))
    print(json.dumps({{"rows": rows, "bundled_cosim": bundled, "private": private,
                      "entries": entries}}))
""")


def test_serialized_state_continues_in_a_new_process(pendulum_fmu, tmp_path):
    slave = Slave(pendulum_fmu, "serialize")
    t, _ = drive(slave, 0.0, 15)
    state = slave.fmu.getFMUstate()
    blob = slave.fmu.serializeFMUstate(state)
    slave.fmu.freeFMUstate(state)
    assert bytes(blob[:12]) == b"COSIM-STATE\x00"
    _, expected = drive(slave, t, 20)
    # round trip inside this process into the same instance
    restored = slave.fmu.deSerializeFMUstate(blob)
    slave.fmu.setFMUstate(restored)
    _, again = drive(slave, t, 20)
    assert np.array_equal(again, expected)
    slave.close()

    blob_file = tmp_path / "state.bin"
    blob_file.write_bytes(bytes(blob))
    script = SUBPROCESS_CONTINUE.format(repo=str(REPO), path=str(pendulum_fmu), blob=str(blob_file),
                                        t=t, n=20)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["bundled_cosim"], result["private"]
    assert np.array_equal(np.array(result["rows"]), expected)  # identical continuation
    # the FMU's private copy of the package runs the very compiled method the
    # development install uses (one compilation per machine): dopri5's (DEFAULT)
    if jit.numba_available():
        from cosim.integrators.explicit import compiled_entry
        assert result["entries"] == [compiled_entry().__module__]


# -- status and logging ----------------------------------------------------------------------------
def test_nan_input_is_discarded_and_bad_step_arguments_are_errors_state_unchanged(pendulum_fmu):
    """§4.2.2: a step the FMU cannot compute is fmi2Discard; arguments that break the
    calling contract (t != FMU time, h <= 0) are fmi2Error; both leave the state as it was,
    and after a discarded step and a valid retry fmi2Terminated is false (§4.2.3)."""
    slave = Slave(pendulum_fmu, "bad-input", logging=True)
    reference = Slave(pendulum_fmu, "reference")
    t, _ = drive(slave, 0.0, 5)
    drive(reference, 0.0, 5)
    torque = float(np.sin(3.0 * t))
    slave.set({"torque": torque})  # the valid input the master holds for the next step
    state = slave.fmu.getFMUstate()
    before = bytes(slave.fmu.serializeFMUstate(state))

    cases = [({"torque": float("nan")}, t, 0.01, fmi2Discard, "must be finite"),
             ({"torque": torque}, t, -0.01, FMI2_ERROR, "must be > 0"),
             ({"torque": torque}, t, 0.0, FMI2_ERROR, "must be > 0"),
             ({"torque": torque}, t + 0.5, 0.01, FMI2_ERROR, "but the FMU is at")]
    for inputs, t_call, h, status, text in cases:
        slave.messages.clear()
        slave.set(inputs)
        with pytest.raises(FMICallException) as info:
            slave.fmu.doStep(t_call, h)
        assert info.value.status == status, (t_call, h, text)
        assert slave.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == t  # nothing completed
        assert slave.fmu.getBooleanStatus(FMI2_TERMINATED) is False or \
            slave.fmu.getBooleanStatus(FMI2_TERMINATED) == 0
        assert any(st == status and text in message for st, _, message in slave.messages), \
            slave.messages
    slave.set({"torque": torque})
    after_state = slave.fmu.getFMUstate()
    assert bytes(slave.fmu.serializeFMUstate(after_state)) == before  # state as before the calls
    # and the run continues exactly like one that never saw the bad calls
    _, got = drive(slave, t, 10)
    _, want = drive(reference, t, 10)
    assert np.array_equal(got, want)
    assert not slave.fmu.getBooleanStatus(FMI2_TERMINATED)  # discard + valid retry: not terminated
    assert slave.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == pytest.approx(t + 0.1, abs=1e-12)
    for s in (state, after_state):
        slave.fmu.freeFMUstate(s)
    slave.close()
    reference.close()


def test_reset_and_independent_instances(pendulum_fmu):
    a = Slave(pendulum_fmu, "a", params={"l": 2.0})
    b = Slave(pendulum_fmu, "b")
    initial_b = b.get(PENDULUM_OUT)
    _, rows_a = drive(a, 0.0, 20)
    assert b.get(PENDULUM_OUT) == initial_b  # stepping a leaves b alone
    _, rows_b = drive(b, 0.0, 20)
    for slave_rows, l in ((rows_a, 2.0), (rows_b, 1.0)):
        sim = cosim.Simulation(model="pendulum", method=DEFAULT, params={"l": l})
        t, ref = 0.0, []
        for _ in range(20):
            sim.set_inputs({"torque": float(np.sin(3.0 * t))})
            sim.do_step(t, 0.01)
            t += 0.01
            ref.append(sim.get_outputs())
        assert np.array_equal(slave_rows, np.array(ref))
    a.fmu.reset()  # fmi2Reset: back to the start values (l = 1 again)
    a.initialize()
    assert a.get(PENDULUM_OUT) == initial_b
    _, again = drive(a, 0.0, 20)
    assert np.array_equal(again, rows_b)
    a.close()
    b.close()


def test_events_inside_a_step_are_handled_and_counted(ball_fmu):
    res = simulate_fmu(str(ball_fmu), stop_time=3.0, output_interval=0.1,
                       output=["height", "velocity", "event_count"])
    sim = cosim.Simulation(model="bouncing_ball", method=DEFAULT)
    heights, counts = [sim.get_outputs()[0]], [0]
    for n in range(30):
        t = n * 0.1
        sim.do_step(t, (n + 1) * 0.1 - t)
        heights.append(sim.get_outputs()[0])
        counts.append(sim.stats["events"])
    assert np.array_equal(res["event_count"], counts)
    assert np.max(np.abs(res["height"] - heights)) <= 1e-12
    assert res["event_count"][-1] >= 3 and np.all(res["height"] >= -1e-9)  # bounced, never below
    jumps = np.diff(res["event_count"])
    assert jumps.max() >= 1 and res["time"][-1] == pytest.approx(3.0)  # steps completed with events


# -- bad input at build time -----------------------------------------------------------------------
def test_unknown_parameter_fails_the_build(tmp_path, capsys):
    out = tmp_path / "bad.fmu"
    assert cosim_main(["fmu", "build", "pendulum", "-o", str(out), "--param", "length=2"]) == 2
    err = capsys.readouterr().err
    assert "no parameter 'length'" in err and err.startswith("cosim: error:")
    assert not out.exists()
    assert cosim_main(["fmu", "build", "pendulum", "-o", str(out), "--name", "1bad"]) == 2
    assert "C identifier" in capsys.readouterr().err
    assert cosim_main(["fmu", "build", "no_such_model", "-o", str(out)]) == 2
    assert "unknown model" in capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "cosim", "fmu", "build", "pendulum", "-o", str(out),
                           "--method", "no-such-method"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown method 'no-such-method'" in proc.stderr
    assert not out.exists()


# -- libcosim co-simulation of two FMUs ------------------------------------------------------------
LIBCOSIM_RUN = textwrap.dedent("""
    import json
    from libcosimpy.CosimEnums import CosimVariableType
    from libcosimpy.CosimExecution import CosimExecution
    from libcosimpy.CosimLogging import CosimLogLevel, log_output_level
    from libcosimpy.CosimObserver import CosimObserver
    from libcosimpy.CosimSlave import CosimLocalSlave
    log_output_level(CosimLogLevel.ERROR)
    plant_path, ctrl_path, step_ns, n = {plant!r}, {ctrl!r}, {step_ns!r}, {n!r}
    ex = CosimExecution.from_step_size(step_ns)
    plant = CosimLocalSlave(fmu_path=plant_path, instance_name="plant")
    ctrl = CosimLocalSlave(fmu_path=ctrl_path, instance_name="controller")
    ip, ic = ex.add_local_slave(plant), ex.add_local_slave(ctrl)
    rp = {{v.name.decode(): v.reference for v in ex.slave_variables(ip)}}
    rc = {{v.name.decode(): v.reference for v in ex.slave_variables(ic)}}
    ex.connect_real_variables(ip, rp["angle"], ic, rc["pd.angle"])
    ex.connect_real_variables(ip, rp["angular_velocity"], ic, rc["pd.angular_velocity"])
    ex.connect_real_variables(ic, rc["pd.torque"], ip, rp["torque"])
    ex.real_initial_value(ic, rc["pd.reference"], 0.8)
    obs = CosimObserver.create_time_series()
    ex.add_observer(obs)
    obs.start_time_series(ip, rp["angle"], CosimVariableType.REAL)
    obs.start_time_series(ic, rc["pd.torque"], CosimVariableType.REAL)
    assert ex.step(n)
    t_ns, steps, angle = obs.time_series_real_samples(ip, rp["angle"], 0, n + 2)
    _, _, torque = obs.time_series_real_samples(ic, rc["pd.torque"], 0, n + 2)
    print(json.dumps({{"t_ns": list(t_ns), "angle": angle, "torque": torque}}))
""")


def test_libcosim_closed_loop_plant_and_pd_controller_fmus(pendulum_fmu, pd_fmu, tmp_path):
    step_ns, n = 10_000_000, 300  # 10 ms, 3 s
    script = LIBCOSIM_RUN.format(plant=str(pendulum_fmu), ctrl=str(pd_fmu), step_ns=step_ns, n=n)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    angle, torque = np.array(run["angle"]), np.array(run["torque"])
    k = len(angle)
    assert k >= n - 1 and run["t_ns"][:3] == [0, step_ns, 2 * step_ns]

    # (1) exactly the same coupling with two cosim.Simulation objects: libcosim's fixed-step
    # algorithm steps both slaves over [t_k, t_k+1] with the inputs transferred at t_k (Jacobi),
    # t_k = k*step_ns/1e9 and h_k = t_k+1 - t_k as libcosim converts its integer nanoseconds.
    plant = cosim.Simulation(model="pendulum", method=DEFAULT)
    ctrl = cosim.Simulation(model="fmu.examples:NoPlant", method="rk4", h=T_PD, blocks=[PD_BLOCK])
    ctrl.set_inputs({"pd.reference": 0.8})
    ref_angle, ref_torque = [plant.get_output_dict()["angle"]], [ctrl.get_output_dict()["pd.torque"]]
    for j in range(k - 1):
        po, co = plant.get_output_dict(), ctrl.get_output_dict()
        ctrl.set_inputs({"pd.angle": po["angle"], "pd.angular_velocity": po["angular_velocity"],
                         "pd.reference": 0.8})
        plant.set_inputs({"torque": co["pd.torque"]})
        t_j = (j * step_ns) / 1e9
        h_j = ((j + 1) * step_ns) / 1e9 - t_j
        plant.do_step(t_j, h_j)
        ctrl.do_step(t_j, h_j)
        ref_angle.append(plant.get_output_dict()["angle"])
        ref_torque.append(ctrl.get_output_dict()["pd.torque"])
    assert np.max(np.abs(angle - ref_angle)) <= 1e-12
    assert np.max(np.abs(torque - ref_torque)) <= 1e-12

    # (2) the closed loop behaves as the monolithic scenario (plant + the same discrete PD block in
    # one Simulation, run by cosim.scenario as `cosim run` does; its grid float(k/100) equals
    # libcosim's k*1e7/1e9, both correctly rounded).  The only difference is the coupling:
    # across FMUs the controller output reaches the plant one communication step later.
    scenario_file = tmp_path / "closed_loop.yaml"
    scenario_file.write_text(json.dumps({
        "name": "closed_loop", "model": "pendulum", "stop_time": (k - 1) * step_ns / 1e9,
        "communication_step": T_PD, "blocks": [PD_BLOCK],
        "connections": ["angle -> pd.angle", "angular_velocity -> pd.angular_velocity",
                        "pd.torque -> torque"],
        "inputs": {"pd.reference": {"type": "constant", "value": 0.8}}}))
    from cosim.scenario import Scenario
    result = Scenario.load(scenario_file).run()
    mono_angle = result.outputs[:, list(result.sim.output_names).index("angle")]
    assert len(mono_angle) == k
    print(f"libcosim vs scenario: max abs angle difference {np.max(np.abs(angle - mono_angle)):.3e} rad, "
          f"final {abs(angle[-1] - mono_angle[-1]):.3e} rad")
    assert np.max(np.abs(angle - mono_angle)) < 1e-2  # one-step (10 ms) loop delay
    assert abs(angle[-1] - mono_angle[-1]) < 1e-4  # same equilibrium
    assert abs(angle[0] - np.pi / 4) < 1e-15 and abs(angle[-1] - 0.8) < 0.2  # regulated towards 0.8


# -- parameters and solver settings through FMI --------------------------------------------------
def test_tunable_parameter_and_solver_setting_through_fmi(ball_fmu, pendulum_fmu):
    ball = Slave(ball_fmu, "ball", logging=True)
    sim = cosim.Simulation(model="bouncing_ball", method=DEFAULT)
    got, want = [], []
    for n in range(12):
        if n == 8:  # tunable: applied at the next communication point
            ball.set({"e": float("nan")})  # rejected: discarded, nothing changes
            with pytest.raises(FMICallException) as info:
                ball.fmu.doStep(n * 0.1, 0.1)
            assert info.value.status == fmi2Discard
            assert any("'e' must be finite" in m for _, _, m in ball.messages), ball.messages
            ball.set({"e": 2.0})  # outside the declared range [0, 1] (issue 14): discarded too
            with pytest.raises(FMICallException) as info:
                ball.fmu.doStep(n * 0.1, 0.1)
            assert info.value.status == fmi2Discard
            assert any("parameter 'e' must be in [0, 1], got 2.0" in m for _, _, m in ball.messages)
            ball.set({"e": 0.5})
            sim.set_parameter("e", 0.5)
        t = n * 0.1
        ball.fmu.doStep(t, (n + 1) * 0.1 - t)
        sim.do_step(t, (n + 1) * 0.1 - t)
        got.append(ball.get(["height", "velocity"]))
        want.append(sim.get_outputs()[:2])
    assert ball.get(["e"]) == [0.5]
    assert np.array_equal(np.array(got), np.array(want))
    ball.close()

    # fixed parameters and the method may change before initialization (String parameter)
    slave = Slave(pendulum_fmu, "bdf-run", params={"m": 2.0}, logging=False)
    slave.fmu.reset()
    slave.fmu.setupExperiment(startTime=0.0)
    slave.fmu.setString([slave.vr["solver.method"]], ["bdf"])
    slave.fmu.setReal([slave.vr["m"], slave.vr["solver.rtol"]], [2.0, 1e-7])
    slave.fmu.enterInitializationMode()
    slave.fmu.exitInitializationMode()
    _, rows = drive(slave, 0.0, 20)
    sim = cosim.Simulation(model="pendulum", method="bdf", params={"m": 2.0}, rtol=1e-7)
    t, ref = 0.0, []
    for _ in range(20):
        sim.set_inputs({"torque": float(np.sin(3.0 * t))})
        sim.do_step(t, 0.01)
        t += 0.01
        ref.append(sim.get_outputs())
    # bdf runs compiled in this process; the FMU runs its private package copy of the
    # same method (compiled or not): the two agree to 1e-10
    np.testing.assert_allclose(rows, np.array(ref), rtol=0, atol=1e-10)
    slave.close()


def test_bad_serialized_states_are_errors_at_deserialization_state_unchanged(pendulum_fmu, ball_fmu):
    """§2.1.8: a corrupt, truncated, empty, random or foreign serialized state is refused by
    fmi2DeSerializeFMUstate itself (fmi2Error), and the instance continues unchanged."""
    slave = Slave(pendulum_fmu, "corrupt", logging=True)
    reference = Slave(pendulum_fmu, "corrupt-reference")
    t, _ = drive(slave, 0.0, 3)
    drive(reference, 0.0, 3)
    good = slave.fmu.getFMUstate()
    blob = bytes(slave.fmu.serializeFMUstate(good))
    slave.fmu.freeFMUstate(good)
    flipped = bytearray(blob)
    flipped[len(blob) // 2] ^= 0xFF
    ball = Slave(ball_fmu, "foreign")
    ball_state = ball.fmu.getFMUstate()
    foreign = bytes(ball.fmu.serializeFMUstate(ball_state))
    ball.fmu.freeFMUstate(ball_state)
    ball.close()
    rng = np.random.default_rng(7)
    cases = {"corrupt": (bytes(flipped), "checksum mismatch"),
             "truncated": (blob[:len(blob) // 3], "truncated"),
             "empty": (b"", "too short"),
             "random": (rng.bytes(len(blob)), "bad magic"),
             "foreign": (foreign, "belongs to 'BouncingBall'")}
    for name, (data, text) in cases.items():
        slave.messages.clear()
        with pytest.raises(FMICallException) as info:
            slave.fmu.deSerializeFMUstate(data)
        assert info.value.status == FMI2_ERROR, name
        assert any(st == FMI2_ERROR and text in m for st, _, m in slave.messages), (name, slave.messages)
    state = slave.fmu.getFMUstate()
    assert bytes(slave.fmu.serializeFMUstate(state)) == blob  # unchanged
    slave.fmu.freeFMUstate(state)
    _, got = drive(slave, t, 5)
    _, want = drive(reference, t, 5)
    assert np.array_equal(got, want)
    slave.close()
    reference.close()


FRAGILE_MODEL = textwrap.dedent('''
    """A user model whose right-hand side fails for |u| > 10 (a stand-in for divergence)."""
    import numpy as np
    from cosim.models.base import FirstOrderModel, Parameter, Signal


    class Fragile(FirstOrderModel):
        name = "fragile"
        states = ("x",)
        parameters = (Parameter("k", 2.0, "1/s", "decay rate"),)
        inputs = (Signal("u", "1", "drive"),)
        outputs = (Signal("x", "1", "state"),)

        def initial_state(self):
            return np.array([1.0])

        def rhs(self, t, x, u):
            if abs(u[0]) > 10.0:
                raise FloatingPointError(f"rhs undefined for u={float(u[0])!r}")
            return -self.params["k"] * x + u[0]

        def output_values(self, t, y, u):
            return np.array([y[0]])
''')

SUBPROCESS_FRAGILE = textwrap.dedent("""
    import json, os, sys
    from fmpy import extract, read_model_description
    from fmpy.fmi1 import FMICallException
    from fmpy.fmi2 import (FMU2Slave, defaultCallbacks, fmi2CallbackFunctions,
                           fmi2CallbackLoggerTYPE)
    path = {path!r}
    md = read_model_description(path)
    unzip = extract(path)
    vr = {{v.name: v.valueReference for v in md.modelVariables}}
    messages = []
    cb = fmi2CallbackFunctions()
    cb.logger = fmi2CallbackLoggerTYPE(lambda e, i, s, c, m: messages.append((s, m.decode())))
    cb.allocateMemory, cb.freeMemory = defaultCallbacks.allocateMemory, defaultCallbacks.freeMemory
    def make(name):
        f = FMU2Slave(guid=md.guid, unzipDirectory=unzip,
                      modelIdentifier=md.coSimulation.modelIdentifier, instanceName=name)
        f.instantiate(callbacks=cb, loggingOn=True)
        f.setupExperiment(startTime=0.0)
        f.enterInitializationMode()
        f.exitInitializationMode()
        return f
    a, b = make("a"), make("b")
    out = {{"statuses": [], "a": [], "b": []}}
    t = 0.0
    for k in range(10):
        for f in (a, b):
            f.setReal([vr["u"]], [1.0])
        if k == 4:  # a diverging step on a only, then the master retries with a valid input
            a.setReal([vr["u"]], [100.0])
            try:
                a.doStep(t, 0.1)
                out["statuses"].append(0)
            except FMICallException as exc:
                out["statuses"].append(exc.status)
            out["last_successful"] = a.getRealStatus(2)
            a.setReal([vr["u"]], [1.0])
        a.doStep(t, 0.1)
        b.doStep(t, 0.1)
        t += 0.1
        out["a"].append(a.getReal([vr["x"]])[0])
        out["b"].append(b.getReal([vr["x"]])[0])
    out["t"] = t
    out["messages"] = [m for s, m in messages]
    out["terminated_after_retry"] = bool(a.getBooleanStatus(3))
    out["model_file"] = next(m.__file__ for n, m in sys.modules.items() if n.endswith(".fragile_model"))
    out["top_level"] = "fragile_model" in sys.modules or "cosim" in sys.modules
    out["unzip"] = str(unzip)
    print(json.dumps(out))
""")


def test_non_converging_step_is_discarded_and_user_model_is_bundled(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "fragile_model.py").write_text(FRAGILE_MODEL)
    monkeypatch.syspath_prepend(str(src))
    out = tmp_path / "Fragile.fmu"
    assert cosim_main(["fmu", "build", "fragile_model:Fragile", "-o", str(out), "--method", "dopri5",
                       "--param", "k=3"]) == 0
    assert validate_fmu(str(out)) == []
    run_dir = tmp_path / "elsewhere"  # the user module is importable only from the FMU
    run_dir.mkdir()
    proc = subprocess.run([sys.executable, "-c", SUBPROCESS_FRAGILE.format(path=str(out))],
                          capture_output=True, text=True, timeout=120, cwd=str(run_dir),
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["statuses"] == [fmi2Discard]
    assert res["last_successful"] == pytest.approx(0.4, abs=1e-15)
    assert any("ConvergenceError" in m and "u=100.0" in m for m in res["messages"]), res["messages"]
    assert res["a"] == res["b"]  # the discarded step left no trace
    assert res["terminated_after_retry"] is False and res["top_level"] is False
    assert os.path.realpath(res["model_file"]).startswith(os.path.realpath(res["unzip"]))
    x_exact = 1.0 / 3.0 + (1.0 - 1.0 / 3.0) * np.exp(-3.0 * 1.0)  # x' = -3x + 1, x(0) = 1
    assert res["a"][-1] == pytest.approx(x_exact, rel=1e-4)


def test_invalid_parameter_is_error_at_initialization_until_reset(pendulum_fmu, tmp_path):
    """§2.1.3: a parameter the model rejects (l = -1, g = NaN) makes
    fmi2ExitInitializationMode return fmi2Error naming it; fmi2DoStep is then fmi2Error
    until fmi2Reset; `fmpy simulate` fails visibly (non-zero exit, the message)."""
    for params, text in (({"l": -1.0}, "'l'"), ({"g": float("nan")}, "'g' must be finite"),
                         ({"m": 1e-300}, "'m' must be in [1e-12, 1e+12], got 1e-300"),
                         ({"g": -1e300}, "'g' must be at most 1e+12 in size, got -1e+300")):
        slave = Slave(pendulum_fmu, "bad-parameter", logging=True, initialize=False)
        slave.fmu.setupExperiment(startTime=0.0)
        slave.set(params)
        slave.fmu.enterInitializationMode()
        with pytest.raises(FMICallException) as info:
            slave.fmu.exitInitializationMode()
        assert info.value.status == FMI2_ERROR
        assert any(st == FMI2_ERROR and "fmi2ExitInitializationMode" in m and text in m
                   for st, _, m in slave.messages), slave.messages
        with pytest.raises(FMICallException) as info:
            slave.fmu.doStep(0.0, 0.01)
        assert info.value.status == FMI2_ERROR
        slave.fmu.reset()  # fmi2Reset recovers: start values again
        slave.initialize()
        _, rows = drive(slave, 0.0, 3)
        assert np.all(np.isfinite(rows))
        slave.close()
    proc = subprocess.run([sys.executable, "-m", "fmpy", "simulate", str(pendulum_fmu),
                           "--start-values", "l", "-1", "--output-file", str(tmp_path / "out.csv")],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode != 0
    assert "fmi2ExitInitializationMode" in proc.stdout + proc.stderr
    assert not (tmp_path / "out.csv").exists()


def test_variable_names_and_configuration_parameters(tmp_path):
    from fmu.builder import fmi_name
    assert fmi_name("angle") == "angle" and fmi_name("pd.torque") == "pd.torque"  # 1:1 when valid
    assert fmi_name("joint angle") == "joint_angle" and fmi_name("2nd") == "_2nd"
    assert fmi_name("a-b.c d") == "a_b.c_d"
    # LTI matrices are configuration: given at build time, baked into the FMU
    out = tmp_path / "Lti.fmu"
    assert cosim_main(["fmu", "build", "lti", "-o", str(out), "--method", "state-transition",
                       "--param", "A=[[0,1],[-9,-0.2]]", "--param", "x0=[0.5,0]"]) == 0
    assert validate_fmu(str(out)) == []
    res = simulate_fmu(str(out), stop_time=2.0, output_interval=0.01, output=["position", "velocity"])
    sim = cosim.Simulation(model="lti", method="state-transition",
                           params={"A": "[[0,1],[-9,-0.2]]", "x0": "[0.5,0]"})
    rows = [sim.get_outputs()]
    for n in range(200):
        t = n * 0.01
        sim.do_step(t, (n + 1) * 0.01 - t)
        rows.append(sim.get_outputs())
    rows = np.array(rows)
    assert np.max(np.abs(res["position"] - rows[:, 0])) <= 1e-12
    assert np.max(np.abs(res["velocity"] - rows[:, 1])) <= 1e-12


SCENARIO_YAML = textwrap.dedent("""
    name: pd_pendulum
    description: pendulum held at 0.8 rad by a discrete PD (state feedback on angle, rate)
    model: pendulum
    params: {l: 1.2}
    method: generalized-alpha
    rtol: 1.0e-7
    stop_time: 1.5
    communication_step: 0.01
    blocks:
      - {type: state_feedback, name: pd, sample_time: 0.02, K: [[40.0, 8.0]], reference_gain: [[40.0]],
         inputs: [angle, angular_velocity, reference], outputs: [torque]}
    connections: ["angle -> pd.angle", "angular_velocity -> pd.angular_velocity", "pd.torque -> torque"]
    inputs:
      pd.reference: {type: constant, value: 0.8}
""")


def test_scenario_fmu_plant_with_controller_matches_scenario_run(tmp_path):
    scenario_module = pytest.importorskip("cosim.scenario")
    path = tmp_path / "pd_pendulum.yaml"
    path.write_text(SCENARIO_YAML)
    out = tmp_path / "PdPendulum.fmu"
    assert cosim_main(["fmu", "build", str(path), "-o", str(out)]) == 0
    assert validate_fmu(str(out)) == []
    md = read_model_description(str(out))
    var = {v.name: v for v in md.modelVariables}
    assert md.coSimulation.modelIdentifier == "pd_pendulum"
    assert float(var["pd.reference"].start) == 0.8 and var["pd.reference"].causality == "input"
    assert var["pd.torque"].causality == "output" and var["pd.torque"].variability == "discrete"
    assert "torque" not in var  # driven by the controller inside the FMU
    assert float(var["l"].start) == 1.2 and float(var["solver.rtol"].start) == 1e-7
    assert float(md.defaultExperiment.stopTime) == 1.5 and float(md.defaultExperiment.stepSize) == 0.01

    scenario = scenario_module.Scenario.load(path)
    result = scenario.run()  # what `cosim run` executes
    slave = Slave(out, "scenario")
    names = list(result.sim.output_names)
    rows, t = [slave.get(names)], scenario.start_time
    for t_next in scenario.communication_points():  # the scenario's own grid
        h = t_next - t
        slave.fmu.doStep(t, h)
        t = t + h
        rows.append(slave.get(names))
    slave.close()
    assert np.max(np.abs(np.array(rows) - result.outputs)) <= 1e-12
    assert abs(result.outputs[-1, 0] - 0.8) < 0.2  # regulated towards the reference


C_HOST = r"""
/* Minimal FMI 2.0 co-simulation host without Python: dlopen the FMU binary, step it. */
#include <dlfcn.h>
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
    fprintf(stderr, "[%s status=%d %s] ", name, status, cat ? cat : "");
    vfprintf(stderr, msg, ap); fprintf(stderr, "\n"); va_end(ap);
}

typedef fmi2Component (*instantiate_t)(const char *, int, const char *, const char *,
                                       const fmi2CallbackFunctions *, int, int);
typedef int (*setup_t)(fmi2Component, int, double, double, int, double);
typedef int (*plain_t)(fmi2Component);
typedef int (*step_t)(fmi2Component, double, double, int);
typedef int (*getreal_t)(fmi2Component, const fmi2ValueReference *, size_t, double *);
typedef void (*free_t)(fmi2Component);
#define LOAD(type, name) type name = (type)dlsym(lib, #name); if (!name) { fprintf(stderr, "missing %s\n", #name); return 2; }

int main(int argc, char **argv) {
    /* argv: library guid resourceURI n h vr_out */
    if (argc < 7) return 2;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    LOAD(instantiate_t, fmi2Instantiate)
    LOAD(setup_t, fmi2SetupExperiment)
    LOAD(plain_t, fmi2EnterInitializationMode)
    LOAD(plain_t, fmi2ExitInitializationMode)
    LOAD(step_t, fmi2DoStep)
    LOAD(getreal_t, fmi2GetReal)
    LOAD(plain_t, fmi2Terminate)
    LOAD(free_t, fmi2FreeInstance)
    fmi2CallbackFunctions cb = {logger, calloc, free, NULL, NULL};
    fmi2Component c = fmi2Instantiate("chost", 1, argv[2], argv[3], &cb, 0, 1);
    if (!c) { fprintf(stderr, "instantiate failed\n"); return 3; }
    int n = atoi(argv[4]); double h = atof(argv[5]); fmi2ValueReference vr = (fmi2ValueReference)atoi(argv[6]);
    if (fmi2SetupExperiment(c, 0, 0.0, 0.0, 0, 0.0) || fmi2EnterInitializationMode(c) || fmi2ExitInitializationMode(c)) return 4;
    double t = 0.0, y;
    for (int k = 0; k < n; k++) {
        int s = fmi2DoStep(c, t, h, 1);
        if (s) { fprintf(stderr, "doStep status %d\n", s); return 5; }
        t += h;
        fmi2GetReal(c, &vr, 1, &y);
        printf("%.17g\n", y);
    }
    fmi2Terminate(c);
    fmi2FreeInstance(c);
    return 0;
}
"""


def test_fmu_runs_in_a_c_host_with_libpython_preloaded(pendulum_fmu, tmp_path):
    """A non-Python importer that preloads libpython (LD_PRELOAD) with PYTHONHOME/PYTHONPATH of
    a Python with numpy + scipy: the binary uses that library and starts its interpreter (a
    host with no Python at all: tests/test_fmu_hosts.py)."""
    import shutil
    import sysconfig
    import zipfile
    gcc = shutil.which("gcc") or shutil.which("cc")
    libdir, ldlibrary = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    libpython = Path(libdir or "", ldlibrary or "")
    if not gcc or not str(ldlibrary).endswith(".so") or not libpython.exists():
        pytest.skip("needs a C compiler and a shared libpython")
    (tmp_path / "host.c").write_text(C_HOST)
    subprocess.run([gcc, "-O1", "-o", str(tmp_path / "host"), str(tmp_path / "host.c"), "-ldl"],
                   check=True, capture_output=True, timeout=120)
    unzip = tmp_path / "fmu"
    zipfile.ZipFile(pendulum_fmu).extractall(unzip)
    md = read_model_description(str(pendulum_fmu))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    site = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    env = {"PATH": os.environ.get("PATH", ""), "LD_PRELOAD": str(libpython),
           "PYTHONHOME": sys.base_prefix, "PYTHONPATH": site}  # numpy/scipy only; no cosim here
    args = [str(tmp_path / "host"), str(unzip / "binaries" / "linux64" / "Pendulum.so"), md.guid,
            (unzip / "resources").as_uri(), "20", "0.01", str(vr["angle"])]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [float(x) for x in proc.stdout.split()]
    sim = cosim.Simulation(model="pendulum", method=DEFAULT)
    t, want = 0.0, []
    for _ in range(20):
        sim.do_step(t, 0.01)
        t += 0.01
        want.append(sim.get_output_dict()["angle"])
    assert got == want  # bit-identical to cosim.Simulation


SHIPPED_SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("scenario_path", SHIPPED_SCENARIOS, ids=[p.stem for p in SHIPPED_SCENARIOS])
def test_shipped_scenario_fmu_matches_cosim_run(scenario_path, fmu_dir, tmp_path):
    """Each shipped scenario as one FMU, driven by the master on the scenario's grid with the
    scenario's input signals (ZOH at step start), equals `cosim run --out` bit for bit."""
    import csv as csv_module
    from cosim.scenario import Scenario
    scenario = Scenario.load(scenario_path)
    t_end = min(scenario.stop_time, scenario.start_time + 1.0)
    out = fmu_dir / f"scenario_{scenario_path.stem}.fmu"
    assert cosim_main(["fmu", "build", str(scenario_path), "-o", str(out)]) == 0
    assert validate_fmu(str(out)) == []
    table = tmp_path / "run.csv"
    assert cosim_main(["run", str(scenario_path), "--t-end", repr(t_end), "--out", str(table)]) == 0
    with open(table) as fh:
        rows = list(csv_module.reader(fh))
    header, data = rows[0], np.array(rows[1:], dtype=float)

    slave = Slave(out, scenario_path.stem)
    signals = {n: s for n, s in scenario.signals.items() if n in slave.vr and not getattr(s, "exact", False)}
    outputs = [n for n in header if n in slave.vr and slave.md.modelVariables[slave.vr[n]].causality == "output"]
    assert outputs, header
    got, t = [slave.get(outputs)], scenario.start_time
    for t_next in scenario.communication_points(t_end):
        if signals:
            slave.set({n: s.value_at(t) for n, s in signals.items()})
        h = t_next - t
        slave.fmu.doStep(t, h)
        t = t + h
        got.append(slave.get(outputs))
    events = slave.fmu.getInteger([slave.vr["event_count"]])[0]
    slave.close()
    want = data[:, [header.index(n) for n in outputs]]
    assert np.array_equal(np.array(got), want)
    if scenario_path.stem == "bouncing_ball":
        assert events > 0


# -- FMI 2.0.4 contract (issue 15) --------------------------------------------------------------
def _run_pendulum(path, tolerance=None, n=50, h=0.01):
    slave = Slave(path, "tol", initialize=False)
    if tolerance is None:
        slave.fmu.setupExperiment(startTime=0.0)
    else:
        slave.fmu.setupExperiment(tolerance=tolerance, startTime=0.0)
    slave.fmu.enterInitializationMode()
    slave.fmu.exitInitializationMode()
    _, rows = drive(slave, 0.0, n, h)
    slave.close()
    return rows


def test_setup_experiment_tolerance_is_the_relative_tolerance(pendulum_fmu):
    """§2.1.6: fmi2SetupExperiment(toleranceDefined, tolerance) sets the step-size control's
    relative tolerance: the FMU equals cosim.Simulation with rtol = tolerance, bit for bit
    (communication steps of 0.1 s: in steps of 0.01 s dopri5's error is far below either
    tolerance and the two runs agree to 3e-14)."""
    def reference(rtol):
        sim = cosim.Simulation(model="pendulum", method=DEFAULT, rtol=rtol)
        t, rows = 0.0, []
        for _ in range(50):
            sim.set_inputs({"torque": float(np.sin(3.0 * t))})
            sim.do_step(t, 0.1)
            t += 0.1
            rows.append(sim.get_outputs())
        return np.array(rows)
    loose = _run_pendulum(pendulum_fmu, tolerance=1e-2, h=0.1)
    assert np.array_equal(loose, reference(1e-2))
    assert np.array_equal(_run_pendulum(pendulum_fmu, h=0.1), reference(1e-6))
    assert np.max(np.abs(loose - reference(1e-6))) > 1e-5  # and it matters
    slave = Slave(pendulum_fmu, "bad-tol", initialize=False, logging=True)
    with pytest.raises(FMICallException) as info:
        slave.fmu.setupExperiment(tolerance=-1.0, startTime=0.0)
    assert info.value.status == FMI2_ERROR
    assert any("tolerance" in m for _, _, m in slave.messages)
    slave.fmu.freeInstance()


def test_wrong_guid_is_refused(pendulum_fmu):
    """§2.1.5: fmi2Instantiate checks fmuGUID; a foreign modelDescription gets no instance."""
    md = read_model_description(str(pendulum_fmu))
    messages = []
    cb = fmi2CallbackFunctions()
    cb.logger = fmi2CallbackLoggerTYPE(lambda e, i, s, c, m: messages.append((s, m.decode())))
    cb.allocateMemory, cb.freeMemory = defaultCallbacks.allocateMemory, defaultCallbacks.freeMemory
    fmu = FMU2Slave(guid="{00000000-0000-0000-0000-000000000000}", unzipDirectory=extract(str(pendulum_fmu)),
                    modelIdentifier=md.coSimulation.modelIdentifier, instanceName="wrong-guid")
    with pytest.raises(Exception, match="instantiate"):
        fmu.instantiate(callbacks=cb)
    assert any(s == FMI2_ERROR and "fmuGUID" in m and md.guid in m for s, m in messages), messages


def test_unknown_value_reference_and_fixed_parameter_after_init_are_errors(pendulum_fmu):
    """§2.1.7: an unknown value reference, the wrong type, an output, or a fixed parameter
    after initialization is fmi2Error and changes nothing (all or nothing)."""
    slave = Slave(pendulum_fmu, "vr", logging=True)
    t, _ = drive(slave, 0.0, 3)
    state = slave.fmu.getFMUstate()
    before = bytes(slave.fmu.serializeFMUstate(state))
    slave.fmu.freeFMUstate(state)
    values = slave.get(["l", "torque", "solver.rtol"])
    torque, l_vr, angle = slave.vr["torque"], slave.vr["l"], slave.vr["angle"]
    calls = [lambda: slave.fmu.getReal([999]),
             lambda: slave.fmu.getReal([angle, 999]),
             lambda: slave.fmu.setReal([torque, 999], [5.0, 1.0]),
             lambda: slave.fmu.setReal([angle], [1.0]),  # an output
             lambda: slave.fmu.getInteger([999]),
             lambda: slave.fmu.getInteger([angle]),  # a Real
             lambda: slave.fmu.setInteger([slave.vr["event_count"]], [3]),
             lambda: slave.fmu.getBoolean([0]),
             lambda: slave.fmu.getString([999]),
             lambda: slave.fmu.setReal([torque, l_vr], [5.0, 2.0]),  # fixed after init
             lambda: slave.fmu.setReal([slave.vr["solver.rtol"]], [1e-3]),
             lambda: slave.fmu.setString([slave.vr["solver.method"]], ["bdf"])]
    logs = []
    for k, call in enumerate(calls):
        slave.messages.clear()
        with pytest.raises(FMICallException) as info:
            call()
        assert info.value.status == FMI2_ERROR, k
        logs.append(" ".join(m for s, _, m in slave.messages if s == FMI2_ERROR))
    assert "valueReference 999 is not a Real variable" in logs[0]
    assert "is an output" in logs[3] and "valueReference 999 is not an Integer" in logs[4]
    assert "'l' is a fixed parameter" in logs[9] and "'solver.method' is a fixed parameter" in logs[11]
    assert slave.get(["l", "torque", "solver.rtol"]) == values  # unchanged
    state = slave.fmu.getFMUstate()
    assert bytes(slave.fmu.serializeFMUstate(state)) == before
    slave.fmu.freeFMUstate(state)
    slave.close()


def test_terminal_event_discards_the_step_and_terminates(ball_fmu):
    """§4.2.3: the bouncing ball's terminal event ends the step at the event: fmi2Discard,
    fmi2LastSuccessfulTime = event time, fmi2Terminated true, outputs at the event; a later
    fmi2DoStep is fmi2Error (state unchanged) until fmi2SetFMUstate or fmi2Reset."""
    ball = Slave(ball_fmu, "terminal", logging=True)
    sim = cosim.Simulation(model="bouncing_ball", method=DEFAULT)
    t, h = 0.0, 0.1
    saved = None
    for n in range(100):
        if n == 5:
            saved = ball.fmu.getFMUstate()
        sim.do_step(t, h)
        try:
            ball.fmu.doStep(t, h)
        except FMICallException as exc:
            assert exc.status == fmi2Discard
            break
        assert not ball.fmu.getBooleanStatus(FMI2_TERMINATED)
        t += h
    else:
        pytest.fail("the ball never stopped")
    assert sim.stopped and t < sim.stop_time <= t + h
    assert ball.fmu.getBooleanStatus(FMI2_TERMINATED)
    assert ball.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == sim.stop_time
    assert ball.get(["height", "velocity"]) == sim.get_outputs()[:2].tolist()
    assert any(s == fmi2Discard and "terminal event" in m for s, _, m in ball.messages)
    outputs = ball.get(["height", "velocity"])
    with pytest.raises(FMICallException) as info:
        ball.fmu.doStep(t + h, h)
    assert info.value.status == FMI2_ERROR
    assert ball.get(["height", "velocity"]) == outputs and ball.fmu.getBooleanStatus(FMI2_TERMINATED)
    ball.fmu.setFMUstate(saved)  # back before the stop: steps again, not terminated
    ball.fmu.freeFMUstate(saved)
    assert not ball.fmu.getBooleanStatus(FMI2_TERMINATED)
    ball.fmu.doStep(0.5, h)
    ball.close()


def test_calls_in_the_wrong_fmi_state_are_errors_state_unchanged(pendulum_fmu):
    """§4.2.4 state machine: each call outside the states that allow it is fmi2Error with one
    log line naming the call and the state, and changes nothing (outputs, time, serialized
    state); the instance goes on.  Also the calls the binary answers without Python
    (fmi2SetReal of an input, a native fmi2DoStep) after fmi2Terminate."""
    slave = Slave(pendulum_fmu, "state-machine", logging=True, initialize=False)
    fmu, torque, l_vr = slave.fmu, slave.vr["torque"], slave.vr["l"]

    def refused(call, name, state):
        slave.messages.clear()
        with pytest.raises(FMICallException) as info:
            call()
        assert info.value.status == FMI2_ERROR, name
        errors = [m for s, _, m in slave.messages if s == FMI2_ERROR]
        assert len(errors) == 1 and "\n" not in errors[0], errors
        assert errors[0].startswith(f"{name}: InvalidInputError: {name} is not allowed in state "
                                    f"{state}"), errors
        assert errors[0].endswith("(FMI 2.0.4 §4.2.4); nothing changed"), errors

    refused(lambda: fmu.doStep(0.0, 0.01), "fmi2DoStep", "instantiated")
    refused(fmu.exitInitializationMode, "fmi2ExitInitializationMode", "instantiated")
    refused(fmu.terminate, "fmi2Terminate", "instantiated")
    refused(lambda: fmu.getBooleanStatus(FMI2_TERMINATED), "fmi2GetBooleanStatus", "instantiated")
    fmu.setupExperiment(startTime=0.0)
    fmu.enterInitializationMode()
    refused(lambda: fmu.setupExperiment(startTime=1.0), "fmi2SetupExperiment", "initializationMode")
    refused(fmu.enterInitializationMode, "fmi2EnterInitializationMode", "initializationMode")
    refused(lambda: fmu.doStep(0.0, 0.01), "fmi2DoStep", "initializationMode")
    fmu.exitInitializationMode()
    t, _ = drive(slave, 0.0, 5)
    state = fmu.getFMUstate()
    before = (bytes(fmu.serializeFMUstate(state)), slave.get(PENDULUM_OUT + ["torque", "l"]),
              fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME))
    for call, name in ((lambda: fmu.setupExperiment(startTime=0.0), "fmi2SetupExperiment"),
                       (fmu.enterInitializationMode, "fmi2EnterInitializationMode"),
                       (fmu.exitInitializationMode, "fmi2ExitInitializationMode")):
        refused(call, name, "stepComplete")
    with pytest.raises(FMICallException):  # a non-tunable parameter after initialization
        fmu.setReal([l_vr], [2.0])
    after = fmu.getFMUstate()
    assert (bytes(fmu.serializeFMUstate(after)), slave.get(PENDULUM_OUT + ["torque", "l"]),
            fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME)) == before
    fmu.freeFMUstate(after)
    fmu.terminate()
    outputs = slave.get(PENDULUM_OUT + ["torque"])
    refused(lambda: fmu.doStep(t, 0.01), "fmi2DoStep", "terminated")
    refused(lambda: fmu.setReal([torque], [1.0]), "fmi2SetReal", "terminated")  # in the binary
    refused(lambda: fmu.setReal([torque, l_vr], [1.0, 2.0]), "fmi2SetReal", "terminated")
    refused(lambda: fmu.setString([slave.vr["solver.method"]], ["bdf"]), "fmi2SetString",
            "terminated")
    refused(fmu.terminate, "fmi2Terminate", "terminated")
    assert slave.get(PENDULUM_OUT + ["torque"]) == outputs
    assert fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME) == before[2]
    fmu.setFMUstate(state)  # back to stepComplete at t: the run goes on as before
    fmu.freeFMUstate(state)
    _, rows = drive(slave, t, 3)
    reference = Slave(pendulum_fmu, "state-machine-reference")
    t_ref, _ = drive(reference, 0.0, 5)
    _, rows_ref = drive(reference, t_ref, 3)
    assert np.array_equal(rows, rows_ref)
    reference.close()
    slave.close()


def test_model_structure_and_direct_feedthrough(pendulum_fmu, pd_fmu):
    """§2.2.8: <Outputs> lists, per output, the inputs it depends on directly (found from the
    model: the pendulum's rod force depends on the applied forces fx, fy; angle and rate on no
    input); such an output is recomputed by fmi2GetReal right after fmi2SetReal (§4.2.1)."""
    md = read_model_description(str(pendulum_fmu))
    deps = {u.variable.name: sorted(d.name for d in (u.dependencies or [])) for u in md.outputs}
    assert deps == {"angle": [], "angular_velocity": [], "rod_force": ["fx", "fy"], "event_count": []}
    init = {u.variable.name: [d.name for d in (u.dependencies or [])] for u in md.initialUnknowns}
    assert {"fx", "fy", "l", "m"} <= set(init["rod_force"]) and "torque" not in init["rod_force"]
    pd = read_model_description(str(pd_fmu))
    assert all(not u.dependencies for u in pd.outputs)  # block outputs are held: no feedthrough

    slave = Slave(pendulum_fmu, "feedthrough", initialize=False)
    slave.fmu.setupExperiment(startTime=0.0)
    slave.fmu.enterInitializationMode()
    slave.set({"fx": 3.0})
    in_init = slave.get(["rod_force"])[0]
    slave.fmu.exitInitializationMode()
    t, _ = drive(slave, 0.0, 5)
    slave.set({"fx": -2.0, "fy": 1.0})
    between = slave.get(["angle", "rod_force"])
    sim = cosim.Simulation(model="pendulum", method=DEFAULT)
    sim.set_inputs({"fx": 3.0})
    assert in_init == sim.get_output_dict()["rod_force"]
    tt = 0.0
    for _ in range(5):
        sim.set_inputs({"torque": float(np.sin(3.0 * tt)), "fx": 3.0})
        sim.do_step(tt, 0.01)
        tt += 0.01
    sim.set_inputs({"torque": float(np.sin(3.0 * (tt - 0.01))), "fx": -2.0, "fy": 1.0})
    assert between == [sim.get_output_dict()["angle"], sim.get_output_dict()["rod_force"]]
    assert abs(between[1] - in_init) > 0.1
    slave.close()


def test_inputs_and_outputs_in_the_binary_follow_every_state_change(pendulum_fmu):
    """fmi2SetReal of inputs and fmi2GetReal of inputs and computed outputs run in the FMU
    binary on a buffer shared with the slave (fmu/native/cosim_fmi2.cpp): mixed reads, a
    NaN input (fmi2Error at a feedthrough read, never a stale output), an FMU-state restore
    and fmi2Reset all give what the simulation gives."""
    slave = Slave(pendulum_fmu, "buffer")
    names = ["torque", "rod_force", "fx", "angle", "fy"]
    sim = cosim.Simulation(model="pendulum", method=DEFAULT)

    def want():
        d = dict(sim.get_output_dict(), **dict(zip(sim.input_names, sim.get_inputs().tolist())))
        return [d[n] for n in names]

    start = slave.get(names)
    assert start == want()
    slave.fmu.setReal([slave.vr["fx"], slave.vr["torque"]], [2.0, 0.5])
    sim.set_inputs({"fx": 2.0, "torque": 0.5})
    assert slave.get(names) == want() and slave.get(["fx"]) == [2.0]
    slave.fmu.doStep(0.0, 0.01)
    sim.do_step(0.0, 0.01)
    after_step = slave.get(names)
    assert after_step == want()
    state = slave.fmu.getFMUstate()
    slave.set({"fx": float("nan")})
    assert np.isnan(slave.get(["fx"])[0])  # the held input itself can be read
    with pytest.raises(FMICallException) as info:
        slave.get(["angle", "rod_force"])  # computed with a NaN input: fmi2Error
    assert info.value.status == FMI2_ERROR
    slave.fmu.setFMUstate(state)  # inputs and outputs of that state
    assert slave.get(names) == after_step
    slave.fmu.freeFMUstate(state)
    slave.fmu.reset()  # a new slave object: the binary binds the new buffer
    slave.initialize()
    assert slave.get(names) == start
    slave.set({"fy": -1.0})
    sim = cosim.Simulation(model="pendulum", method=DEFAULT)
    sim.set_inputs({"fy": -1.0})
    assert slave.get(names) == want()
    slave.close()


def test_lti_builds_without_method(tmp_path):
    out = tmp_path / "X.fmu"
    assert cosim_main(["fmu", "build", "lti", "-o", str(out)]) == 0
    md = read_model_description(str(out))
    assert {v.name: v.start for v in md.modelVariables}["solver.method"] == "state-transition"
    assert validate_fmu(str(out)) == []


MISSING_SCIPY = textwrap.dedent("""
    import json, sys
    class Block:  # this host has no scipy: its import fails as on a machine without it
        def find_spec(self, name, path=None, target=None):
            if name == "scipy" or name.startswith("scipy."):
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
    sys.meta_path.insert(0, Block())
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave, defaultCallbacks, fmi2CallbackFunctions, fmi2CallbackLoggerTYPE
    md = read_model_description({path!r})
    messages = []
    cb = fmi2CallbackFunctions()
    cb.logger = fmi2CallbackLoggerTYPE(lambda e, i, s, c, m: messages.append((s, m.decode())))
    cb.allocateMemory, cb.freeMemory = defaultCallbacks.allocateMemory, defaultCallbacks.freeMemory
    fmu = FMU2Slave(guid=md.guid, unzipDirectory=extract({path!r}),
                    modelIdentifier=md.coSimulation.modelIdentifier, instanceName="no-scipy")
    try:
        fmu.instantiate(callbacks=cb)
        ok = True
    except Exception:
        ok = False
    print(json.dumps({{"instantiated": ok, "messages": messages}}))
""")


def test_missing_scipy_on_the_host_is_an_error_naming_it(pendulum_fmu, tmp_path):
    proc = subprocess.run([sys.executable, "-c", MISSING_SCIPY.format(path=str(pendulum_fmu))],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["instantiated"] is False
    assert any(s == FMI2_ERROR and "this FMU cannot run in this Python" in m
               and "scipy>=1.11 is missing" in m for s, m in res["messages"]), res["messages"]


# -- isolation: the code of each FMU is private to it (fmu/bundle.py) --------------------------------
OSCILLATOR_MODEL = textwrap.dedent('''
    """A user model: damped oscillator x'' = -w^2 x - 2 z w x' + u (first order form)."""
    import numpy as np
    from cosim.models.base import FirstOrderModel, Parameter, Signal


    class Oscillator(FirstOrderModel):
        name = "oscillator"
        states = ("x", "v")
        parameters = (Parameter("w", 3.0, "rad/s", "natural frequency"),
                      Parameter("z", 0.1, "1", "damping ratio"))
        inputs = (Signal("u", "1", "force"),)
        outputs = (Signal("x", "1", "position"), Signal("a", "1", "acceleration"))

        def initial_state(self):
            return np.array([1.0, 0.0])

        def _a(self, x, u):
            w, z = self.params["w"], self.params["z"]
            return -w * w * x[0] - 2.0 * z * w * x[1] + u[0]

        def rhs(self, t, x, u):
            return np.array([x[1], self._a(x, u)])

        def rhs_jacobian(self, t, x, u):
            w, z = self.params["w"], self.params["z"]
            return np.array([[0.0, 1.0], [-w * w, -2.0 * z * w]])

        def output_values(self, t, y, u):
            return np.array([y[0], self._a(y, u)])
''')

ISOLATION_HOST = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, {src!r})
    import cosim  # the host's own cosim, imported before any FMU
    import fragile_model, oscillator_model
    from fmpy import extract, read_model_description, simulate_fmu
    from fmpy.fmi2 import FMU2Slave
    host_cosim = cosim.__file__
    out = {{}}
    # two different user-model FMUs one after the other (fmpy deletes each unzip folder)
    for key, path, model, method in (("fragile", {fragile!r}, "fragile_model:Fragile", "dopri5"),
                                     ("oscillator", {osc!r}, "oscillator_model:Oscillator", "rk4")):
        res = simulate_fmu(path, stop_time=1.0, output_interval=0.1)
        sim = cosim.Simulation(model=model, method=method, params={{"k": 3.0}} if key == "fragile" else None,
                               h=0.01 if method == "rk4" else None)
        ref = [sim.get_outputs()[0]]
        for n in range(10):
            sim.do_step(n * 0.1, (n + 1) * 0.1 - n * 0.1)
            ref.append(sim.get_outputs()[0])
        out[key] = {{"fmu": res["x"].tolist(), "ref": ref}}
    # two builds of different cosim versions alive at once, stepped alternately
    slaves = []
    for path in ({osc!r}, {alt!r}):
        md = read_model_description(path)
        unzip = extract(path)
        f = FMU2Slave(guid=md.guid, unzipDirectory=unzip, modelIdentifier=md.coSimulation.modelIdentifier,
                      instanceName=os.path.basename(path))
        f.instantiate()
        f.setupExperiment(startTime=0.0)
        f.enterInitializationMode()
        f.exitInitializationMode()
        package = json.load(open(os.path.join(unzip, "resources", "cosim_fmu.json")))["package"]
        slaves.append((f, md, package))
    rows = []
    for n in range(10):
        row = []
        for f, md, _ in slaves:
            f.doStep(n * 0.1, 0.1)
            vr = {{v.name: v.valueReference for v in md.modelVariables}}
            row.append(f.getReal([vr["x"]])[0])
        rows.append(row)
    out["alternating"] = rows
    out["versions"] = [sys.modules[p + ".cosim"].__version__ for _, _, p in slaves]
    out["packages"] = [p for _, _, p in slaves]
    out["host_cosim_kept"] = sys.modules["cosim"].__file__ == host_cosim
    # the same FMU unzipped again after fmpy deleted the first folder: a method imported
    # lazily now (bdf) comes from the new folder
    res = simulate_fmu({pendulum!r}, stop_time=0.1, output_interval=0.01)
    res_bdf = simulate_fmu({pendulum!r}, stop_time=0.1, output_interval=0.01,
                           start_values={{"solver.method": "bdf"}})
    sim = cosim.Simulation(model="pendulum", method="bdf")
    for n in range(10):
        sim.do_step(n * 0.01, (n + 1) * 0.01 - n * 0.01)
    out["bdf"] = [float(res_bdf["angle"][-1]), float(sim.get_outputs()[0]), float(res["angle"][-1])]
    out["host_modules_clean"] = all("cosim_fmu_" not in (getattr(m, "__file__", None) or "")
                                    for n, m in list(sys.modules.items()) if not n.startswith("cosim_fmu_"))
    out["path_clean"] = not any("cosim_fmu_" in p or "resources" in p for p in sys.path)
    for f, _, _ in slaves:
        f.terminate()
        f.freeInstance()
    print(json.dumps(out))
""")


def test_fmus_are_isolated_from_each_other_and_from_the_host(tmp_path):
    """Two different user-model FMUs run one after the other, then two FMUs built from
    different cosim versions side by side, in a host that imported cosim itself: each FMU
    runs its own bundled code, results equal the host's cosim.Simulation bit for bit, and
    the host's `cosim`, sys.path and sys.modules are untouched."""
    import shutil
    src = tmp_path / "src"
    src.mkdir()
    (src / "fragile_model.py").write_text(FRAGILE_MODEL)
    (src / "oscillator_model.py").write_text(OSCILLATOR_MODEL)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(REPO)]))
    build = [sys.executable, "-m", "cosim.cli", "fmu", "build"]
    fragile, osc, alt = tmp_path / "Fragile.fmu", tmp_path / "Osc.fmu", tmp_path / "OscAlt.fmu"
    for args in ([ "fragile_model:Fragile", "-o", str(fragile), "--method", "dopri5", "--param", "k=3"],
                 ["oscillator_model:Oscillator", "-o", str(osc), "--method", "rk4", "--step", "0.01"]):
        subprocess.run(build + args, check=True, capture_output=True, timeout=300, env=env, cwd=str(tmp_path))
    # the same model built by another version of cosim (a copy with another __version__)
    other = tmp_path / "other"
    shutil.copytree(REPO / "cosim", other / "cosim", ignore=shutil.ignore_patterns("__pycache__"))
    init = other / "cosim" / "_version.py"
    text = init.read_text()
    assert f'__version__ = "{cosim.__version__}"' in text
    init.write_text(text.replace(f'__version__ = "{cosim.__version__}"', '__version__ = "9.9.9+other"'))
    alt_env = dict(env, PYTHONPATH=os.pathsep.join([str(other), str(src), str(REPO)]))
    subprocess.run(build + ["oscillator_model:Oscillator", "-o", str(alt), "--method", "rk4", "--step", "0.01"],
                   check=True, capture_output=True, timeout=300, env=alt_env, cwd=str(tmp_path))

    pendulum = tmp_path / "P.fmu"
    subprocess.run(build + ["pendulum", "-o", str(pendulum)], check=True, capture_output=True,
                   timeout=300, env=env, cwd=str(tmp_path))
    script = ISOLATION_HOST.format(src=str(src), fragile=str(fragile), osc=str(osc), alt=str(alt),
                                   pendulum=str(pendulum))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("fragile", "oscillator"):
        assert res[key]["fmu"] == res[key]["ref"], key
    assert res["versions"] == [cosim.__version__, "9.9.9+other"]
    assert len(set(res["packages"])) == 2
    rows = np.array(res["alternating"])
    assert np.array_equal(rows[:, 0], rows[:, 1])  # same model, same numerics, separate code
    assert res["host_cosim_kept"] and res["host_modules_clean"] and res["path_clean"]
    # the FMU's bdf runs from the second unzip folder (the package imported afresh there,
    # the first folder being deleted), the host's from the repository: agree to 1e-10
    assert abs(res["bdf"][0] - res["bdf"][1]) <= 1e-10 and res["bdf"][0] != res["bdf"][2]


REEXTRACT_HOST = textwrap.dedent("""
    import json, os, sys
    import cosim
    from fmpy import read_model_description, simulate_fmu
    from fmu.bundle import package_name
    path = {path!r}
    pkg = package_name(read_model_description(path).guid)
    out = {{}}
    # fmpy unzips each run to a new temp folder and deletes it afterwards; the second run
    # uses a method (the default, dopri5) the first one (bdf) did not compile
    for key, start in (("bdf", {{"solver.method": "bdf"}}), ("default", {{}})):
        res = simulate_fmu(path, stop_time=0.1, output_interval=0.01, start_values=start)
        root = list(sys.modules[pkg].__path__)[0]
        jit = sys.modules[pkg + ".cosim.jit"]
        names = list(jit._methods)
        out[key] = {{"angle": float(res["angle"][-1]), "root_exists": os.path.isdir(root),
                    "compiled": sorted(k.rsplit(".", 1)[-1] for k in names)}}
        sim = cosim.Simulation(model="pendulum", method=start.get("solver.method", {default!r}))
        for n in range(10):
            sim.do_step(n * 0.01, (n + 1) * 0.01 - n * 0.01)
        out[key]["host"] = float(sim.get_outputs()[0])
    print(json.dumps(out))
""")


def test_same_fmu_unzipped_again_after_its_folder_was_deleted_compiles_from_the_new_folder(
        pendulum_fmu, tmp_path):
    """fmpy.simulate_fmu twice on one FMU in one process (the first unzip folder deleted in
    between): the second instance imports the FMU's package afresh from its own folder, so
    a method not compiled before (the default dopri5 after bdf) is compiled from readable
    sources and runs the compiled backend, with the host's results to 1e-10 (before the
    fix the stale package pointed at the deleted folder: fmi2ExitInitializationMode failed
    with numba's "no locator available for file", or the Python reference ran)."""
    proc = subprocess.run([sys.executable, "-c", REEXTRACT_HOST.format(path=str(pendulum_fmu),
                                                                      default=DEFAULT)],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["bdf"]["compiled"] == ["bdf_kernel"]
    assert res["default"]["compiled"] == ["explicit_kernel"]  # a fresh package, compiled (no fall-back)
    assert not res["bdf"]["root_exists"] and not res["default"]["root_exists"]  # fmpy deleted them
    for key in ("bdf", "default"):
        assert abs(res[key]["angle"] - res[key]["host"]) <= 1e-10, key
    assert res["bdf"]["angle"] != res["default"]["angle"]  # two methods really ran


def test_conformance_script_every_fmu_in_a_venv_without_cosim(tmp_path):
    """scripts/fmu_conformance.py: every FMU `cosim fmu build` makes (each library model with
    its default and one other method, each shipped scenario) passes fmpy validate and the
    FMU2Slave cycle (init, steps with inputs, state get/set/serialize, reset, terminate, free),
    checked by a venv that holds only fmpy + numpy + scipy."""
    script = REPO / "scripts" / "fmu_conformance.py"
    proc = subprocess.run([sys.executable, str(script), "all", str(tmp_path / "fmus"),
                           "--bare-venv", str(tmp_path / "venv")], capture_output=True, text=True,
                          timeout=900, cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=str(REPO)))
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    from cosim.models import MODEL_REGISTRY
    assert len(lines) == 2 * len(MODEL_REGISTRY) + len(SHIPPED_SCENARIOS)
    assert all(line["ok"] for line in lines)
    assert f"{len(lines)}/{len(lines)} FMUs conform" in proc.stdout
    assert "cosim importable: False, pythonfmu importable: False" in proc.stdout


# -- a second master: libcosim with two cosim builds and an independent controller FMU --------------
STOCK_CONTROLLER = textwrap.dedent('''
    """A PD controller for two pendulums, exported by stock pythonfmu (not cosim)."""
    from pythonfmu import Fmi2Causality, Fmi2Slave, Real


    class TwinPD(Fmi2Slave):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.kp, self.kd, self.ref = 40.0, 8.0, 0.8
            self.angle_a = self.rate_a = self.angle_b = self.rate_b = 0.0
            self.torque_a = self.torque_b = 0.0
            for name in ("angle_a", "rate_a", "angle_b", "rate_b"):
                self.register_variable(Real(name, causality=Fmi2Causality.input))
            for name in ("torque_a", "torque_b"):
                self.register_variable(Real(name, causality=Fmi2Causality.output))

        def do_step(self, current_time, step_size):
            self.torque_a = self.kp * (self.ref - self.angle_a) - self.kd * self.rate_a
            self.torque_b = self.kp * (self.ref - self.angle_b) - self.kd * self.rate_b
            return True
''')

LIBCOSIM_TWO_BUILDS = textwrap.dedent("""
    import json
    from libcosimpy.CosimEnums import CosimVariableType
    from libcosimpy.CosimExecution import CosimExecution
    from libcosimpy.CosimLogging import CosimLogLevel, log_output_level
    from libcosimpy.CosimObserver import CosimObserver
    from libcosimpy.CosimSlave import CosimLocalSlave
    log_output_level(CosimLogLevel.ERROR)
    step_ns, n = {step_ns!r}, {n!r}
    ex = CosimExecution.from_step_size(step_ns)
    index, refs = {{}}, {{}}
    for name, path in (("a", {plant_a!r}), ("b", {plant_b!r}), ("ctrl", {ctrl!r})):
        index[name] = ex.add_local_slave(CosimLocalSlave(fmu_path=path, instance_name=name))
        refs[name] = {{v.name.decode(): v.reference for v in ex.slave_variables(index[name])}}
    for p in ("a", "b"):
        ex.connect_real_variables(index[p], refs[p]["angle"], index["ctrl"], refs["ctrl"]["angle_" + p])
        ex.connect_real_variables(index[p], refs[p]["angular_velocity"], index["ctrl"], refs["ctrl"]["rate_" + p])
        ex.connect_real_variables(index["ctrl"], refs["ctrl"]["torque_" + p], index[p], refs[p]["torque"])
    obs = CosimObserver.create_time_series()
    ex.add_observer(obs)
    for p in ("a", "b"):
        obs.start_time_series(index[p], refs[p]["angle"], CosimVariableType.REAL)
    assert ex.step(n)
    out = {{}}
    for p in ("a", "b"):
        t_ns, _, out[p] = obs.time_series_real_samples(index[p], refs[p]["angle"], 0, n + 2)
    out["t_ns"] = list(t_ns)
    print(json.dumps(out))
""")


def test_libcosim_two_cosim_builds_and_an_independent_controller(pendulum_fmu, tmp_path):
    """libcosim runs two pendulum FMUs built by different cosim versions and a PD controller
    exported by stock pythonfmu in one execution: both plants equal cosim.Simulation in the
    same Jacobi coupling, and each other, bit for bit."""
    import shutil
    other = tmp_path / "other"
    shutil.copytree(REPO / "cosim", other / "cosim", ignore=shutil.ignore_patterns("__pycache__"))
    init = other / "cosim" / "_version.py"
    text = init.read_text()
    assert f'__version__ = "{cosim.__version__}"' in text
    init.write_text(text.replace(f'__version__ = "{cosim.__version__}"', '__version__ = "9.9.9+other"'))
    plant_b = tmp_path / "PendulumOther.fmu"
    subprocess.run([sys.executable, "-m", "cosim.cli", "fmu", "build", "pendulum", "-o", str(plant_b)],
                   check=True, capture_output=True, timeout=300, cwd=str(tmp_path),
                   env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(other), str(REPO)])))
    assert read_model_description(str(plant_b)).version == "9.9.9+other"
    (tmp_path / "twin_pd.py").write_text(STOCK_CONTROLLER)
    subprocess.run([sys.executable, "-m", "pythonfmu", "build", "-f", str(tmp_path / "twin_pd.py"),
                    "-d", str(tmp_path)], check=True, capture_output=True, timeout=300, cwd=str(tmp_path))
    step_ns, n = 10_000_000, 200
    script = LIBCOSIM_TWO_BUILDS.format(plant_a=str(pendulum_fmu), plant_b=str(plant_b),
                                        ctrl=str(tmp_path / "TwinPD.fmu"), step_ns=step_ns, n=n)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    a, b = np.array(run["a"]), np.array(run["b"])
    assert np.array_equal(a, b) and len(a) >= n - 1
    plant, torque, ref = cosim.Simulation(model="pendulum", method=DEFAULT), 0.0, []
    ref.append(plant.get_output_dict()["angle"])
    for j in range(len(a) - 1):  # Jacobi: the controller's output of step j-1 drives step j
        po = plant.get_output_dict()
        plant.set_inputs({"torque": torque})
        t_j = (j * step_ns) / 1e9
        plant.do_step(t_j, ((j + 1) * step_ns) / 1e9 - t_j)
        torque = 40.0 * (0.8 - po["angle"]) - 8.0 * po["angular_velocity"]
        ref.append(plant.get_output_dict()["angle"])
    assert np.max(np.abs(a - np.array(ref))) <= 1e-12
    assert abs(a[-1] - 0.8) < 0.2  # regulated towards the reference


SUBPROCESS_CRAFTED_STATES = textwrap.dedent("""
    import json, math, sys
    import numpy as np
    sys.path.insert(0, {scripts!r})
    from fuzz_state import with_data, with_header
    from cosim import serialization
    from fmpy import extract, read_model_description
    from fmpy.fmi1 import FMICallException
    from fmpy.fmi2 import FMU2Slave
    path = {path!r}
    md = read_model_description(path)
    unzip = extract(path)
    vr = {{v.name: v.valueReference for v in md.modelVariables}}
    def make(name):
        f = FMU2Slave(guid=md.guid, unzipDirectory=unzip,
                      modelIdentifier=md.coSimulation.modelIdentifier, instanceName=name)
        f.instantiate()
        f.setupExperiment(startTime=0.0)
        f.enterInitializationMode()
        f.exitInitializationMode()
        return f
    def drive(f, t, n):
        for _ in range(n):
            f.setReal([vr["torque"]], [math.sin(3.0 * t)])
            f.doStep(t, 0.01)
            t += 0.01
        return t
    a, ref = make("a"), make("ref")
    t = drive(a, 0.0, 3)
    drive(ref, 0.0, 3)
    state = a.getFMUstate()
    blob = bytes(a.serializeFMUstate(state))
    a.freeFMUstate(state)

    def inner(mutate):  # change the Simulation blob inside the FMU state, checksums recomputed
        def outer(d):
            sim_blob = bytes(np.asarray(d["sim"], dtype=np.uint8))
            d["sim"] = np.frombuffer(with_data(sim_blob, mutate), dtype=np.uint8)
        return with_data(blob, outer)

    def piv(value):
        def mutate(d):
            nt = d["integrator"]["method_state"]["newton"]
            nt["piv"] = np.full(nt["piv"].shape, value)
        return mutate
    cases = {{
        "pivots NaN": inner(piv(math.nan)), "pivots inf": inner(piv(math.inf)),
        "pivots 1e300": inner(piv(1e300)), "pivots out of range": inner(piv(np.int32(99))),
        "LU NaN": inner(lambda d: d["integrator"]["method_state"]["newton"].__setitem__(
            "lu", d["integrator"]["method_state"]["newton"]["lu"] * np.nan)),
        "time mismatch": inner(lambda d: d.__setitem__("time", d["time"] + 1e-3)),
        "fraction bomb": with_header(blob, lambda h: h["data"].__setitem__(
            "start_time", {{"__fraction__": "1e100000000"}})),
    }}
    out = {{}}
    for name, bad in cases.items():
        try:
            a.deSerializeFMUstate(bad)
            out[name] = "accepted"
        except FMICallException as exc:
            out[name] = exc.status
    t_a = drive(a, t, 5)   # the instance continues as if nothing happened
    drive(ref, t, 5)
    names = ["angle", "angular_velocity", "rod_force"]
    out["same_as_reference"] = a.getReal([vr[n] for n in names]) == ref.getReal([vr[n] for n in names])
    print(json.dumps(out))
""")


def test_crafted_fmu_states_are_errors_not_crashes(pendulum_ga_fmu):
    """Issue 14: an FMU state whose checksums are valid but whose Newton pivots are
    NaN/inf/1e300/out of range (the measured SIGSEGV through fmi2DeSerializeFMUstate ->
    fmi2SetFMUstate -> fmi2DoStep), whose LU is NaN, whose time disagrees, or which holds a
    fraction bomb, is refused by fmi2DeSerializeFMUstate (fmi2Error); the instance
    continues exactly like a reference instance.  Run in a subprocess: a crash fails it.
    generalized-alpha: its state holds the Newton matrix's LU and pivots."""
    script = SUBPROCESS_CRAFTED_STATES.format(path=str(pendulum_ga_fmu),
                                               scripts=str(Path(__file__).parents[1] / "scripts"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("pivots NaN", "pivots inf", "pivots 1e300", "pivots out of range", "LU NaN",
                 "time mismatch", "fraction bomb"):
        assert out[name] == FMI2_ERROR, (name, out)
    assert out["same_as_reference"] is True


def test_ic_report_is_logged_in_its_own_category(fmu_dir, pendulum_fmu):
    """Issue 19: the IC report through the fmi2 logger, category cosimInitialConditions
    (declared in modelDescription.xml, FMI 2.0.4 §2.2.4): fmi2Warning with the size of a
    repair; fmi2OK (debug logging on) for a consistent start."""
    path = fmu_dir / "CrankRepaired.fmu"
    assert cosim_main(["fmu", "build", "crank_slider", "-o", str(path), "--param",
                       "seed_initial_velocity=1", "--name", "CrankRepaired"]) == 0
    md = read_model_description(str(path))
    assert "cosimInitialConditions" in [getattr(c, "name", c) for c in md.logCategories]
    slave = Slave(path, "ic-repaired", logging=True)
    ic = [(s, m) for s, c, m in slave.messages if c == "cosimInitialConditions"]
    assert ic == [(1, "initial state repaired by the initial-condition analysis (seed 000 eqs. 6-9): "
                      "velocities repaired by 7.500e+01 (max abs change)")]  # 1 = fmi2Warning
    slave.fmu.terminate()
    slave.fmu.freeInstance()
    slave = Slave(pendulum_fmu, "ic-consistent", logging=True)
    ic = [(s, m) for s, c, m in slave.messages if c == "cosimInitialConditions"]
    assert len(ic) == 1 and ic[0][0] == 0 and ic[0][1].startswith("initial state consistent")
    slave.fmu.terminate()
    slave.fmu.freeInstance()


def test_an_importer_tolerance_far_from_reach_is_warned_or_refused_at_initialization(pendulum_ga_fmu,
                                                                                     fmu_dir):
    """fmi2SetupExperiment's tolerance and stopTime other than the DefaultExperiment's (which
    `cosim fmu build` checked): cosim.step_budget's set-up check runs in
    fmi2ExitInitializationMode.  A tolerance another method reaches 10x cheaper: one
    fmi2Warning naming both estimates; out of reach within max_steps per communication
    step (the DefaultExperiment's stepSize): fmi2Error.  The check's probe is undone: the
    rows equal those of a run without a stopTime.  The FMUs name generalized-alpha (the
    default, dopri5, reaches rtol 1e-9 on the pendulum within its budget)."""
    ga = pendulum_ga_fmu

    def start(path, name, tolerance, **stop):
        slave = Slave(path, name, initialize=False, logging=True)
        slave.fmu.setupExperiment(tolerance=tolerance, startTime=0.0, **stop)
        slave.fmu.enterInitializationMode()
        return slave

    slave = start(ga, "tight", 1e-9, stopTime=5.0)
    slave.fmu.exitInitializationMode()
    warned = [m for s, c, m in slave.messages if c == "cosimSettings" and "suggested: method" in m]
    assert len(warned) == 1 and "generalized-alpha (order 2) at rtol 1e-09" in warned[0], slave.messages
    _, rows = drive(slave, 0.0, 20)
    slave.close()
    quiet = start(ga, "no-stop", 1e-9)
    quiet.fmu.exitInitializationMode()
    assert not any("suggested" in m for _, _, m in quiet.messages)
    _, same = drive(quiet, 0.0, 20)
    quiet.close()
    assert np.array_equal(rows, same)

    one_step = fmu_dir / "PendulumOneStep.fmu"   # one communication step to stopTime
    assert cosim_main(["fmu", "build", "pendulum", "-o", str(one_step), "--comm-step", "5",
                       "--method", "generalized-alpha", "--name", "PendulumOneStep"]) == 0
    slave = start(one_step, "unreachable", 1e-12, stopTime=5.0)
    with pytest.raises(FMICallException) as info:
        slave.fmu.exitInitializationMode()
    assert info.value.status == FMI2_ERROR
    said = [m for s, _, m in slave.messages if s == FMI2_ERROR]
    assert any("UnreachableToleranceError" in m and "per communication step of 5" in m
               and "max_steps=" in m for m in said), slave.messages
    slave.fmu.freeInstance()


def test_a_fixed_step_that_resolves_nothing_is_discarded_with_the_state_unchanged(fmu_dir):
    """The fixed-step accuracy rule through FMI: Andrews' squeezer at a fixed 1 ms
    generalized-α step is refused near t = 0.012 (its local error estimate passes the
    state's own scale), which the FMU reports as fmi2Discard (§4.2.2) with the error on
    the logger; the outputs and fmi2LastSuccessfulTime stay those of the last good step,
    and the same step asked again is refused again."""
    path = fmu_dir / "AndrewsFixed.fmu"
    assert cosim_main(["fmu", "build", "andrews", "-o", str(path), "--method", "generalized-alpha",
                       "--step", "0.001", "--comm-step", "0.001", "--name", "AndrewsFixed"]) == 0
    slave = Slave(path, "fixed", logging=True)
    outputs = [v.name for v in slave.md.modelVariables if v.causality == "output" and v.type == "Real"]
    t, refused = 0.0, None
    for k in range(30):
        before = slave.get(outputs)
        try:
            slave.fmu.doStep(t, 0.001)
        except FMICallException as exc:
            refused = (k, exc.status, before)
            break
        t = (k + 1) * 0.001
    assert refused is not None and 5 <= refused[0] <= 25, refused
    assert refused[1] == fmi2Discard
    assert any(s == fmi2Discard and "FixedStepError" in m and "h=0.001" in m for s, _, m in slave.messages), \
        slave.messages
    assert slave.get(outputs) == refused[2]
    assert slave.fmu.getRealStatus(kind=2) == pytest.approx(t, abs=1e-15)   # fmi2LastSuccessfulTime
    with pytest.raises(FMICallException) as again:
        slave.fmu.doStep(t, 0.001)
    assert again.value.status == fmi2Discard and slave.get(outputs) == refused[2]
    slave.fmu.terminate()
    slave.fmu.freeInstance()
