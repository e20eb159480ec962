"""The one-call API: ``cosim.run`` of a name, a file or a spec; ``cosim.simulate`` with
inputs from Python (a table or a function of time) returning a result with
``to_pandas()`` and units; the progress line; Ctrl-C keeps the rows computed so far
(``cosim simulate --out`` writes them and says so); the summary's constraint
residuals are those of the recorded rows."""
import csv
import json
import math
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.cli import main
from cosim.errors import InvalidInputError, RunInterrupted, SpecError
from cosim.progress import ProgressLine

REPO = Path(__file__).resolve().parents[1]


# -- cosim.run accepts a scenario name, a spec file, a model name or a spec ---------------------
def test_run_accepts_a_scenario_name_a_file_a_model_name_and_a_spec(tmp_path):
    by_name = cosim.run("pendulum_pd", stop_time=0.2, backend="python")
    by_file = cosim.run(REPO / "cosim" / "data" / "scenarios" / "pendulum_pd.yaml", stop_time=0.2,
                        backend="python")
    spec = cosim.load_spec("pendulum_pd").replace(stop_time=0.2, backend="python")
    by_spec = cosim.run(spec)
    for r in (by_name, by_file):   # the same spec: bit for bit the same run
        assert np.array_equal(r.outputs, by_spec.outputs) and r.output_names == by_spec.output_names
    assert sorted(b["name"] for b in by_name.blocks) == ["pd", "supervisor"]
    model = cosim.run("pendulum", stop_time=0.5, backend="python")
    assert model.model == "pendulum" and model.time[-1] == 0.5 and model.blocks == []
    # the pendulum without inputs swings on the circle: x^2 + y^2 = l^2 = 1
    x, y = model.signal("x"), model.signal("y")
    assert np.max(np.abs(np.hypot(x, y) - 1.0)) < 1e-9


def test_run_of_an_unknown_name_says_what_it_tried():
    with pytest.raises(SpecError) as err:
        cosim.run("no_such_thing")
    text = str(err.value)
    assert text.startswith("'no_such_thing' is not a spec file, a shipped scenario "
                           "(bouncing_ball, lti_state_feedback, pendulum_pd) or a model: unknown model")


# -- cosim.simulate -----------------------------------------------------------------------------
def test_simulate_with_a_table_is_held_and_lands_on_its_times():
    """A torque table [0 until 1 s, then 2 N.m]: the run lands on t = 1 and the recorded
    input is the table's value held from its time on (zero-order hold)."""
    table = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 0.0, 0.0]])   # time, torque, fx, fy
    r = cosim.simulate("pendulum", 2.0, inputs=table, backend="python")
    torque = r.signal("torque")
    assert r.time[-1] == 2.0
    assert np.all(torque[r.time < 1.0 - 1e-12] == 0.0) and np.all(torque[r.time >= 1.0 - 1e-12] == 2.0)
    same = cosim.simulate("pendulum", 2.0, inputs={"torque": ([0.0, 1.0], [0.0, 2.0])},
                          backend="python")
    assert np.array_equal(same.states, r.states)


def test_simulate_with_a_function_equals_stepping_by_hand():
    """inputs=f(t) is sampled at the start of each 10 ms communication step and held:
    exactly what a loop of set_inputs / do_step does."""
    def torque(t):
        return 0.5 * math.sin(2.0 * t)
    r = cosim.simulate("pendulum", 0.5, inputs=lambda t: {"torque": torque(t)}, backend="python")
    sim = cosim.Simulation("pendulum", backend="python")
    for k in range(50):   # on the exact grid k/100 (float steps would drift: 0.5000000000000002)
        sim.set_inputs({"torque": torque(k / 100)})
        sim.do_step(sim.time, (k + 1) / 100 - sim.time)
    assert r.time.size == 51 and r.time[-1] == pytest.approx(0.5, abs=1e-12)
    assert np.array_equal(r.states[-1], sim.y)
    # the same with a plain function per input, and a function returning a sequence
    r2 = cosim.simulate("pendulum", 0.5, inputs={"torque": torque}, backend="python")
    r3 = cosim.simulate("pendulum", 0.5, inputs=lambda t: [torque(t), 0.0, 0.0], backend="python")
    assert np.array_equal(r2.states, r.states) and np.array_equal(r3.states, r.states)


def test_simulate_of_a_model_class_and_instance():
    from cosim.models.pendulum import Pendulum
    a = cosim.simulate(Pendulum, 0.3, backend="python", params={"l": 2.0})
    b = cosim.simulate(Pendulum(l=2.0), 0.3, backend="python")
    assert np.array_equal(a.states, b.states)
    x, y = a.states[-1, :2]
    assert math.hypot(x, y) == pytest.approx(2.0, abs=1e-9)


