"""Closed loop over DDS on loopback: plant node and PD controller node run as
separate processes from the launch/ parameter YAML files (as users run them);
this process records the topics.

Shows: the PD controller stabilises the pendulum at the equilibrium of
PD + gravity; the lock-step trajectory equals cosim.Simulation driven with the
recorded commands bit for bit; two runs are identical; /clock is monotonic
and equals the simulation time; a use_sim_time node sees it.
"""
import math
import os

import pytest
from scipy.optimize import brentq

rclpy = pytest.importorskip("rclpy")
from rosgraph_msgs.msg import Clock as ClockMsg  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

import cosim  # noqa: E402
from ros_nodes.testing import (LAUNCH, RECORD_QOS, NodeProcess, Spinner, call_service,  # noqa: E402
                               load_parameters, ros_environment, simulation_kwargs,
                               unique_domain_id, wait_for)

pytestmark = pytest.mark.ros

PLANT_YAML = os.path.join(LAUNCH, "pendulum_lock_step.yaml")
PD_YAML = os.path.join(LAUNCH, "pd_pendulum.yaml")
END_TIME = 3.0
END_NS = round(END_TIME * 1e9)


def _ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def run_closed_loop(tmp_path, label):
    """One lock-step run: plant + PD processes, recorder here. Returns the records."""
    domain = unique_domain_id(label)
    env = ros_environment(domain)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    rec = {"js": [], "out": [], "cmd": [], "clock": []}
    plant = controller = spinner = None
    try:
        node = rclpy.create_node("recorder", context=ctx)
        timed = rclpy.create_node("sim_time_user", context=ctx,
                                  parameter_overrides=[rclpy.parameter.Parameter("use_sim_time",
                                                                                 value=True)])
        subs = [node.create_subscription(JointState, "joint_states", lambda m: rec["js"].append(
            (_ns(m.header.stamp), tuple(m.position), tuple(m.velocity), tuple(m.effort))), RECORD_QOS)]
        subs.append(node.create_subscription(Float64MultiArray, "outputs", lambda m: rec["out"].append(
            (m.layout.dim[0].label, tuple(m.data))), RECORD_QOS))
        cmd_sub = node.create_subscription(JointState, "joint_command", lambda m: rec["cmd"].append(
            (_ns(m.header.stamp), tuple(m.name), tuple(m.effort))), RECORD_QOS)
        subs.append(node.create_subscription(ClockMsg, "/clock", lambda m: rec["clock"].append(
            _ns(m.clock)), RECORD_QOS))
        spinner = Spinner(ctx, [node, timed])
        # controller first, so this recorder has matched its command writer
        # before the plant starts the loop (volatile topics: no history)
        controller = NodeProcess("ros_nodes.pd_controller", env, PD_YAML, log_dir=tmp_path)
        wait_for(lambda: cmd_sub.get_publisher_count() > 0, 20.0, what="the controller")
        # the plant starts paused until everyone has matched everyone, then runs
        plant = NodeProcess("ros_nodes.sim_node", env, PLANT_YAML,
                            {"end_time": END_TIME, "start_paused": True}, log_dir=tmp_path)
        wait_for(lambda: all(sub.get_publisher_count() > 0 for sub in subs) and
                 node.count_subscribers("joint_states") >= 2, 30.0, what="discovery")
        # the paused plant republishes its initial state to new peers (and every 0.5 s)
        wait_for(lambda: rec["js"] and rec["out"], 30.0, what="the initial state")
        assert call_service(node, Trigger, "resume_simulation", timeout=30.0).success
        wait_for(lambda: rec["js"] and rec["js"][-1][0] == END_NS, 40.0, what="the final state")
        assert plant.proc.poll() is None, plant.log()  # the plant idles at end_time
        wait_for(lambda: timed.get_clock().now().nanoseconds == END_NS, 5.0,
                 what="the use_sim_time node to see the final /clock")
        rec["plant_log"] = plant.log()
        return rec
    except BaseException:  # show what the nodes said
        for proc in (plant, controller):
            if proc is not None:
                print(" ".join(proc.args), f"(returncode {proc.proc.poll()}):\n{proc.log()}")
        print("last states:", rec["js"][-3:], "last commands:", rec["cmd"][-3:])
        raise
    finally:
        for proc in (controller, plant):
            if proc is not None:
                proc.stop()
        if spinner is not None:
            spinner.stop()
        rclpy.try_shutdown(context=ctx)


