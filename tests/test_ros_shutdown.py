"""SIGINT/SIGTERM end the plant node (a subprocess, as launch runs it) cleanly in
every mode and phase: start-up, spinning, paused, and with the simulation
thread inside a long step.  Clean = exit status 0, no traceback, before
launch's escalation to SIGTERM/SIGKILL (5 s; the measured times are printed by
``benchmarks/ros_shutdown.py``)."""
import os
import signal
import subprocess
import time

import pytest

pytest.importorskip("rclpy")
from ros_nodes.testing import LAUNCH, NodeProcess, ros_environment, unique_domain_id  # noqa: E402

pytestmark = pytest.mark.ros

YAML = os.path.join(LAUNCH, "pendulum_free_run.yaml")
MODES = ("lock_step", "real_time", "free_run")
LONG_STEP = {"communication_step": 100.0, "integrator_step": 1e-5, "end_time": 0.0,
             "input_timeout": 0.2,  # one step = 1e7 integrator steps; lock_step: held inputs
             "method_options.max_steps": 20_000_000}  # above the default step budget (issue 14)
PHASES = {
    "startup": {},
    "spinning": {},
    "paused": {"start_paused": True},
    "long_step": LONG_STEP,
}
LAUNCH_ESCALATION = 5.0  # s: ros2 launch sends SIGTERM after SIGINT was ignored this long
CASES = [(mode, phase, (signal.SIGINT, signal.SIGTERM)[(i + j) % 2])
         for i, mode in enumerate(MODES) for j, phase in enumerate(PHASES)]


def wait_handlers_installed(proc, timeout=30.0):
    """Until the node owns SIGTERM (the kernel's SigCgt mask): its handlers are in
    place, the rest of start-up (importing rclpy and cosim) still to come.  Before
    that, a signal meets Python's defaults — a slow interpreter start under load
    made a fixed 0.3 s wait flaky."""
    bit = 1 << (signal.SIGTERM - 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{proc.proc.pid}/status") as fh:
                caught = next(int(line.split()[1], 16) for line in fh if line.startswith("SigCgt:"))
        except (OSError, StopIteration):
            caught = 0
        if caught & bit:
            return
        time.sleep(0.005)
    raise TimeoutError(f"the node did not install its signal handlers in {timeout} s:\n{proc.log()}")


def wait_log(proc, text, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in proc.log():
            return
        assert proc.proc.poll() is None, proc.log()
        time.sleep(0.02)
    raise TimeoutError(f"no {text!r} in the node's log after {timeout} s:\n{proc.log()}")


def signal_and_wait(proc, signum):
    proc.proc.send_signal(signum)
    try:
        return proc.wait(LAUNCH_ESCALATION)
    except subprocess.TimeoutExpired:
        proc.proc.kill()
        proc.wait(5.0)
        raise AssertionError(f"still running {LAUNCH_ESCALATION} s after {signum!r}:\n{proc.log()}")


@pytest.mark.parametrize("mode, phase, signum", CASES,
                         ids=[f"{m}-{p}-{s.name}" for m, p, s in CASES])
def test_signal_ends_the_node_cleanly(tmp_path, mode, phase, signum):
    env = ros_environment(unique_domain_id(f"shutdown-{mode}-{phase}"))
    overrides = {"mode": mode, **PHASES[phase]}
    proc = NodeProcess("ros_nodes.sim_node", env, YAML, overrides, log_dir=tmp_path)
    try:
        if phase == "startup":
            wait_handlers_installed(proc)
            time.sleep(0.05)  # into the imports of rclpy and cosim (seconds)
            assert "ready" not in proc.log(), "the node was ready before the signal"
        else:
            wait_log(proc, "ready", 60.0)
            if phase == "long_step" and mode == "lock_step":
                wait_log(proc, "no command for", 10.0)  # stepping with the held inputs
            time.sleep(0.5)
        status = signal_and_wait(proc, signum)
        log = proc.log()
        assert status == 0, log
        assert "Traceback" not in log and "Error" not in log, log
        if phase != "startup":
            assert "ready" in log
    finally:
        proc.stop()


def test_controller_ends_cleanly(tmp_path):
    env = ros_environment(unique_domain_id("shutdown-pd"))
    proc = NodeProcess("ros_nodes.pd_controller", env, os.path.join(LAUNCH, "pd_pendulum.yaml"),
                       log_dir=tmp_path)
    try:
        wait_log(proc, "ready", 60.0)
        assert signal_and_wait(proc, signal.SIGTERM) == 0
        assert "Traceback" not in proc.log()
    finally:
        proc.stop()


def test_shutdown_at_end_exits_zero(tmp_path):
    env = ros_environment(unique_domain_id("shutdown-at-end"))
    proc = NodeProcess("ros_nodes.sim_node", env, YAML,
                       {"end_time": 0.5, "shutdown_at_end": True}, log_dir=tmp_path)
    try:
        assert proc.wait(60.0) == 0, proc.log()
        assert "end_time reached at t=0.5" in proc.log() and "Traceback" not in proc.log()
    finally:
        proc.stop()