@pytest.mark.parametrize("inputs,match", [
    ({"torq": 1.0}, "input 'torq' is not an input of the model (inputs: torque, fx, fy)"),
    (np.zeros((3, 2)), "an input table needs columns time, torque, fx, fy (4 columns), got shape (3, 2)"),
    ({"torque": ([0.0, 0.0], [1.0, 2.0])}, "input 'torque': times must increase"),
    ({"torque": ([0.0, 1.0], [1.0, float("nan")])}, "input 'torque': values[1] is nan"),
    (lambda t: {"torque": float("inf")}, "input 'torque' at t=0.0"),
    ("torque", "inputs must be a function of t, a mapping by input name or a table"),
])
def test_simulate_rejects_bad_inputs_naming_them(inputs, match):
    with pytest.raises(InvalidInputError, match=match.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        cosim.simulate("pendulum", 0.1, inputs=inputs, backend="python")


def test_to_pandas_has_every_column_with_its_unit():
    pd = pytest.importorskip("pandas")
    r = cosim.run("pendulum_pd", stop_time=0.1, backend="python")
    df = r.to_pandas()
    assert isinstance(df, pd.DataFrame) and df.index.name == "time"
    assert np.array_equal(df.index.to_numpy(), r.time)
    assert np.array_equal(df["angle"].to_numpy(), r.signal("angle"))
    units = df.attrs["units"]
    assert units["time"] == "s" and units["angle"] == "rad" and units["rod_force"] == "N"
    assert units["pd.u"] == "N.m"   # a block output carries the unit of the plant input it drives
    named = r.to_pandas(units_in_names=True)
    assert "angle [rad]" in named.columns and named.index.name == "time [s]"
    assert "pd.u [N.m]" in named.columns


def test_to_pandas_without_pandas_names_the_extra(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['pandas'] = None\n")
    code = ("import cosim\nr = cosim.simulate('pendulum', 0.01, backend='python')\n"
            "try:\n    r.to_pandas()\nexcept cosim.errors.MissingExtraError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(shim), str(REPO)])))
    assert proc.stdout.strip() == ("RunResult.to_pandas needs the 'pandas' extra (pandas is not "
                                   "installed): pip install 'cosim-mbs[pandas]'"), proc.stderr


# -- progress -----------------------------------------------------------------------------------
class _Tty:
    def __init__(self):
        self.text = ""

    def isatty(self):
        return True

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_progress_line_waits_then_draws_and_ends_the_line(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("cosim.progress.time.monotonic", lambda: clock[0])
    out = _Tty()
    line = ProgressLine(0.0, 10.0, stream=out)
    line.update(1.0)
    assert out.text == ""                      # before the 2 s delay: nothing
    clock[0] += 3.0
    line.update(5.0)
    assert out.text.startswith("\r[" + "#" * 12 + " " * 13 + "]  50%  t=5 s of 10")
    assert "3 s  about 3 s left" in out.text
    line.close()
    assert out.text.endswith("\n")


class _Pipe(_Tty):
    def isatty(self):
        return False


def test_progress_where_stderr_is_not_a_terminal_is_a_plain_line_every_ten_seconds(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("cosim.progress.time.monotonic", lambda: clock[0])
    out = _Pipe()
    line = ProgressLine(0.0, 100.0, stream=out, label="runs", unit="")
    clock[0] += 9.0
    line.update(9.0)
    assert out.text == ""                      # a run shorter than 10 s: nothing
    clock[0] += 2.0
    line.update(10.0)
    assert out.text == "cosim: 10%  runs=10 of 100  11 s  about 99 s left\n"
    clock[0] += 5.0
    line.update(15.0)                          # the next line 10 s later, not before
    assert out.text.count("\n") == 1
    clock[0] += 5.0
    line.update(20.0)
    line.close()                               # whole lines: nothing to end
    assert out.text.splitlines() == ["cosim: 10%  runs=10 of 100  11 s  about 99 s left",
                                     "cosim: 20%  runs=20 of 100  21 s  about 84 s left"]


def test_progress_is_silent_for_a_short_run_when_stderr_is_not_a_terminal(capfd):
    cosim.run("pendulum", stop_time=0.2, backend="python")      # default: None (auto)
    seen = []
    cosim.run("pendulum", stop_time=0.05, backend="python", progress=seen.append)
    assert capfd.readouterr().err == ""
    assert seen[-1] == pytest.approx(0.05) and len(seen) == 5   # one call per 10 ms step


# -- Ctrl-C keeps what was computed --------------------------------------------------------------
def test_interrupt_in_python_carries_the_rows_so_far():
    def stop_at_half(t):
        if t >= 0.5 - 1e-12:
            raise KeyboardInterrupt
    with pytest.raises(RunInterrupted) as err:
        cosim.run("pendulum", stop_time=1.0, backend="python", progress=stop_at_half)
    r = err.value.result
    assert isinstance(err.value, KeyboardInterrupt) and r.interrupted
    assert r.time[-1] == pytest.approx(0.5, abs=1e-12) and len(r.time) == 51
    full = cosim.run("pendulum", stop_time=1.0, backend="python")
    assert np.array_equal(r.states, full.states[:51])


def test_ctrl_c_during_simulate_out_writes_the_csv_so_far(tmp_path):
    """A real SIGINT while `cosim simulate --out` runs (its progress line on a terminal
    shows it is stepping): exit 130, the CSV holds the rows up to the interrupt, and
    stderr says how many and where they went."""
    master, slave = pty.openpty()
    out = tmp_path / "run.csv"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # SIGINT at its default in the child: a test run started in the background of a
    # non-interactive shell inherits SIGINT ignored, and Python then keeps ignoring it
    proc = subprocess.Popen([sys.executable, "-m", "cosim", "simulate", "pendulum", "--t-end", "1000",
                             "--dt", "0.001", "--backend", "python", "--out", str(out)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=slave, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 120

    def simulated():   # the simulation time the progress line shows last
        found = re.findall(rb"%  t=([0-9.e+-]+) s", seen)
        return float(found[-1]) if found else -1.0
    try:
        while simulated() < 0.05 and time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                seen += os.read(master, 4096)
        assert simulated() >= 0.05, seen
        proc.send_signal(signal.SIGINT)
        # keep draining the terminal while the process winds down: a full pty buffer would
        # block its last writes (the progress line, the interrupt message) and so the exit
        stop_by = time.monotonic() + 60
        try:
            while proc.poll() is None and time.monotonic() < stop_by:
                if select.select([master], [], [], 0.2)[0]:
                    seen += os.read(master, 4096)
        except OSError:   # the pty closed with the process
            pass
        stdout, _ = proc.communicate(timeout=60)
        try:
            while select.select([master], [], [], 0.5)[0]:
                seen += os.read(master, 4096)
        except OSError:   # the pty closed with the process
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert proc.returncode == 130, (stdout, seen)
    text = seen.decode(errors="replace")
    msg = [line for line in text.replace("\r", "\n").splitlines() if "interrupted" in line]
    assert len(msg) == 1, text
    with open(out) as fh:
        rows = list(csv.reader(fh))
    header, data = rows[0], np.array(rows[1:], dtype=float)
    assert header[0] == "time" and len(data) > 10
    t_last = data[-1, 0]
    assert msg[0].strip() == (f"cosim: interrupted at t = {t_last:.6g} s of 1000 s: wrote the "
                              f"{len(data)} rows computed so far to {out}")
    assert np.allclose(np.diff(data[:, 0]), 0.001, atol=1e-12)   # every landed 1 ms row, in order
    assert data[0, 0] == 0.0 and stdout == ""


# -- printed residuals agree with the file -----------------------------------------------------
def _csv_max(path):
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    out = {}
    for level in ("position", "velocity", "acceleration"):
        vals = np.array([float(r[f"residual_{level}"]) for r in rows])
        vals = vals[np.isfinite(vals)]
        out[level] = float(np.max(np.abs(vals))) if vals.size else None
    return out, len(rows)


@pytest.mark.parametrize("method,enforced", [("generalized-alpha", False), ("dopri5", True)])
def test_summary_residuals_are_those_of_the_csv(tmp_path, capsys, method, enforced):
    out = tmp_path / "p.csv"
    assert main(["simulate", "pendulum", "--t-end", "1", "--method", method, "--backend", "python",
                 "--out", str(out), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)["stats"]
    peaks, n = _csv_max(out)
    assert st["rows"] == n == 501
    assert st["max_constraint_residuals"] == peaks          # exactly the CSV's maxima
    assert st["acceleration_enforced"] is enforced
    # rows between steps come from the dense output: only the end rows carry q''
    assert st["interpolated_rows"] == 499
    assert main(["simulate", "pendulum", "--t-end", "1", "--method", method, "--backend", "python"]) == 0
    text = capsys.readouterr().out
    assert (f"max |constraint residual| over the 501 recorded rows: position {peaks['position']:.2e}  "
            f"velocity {peaks['velocity']:.2e}") in text
    if enforced:
        assert f"    acceleration {peaks['acceleration']:.2e} (at the 2 rows that end a step)" in text
    else:
        assert ("acceleration level: not shown; generalized-alpha is an index-3 method: it enforces "
                "positions, its q'' need not satisfy C_q q'' = gamma") in text


@pytest.mark.parametrize("argv", [["lti", "--method", "state-transition"], ["bouncing_ball"]])
def test_unconstrained_model_prints_no_residual_line(capsys, argv):
    assert main(["simulate", *argv, "--t-end", "0.5", "--backend", "python"]) == 0
    assert "constraint residual" not in capsys.readouterr().out
