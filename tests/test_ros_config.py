"""The ROS nodes outside a checkout: a shipped parameter file by name
(``-p config:=NAME``), one-line errors with exit 2 for a missing file or name,
plain ``cosim-ros`` runs a stated default, and the documented closed-loop demo
(plant + PD controller) ends at ``end_time``: both processes exit 0.

Every node runs as a program in a subprocess whose working folder is an empty
temporary folder (no ``launch/`` next to it)."""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from ros_nodes.testing import RECORD_QOS, Spinner, ros_environment, unique_domain_id, wait_for  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _env(label):
    env = ros_environment(unique_domain_id(label))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def _run(argv, env, cwd, timeout=120):
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_missing_parameter_file_is_one_line_exit_2(tmp_path):
    proc = _run([BIN / "cosim-ros", "--ros-args", "--params-file", "launch/two_link_real_time.yaml"],
                _env("missing-file"), tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0] == ("cosim-ros: error: cannot read parameter file 'launch/two_link_real_time.yaml': "
                        "No such file or directory (a shipped file by name: -p config:=NAME, NAME one "
                        "of pd_pendulum, pd_two_link, pendulum_free_run, pendulum_lock_step, "
                        "pendulum_real_time, two_link_lock_step, two_link_real_time)")


@pytest.mark.parametrize("name", ["no_such_file", "../launch/pd_pendulum", "/etc/hostname"])
def test_unknown_config_name_is_one_line_exit_2(tmp_path, name):
    proc = _run([BIN / "cosim-ros", "--ros-args", "-p", f"config:={name}"], _env("bad-config"), tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"cosim-ros: error: -p config:={name}: no shipped parameter file")


def test_config_of_the_other_node_is_refused(tmp_path):
    proc = _run([BIN / "cosim-ros", "--ros-args", "-p", "config:=pd_pendulum"], _env("foreign"), tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "has no section for node '/cosim_sim' (sections: pd_controller)" in proc.stderr


def test_config_by_name_and_later_parameters_override_it(tmp_path):
    """pendulum_free_run says end_time 10 s; -p end_time:=0.5 given after it wins."""
    proc = _run([BIN / "cosim-ros", "--ros-args", "-p", "config:=pendulum_free_run",
                 "-p", "end_time:=0.5", "-p", "shutdown_at_end:=true"], _env("config"), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = proc.stdout + proc.stderr
    assert "shipped configuration 'pendulum_free_run'" in log
    # the file says method auto: the default rule's choice for a plant the node drives
    assert "ready (model pendulum, mode free_run, method dopri5 (" in log
    assert "end_time reached at t=0.5" in log


def test_plain_cosim_ros_runs_and_says_the_default(tmp_path):
    """No parameters at all: the pendulum paced to real time, joint pendulum_joint, /clock
    advancing; the first log line says which shipped configuration runs."""
    env = _env("plain")
    log = tmp_path / "plain.log"
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=int(env["ROS_DOMAIN_ID"]))
    states, clocks = [], []
    spinner = None
    with open(log, "w") as fh:
        proc = subprocess.Popen([BIN / "cosim-ros"], cwd=tmp_path, env=env, stdout=fh,
                                stderr=subprocess.STDOUT)
    try:
        node = rclpy.create_node("listener", context=ctx)
        node.create_subscription(JointState, "joint_states",
                                 lambda m: states.append((list(m.name), list(m.position))), RECORD_QOS)
        node.create_subscription(Clock, "/clock", lambda m: clocks.append(
            m.clock.sec + 1e-9 * m.clock.nanosec), RECORD_QOS)
        spinner = Spinner(ctx, [node])
        wait_for(lambda: len(clocks) > 20 and states, 60.0, what="joint_states and /clock")
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(20)
        if spinner is not None:
            spinner.stop()
        rclpy.try_shutdown(context=ctx)
    text = log.read_text()
    assert code == 0, text
    assert "no parameters given: running the shipped configuration 'pendulum_real_time'" in text
    assert "ready (model pendulum, mode real_time, method dopri5 (" in text
    assert all(names == ["pendulum_joint"] for names, _ in states)
    angles = np.array([pos[0] for _, pos in states])
    # released from phi0 = 0.5 rad without friction: it swings within +-0.5 rad
    assert np.max(np.abs(angles)) <= 0.5 + 1e-3 and np.ptp(angles) > 0.01
    assert clocks[-1] > clocks[0] >= 0.0 and clocks == sorted(clocks)


def test_closed_loop_demo_ends_at_end_time(tmp_path):
    """The documented demo: controller and plant by config name; the plant stops at its
    end_time and exits, the controller (exit_with_plant) follows; both exit 0."""
    env = _env("demo")
    pd_log = tmp_path / "pd.log"
    with open(pd_log, "w") as fh:
        controller = subprocess.Popen([sys.executable, "-m", "ros_nodes.pd_controller", "--ros-args",
                                       "-p", "config:=pd_pendulum"], cwd=tmp_path, env=env,
                                      stdout=fh, stderr=subprocess.STDOUT)
    try:
        t0 = time.monotonic()
        plant = _run([BIN / "cosim-ros", "--ros-args", "-p", "config:=pendulum_lock_step",
                      "-p", "end_time:=2", "-p", "shutdown_at_end:=true"], env, tmp_path, timeout=180)
        assert plant.returncode == 0, plant.stdout + plant.stderr
        [t_end] = re.findall(r"end_time reached at t=([0-9.e+-]+)", plant.stderr)
        assert abs(float(t_end) - 2.0) < 1e-9
        assert controller.wait(30) == 0, pd_log.read_text()
        assert time.monotonic() - t0 < 150
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait(10)
    text = pd_log.read_text()
    [n] = re.findall(r"the plant has gone \(no joint_states publisher\) after (\d+) commands", text)
    # one answer per state: 200 steps of 10 ms, the final state, and republished ones
    # (the plant republishes its state while a peer is being discovered)
    assert 200 <= int(n) <= 220, text


def test_end_time_runs_the_step_budget_check_at_start(tmp_path):
    """With an end_time, the node runs cosim.step_budget's set-up check: a tolerance
    generalized-α cannot reach within max_steps per communication step is refused (exit 2,
    the estimate and the cheaper method in the FATAL line, no 'ready'); one another method
    reaches 10 times cheaper is one WARN naming both estimates, and the node runs."""
    base = [BIN / "cosim-ros", "--ros-args", "-p", "config:=pendulum_free_run",
            "-p", "method:=generalized-alpha", "-p", "end_time:=5.0", "-p", "shutdown_at_end:=true"]
    proc = _run([*base, "-p", "rtol:=1e-12", "-p", "communication_step:=5.0"], _env("budget-refused"),
                tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 2, log
    assert re.search(r"cannot configure the node: generalized-alpha \(order 2\) at rtol 1e-12.*"
                     r"per communication step of 5, more than max_steps=\d+; suggested: method", log), log
    assert "ready (" not in log
    proc = _run([*base, "-p", "rtol:=1e-9"], _env("budget-warned"), tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    warned = [line for line in log.splitlines() if "WARN" in line and "suggested: method" in line]
    assert len(warned) == 1 and "at rtol 1e-09" in warned[0], log
    assert "end_time reached at t=" in log