def unique_by_stamp(rows):
    """Lock-step may republish a state (discovery); keep the first of each stamp."""
    seen, out = set(), []
    for row in rows:
        if row[0] not in seen:
            seen.add(row[0])
            out.append(row)
    return out


def test_closed_loop_lock_step_pd_pendulum(tmp_path):
    params = load_parameters(PLANT_YAML, "cosim_sim")
    gains = load_parameters(PD_YAML, "pd_controller")
    h = params["communication_step"]
    n_steps = round(END_TIME / h)

    first = run_closed_loop(tmp_path, "closed_loop_a")
    states = unique_by_stamp(first["js"])
    stamps = [s[0] for s in states]
    assert stamps == sorted(stamps) and len(stamps) == n_steps + 1, stamps[:5]

    # --- the PD loop settles at kp (target - phi) = m g l sin(phi) (independent root)
    kp, target = gains["kp"][0], gains["target_positions"][0]
    m, l, g = params["params.m"], params["params.l"], 9.81
    phi_eq = brentq(lambda p: kp * (target - p) - m * g * l * math.sin(p), 0.0, target)
    _, pos, vel, eff = states[-1]
    assert abs(pos[0] - phi_eq) < 1e-4 and abs(vel[0]) < 1e-3, (pos, vel, phi_eq)
    assert abs(eff[0] - m * g * l * math.sin(phi_eq)) < 1e-2

    # --- lock-step: one command per state, stamped with that state's time
    commands = {}
    for stamp, names, effort in first["cmd"]:
        assert names == ("pendulum_joint",)
        commands.setdefault(stamp, effort[0])
    assert all(s in commands for s in stamps[:-1])

    # --- replay through cosim.Simulation with the same inputs: bit for bit
    sim = cosim.Simulation(**simulation_kwargs(params))
    label = ",".join(sim.output_names)
    outputs = []
    for row in first["out"]:  # unstamped: drop consecutive republished duplicates
        assert row[0] == label
        if not outputs or outputs[-1] != row[1]:
            outputs.append(row[1])
    assert len(outputs) == n_steps + 1
    assert outputs[0] == tuple(sim.get_outputs())
    for k in range(n_steps):
        sim.set_inputs({"torque": commands[stamps[k]]})
        sim.do_step(sim.time, h)
        out = sim.get_output_dict()
        assert round(sim.time * 1e9) == stamps[k + 1]
        assert states[k + 1][1] == (out["angle"],), k  # bit-identical (tuple equality)
        assert states[k + 1][2] == (out["angular_velocity"],), k
        assert states[k + 1][3] == (commands[stamps[k]],), k
        assert outputs[k + 1] == tuple(sim.get_outputs()), k

    # --- /clock: monotonic, only the published simulation times, ends at end_time
    # (keep-last 1: a time superseded before delivery may be skipped, by design)
    clock = first["clock"]
    assert all(b >= a for a, b in zip(clock, clock[1:]))
    assert set(clock) <= set(stamps) and clock[-1] == END_NS
    assert len(set(clock)) > n_steps // 2

    # --- a second run (new processes, new domain) is identical
    second = run_closed_loop(tmp_path, "closed_loop_b")
    assert unique_by_stamp(second["js"]) == states
    assert set(second["clock"]) <= set(stamps) and second["clock"][-1] == END_NS
    again = []
    for row in second["out"]:
        if not again or again[-1] != row[1]:
            again.append(row[1])
    assert again == outputs
