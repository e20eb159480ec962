"""ROS 2 node timing: real-time mode at 1 kHz and lock-step round trip (two_link).

Runs the plant (and, for lock-step, the PD controller) as separate processes
from the launch/ parameter YAML files, over DDS on loopback in a private
domain, for a bounded time, and reads the node's whole-run statistics from
/diagnostics:

* real time (launch/two_link_real_time.yaml, 1 kHz, RTF 1): achieved step rate
  and real-time factor, publication jitter (publish time - deadline) p50/p99/max,
  step latency (do_step + message preparation) p50/p99/max, overrun count
  (a step that finished after the next deadline);
* lock step (launch/two_link_lock_step.yaml + launch/pd_two_link.yaml): round
  trip plant -> controller -> plant (state published -> its command received)
  p50/p99/max and the achieved lock-step rate;
* for reference, the bare cosim.Simulation.do_step cost of the same plant;
* ``--breakdown``: where the real-time plant's time per step goes: the plant
  node in this process (executor thread as in ``cosim-ros``), its real-time
  loop replaced by an instrumented copy of ``ros_nodes.pacing.run_real_time``
  that times each part with ``perf_counter_ns`` (wake-up lateness, each
  publication, do_step, message filling) and per step the thread's CPU time
  and run-queue delay (``/proc/self/task/<tid>/schedstat``): wall = CPU means
  the work itself, run-queue delay means preemption, the rest waiting (GIL).
  The probes cost ~10 µs per step outside the timed parts (the CPU time
  includes one CPU-clock read, ~3 µs on this VM);
* ``--publish-cost``: rclpy alone (no simulation): one publisher per state
  topic publishing the plant's three messages (Clock, JointState,
  Float64MultiArray) as messages and as serialized bytes (what the plant
  does, ``ros_nodes.wire``), back to back and after a 1 ms sleep.

    python benchmarks/ros_rt.py            # 10 s per scenario
    python benchmarks/ros_rt.py --quick    # 4 s per scenario
    python benchmarks/ros_rt.py --priority 50   # plant and controller at SCHED_FIFO 50 (root)
    python benchmarks/ros_rt.py --priority 50 --spin 0.001   # busy-wait whole periods
    python benchmarks/ros_rt.py --duration 60 --rt-only      # the real-time scenario only
    python benchmarks/ros_rt.py --rt-only --subscribe        # with readers of the state topics
    python benchmarks/ros_rt.py --rt-only --state-rate 100   # joint_states at 100 Hz
    python benchmarks/ros_rt.py --rt-only --subscribe --async-publish  # Fast DDS sends async
    python benchmarks/ros_rt.py --breakdown --duration 20    # per-part times, in-process
    python benchmarks/ros_rt.py --publish-cost               # rclpy publish alone
    python benchmarks/ros_rt.py --adaptive                   # the plants on the default rule (dopri5)
"""
import argparse
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import rclpy  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402

import cosim  # noqa: E402
from ros_nodes.testing import (LAUNCH, NodeProcess, load_parameters, ros_environment,  # noqa: E402
                               simulation_kwargs, unique_domain_id)


def collect(duration, procs_factory, label, subscribe=False):
    """Start processes, listen to /diagnostics for ``duration`` s, return the last status."""
    domain = unique_domain_id(label)
    env = ros_environment(domain)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    node = rclpy.create_node("ros_rt_bench", context=ctx)
    last = {}
    windows = []

    def on_diag(msg):
        for st in msg.status:
            if "cosim simulation" in st.name:
                values = {kv.key: kv.value for kv in st.values}
                last.clear()
                last.update(values)
                windows.append(values)

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 10)
    received = {"joint_states": 0, "outputs": 0, "/clock": 0}
    if subscribe:  # default-QoS readers of the state topics, as robot_state_publisher & co.
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        def counter(topic):
            def on_msg(msg):
                received[topic] += 1
            return on_msg
        for topic, kind in (("joint_states", JointState), ("outputs", Float64MultiArray),
                            ("/clock", Clock)):
            node.create_subscription(kind, topic, counter(topic), 10)
    procs = procs_factory(env)
    load = os.getloadavg()
    try:
        t_start = time.monotonic() + 60.0  # start-up (bounded): until the first diagnostics
        while not windows and time.monotonic() < t_start:
            executor_spin(node, ctx, 0.1)
        windows.clear()
        t_end = time.monotonic() + duration
        while time.monotonic() < t_end:
            executor_spin(node, ctx, 0.1)
        logs = [p.log() for p in procs]
    finally:
        for p in procs:
            p.stop()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    return last, windows, logs, load, received


_executors = {}


def executor_spin(node, ctx, timeout):
    ex = _executors.get(id(ctx))
    if ex is None:
        ex = _executors[id(ctx)] = rclpy.executors.SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
    ex.spin_once(timeout_sec=timeout)


def bare_step_cost(yaml_path, n=2000, overrides=None):
    params = dict(load_parameters(yaml_path, "cosim_sim"), **(overrides or {}))
    sim = cosim.Simulation(**simulation_kwargs(params))
    h = params["communication_step"]
    costs = np.empty(n)
    for k in range(n):
        t0 = time.perf_counter()
        sim.do_step(sim.time, h)
        costs[k] = time.perf_counter() - t0
    us = costs * 1e6
    return np.percentile(us, 50), np.percentile(us, 99), us.max()


PARTS = ("jitter", "wake_late", "pub_clock", "pub_joint_states", "pub_outputs", "do_step",
         "fill", "work_wall", "work_cpu", "work_runqueue")


def _run_delay(tid):
    with open(f"/proc/self/task/{tid}/schedstat") as fh:
        return int(fh.read().split()[1])


def _loop(node, n_steps, rec, count):
    pc, tt = time.perf_counter_ns, time.thread_time_ns
    tid = threading.get_native_id()
    spin_ns = int(float(node.config["real_time.spin_threshold"]) * 1e9)
    period_ns = int(node.step / node.real_time_factor * 1e9)
    max_lag_ns = int(float(node.config["real_time.max_lag"]) * 1e9)
    out = node.out
    node.prepare_state()
    deadline = pc() + 200_000_000
    k = 0
    while not node.stopping.is_set() and k < n_steps:
        remaining = deadline - pc()
        while remaining > spin_ns:
            node.wake.wait(min((remaining - spin_ns) * 1e-9, 0.05))
            node.wake.clear()
            remaining = deadline - pc()
        woke = now = pc()
        while now < deadline:
            now = pc()
        r0 = _run_delay(tid)
        c0 = tt()
        t0 = pc()
        clock, js, outputs = out._payloads if out.serialized else (out.clock_msg, out.js_msg,
                                                                    out.out_msg)
        out.clock.publish(clock)
        t1 = pc()
        out.js.publish(js)
        t2 = pc()
        out.out.publish(outputs)
        t3 = pc()
        node.advance()
        t4 = pc()
        node.prepare_state()
        t5 = pc()
        c1 = tt()
        r1 = _run_delay(tid)
        rec[k] = (now - deadline, woke - (deadline - spin_ns), t1 - t0, t2 - t1, t3 - t2,
                  t4 - t3, t5 - t4, t5 - t0, c1 - c0, r1 - r0)
        k += 1
        deadline += period_ns
        if t5 - deadline > max_lag_ns:  # as run_real_time: re-anchor when far behind
            deadline = t5
    count[0] = k
    node.stopping.set()


def breakdown(yaml_path, duration, domain_id, overrides=(), messages=False):
    """Percentiles (µs) of each part over ``duration`` s at the YAML's rate; also
    the number of steps and whether the serialized publication path was used."""
    from rclpy.parameter import Parameter

    from ros_nodes import pacing
    from ros_nodes.sim_node import SimulationNode
    n = int(duration * 1000) + 500
    rec = np.zeros((n, len(PARTS)), dtype=np.int64)
    count = [0]
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain_id)
    node = SimulationNode(context=ctx, cli_args=["--ros-args", "--params-file", yaml_path],
                          parameter_overrides=[Parameter(k, value=v)
                                               for k, v in dict(overrides).items()])
    if messages:  # the ordinary message path, for comparison
        node.out.serialized = False
    saved = pacing.run_real_time
    pacing.run_real_time = lambda nd: _loop(nd, n, rec, count)
    sys.setswitchinterval(5e-5)  # as sim_node._make
    import gc
    gc.collect()
    gc.freeze()
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    try:
        node.start()
        while not node.stopping.is_set():
            executor.spin_once(timeout_sec=0.1)
        node.stop()
    finally:
        pacing.run_real_time = saved
        executor.shutdown()
        serialized = node.out.serialized
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    r = rec[500:count[0]] / 1000.0  # the first 0.5 s: warm-up
    stats = {name: (np.percentile(r[:, i], 50), np.percentile(r[:, i], 99), r[:, i].max())
             for i, name in enumerate(PARTS)}
    return stats, r.shape[0], serialized


def publish_cost(domain_id, n=3000):
    """Cost (µs, p50/p99) of publishing the three state messages with a bare rclpy node."""
    from rclpy.serialization import serialize_message
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from ros_nodes.common import CLOCK_QOS, RELIABLE_STATE_QOS
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain_id)
    node = rclpy.create_node("publish_cost", context=ctx)
    pubs = (node.create_publisher(Clock, "/clock", CLOCK_QOS),
            node.create_publisher(JointState, "joint_states", RELIABLE_STATE_QOS),
            node.create_publisher(Float64MultiArray, "outputs", RELIABLE_STATE_QOS))
    js = JointState(name=["shoulder", "elbow"], position=[0.1, 0.2], velocity=[0.3, 0.4],
                    effort=[0.5, 0.6])
    js.header.frame_id = "base_link"
    msgs = (Clock(), js, Float64MultiArray(data=[0.0] * 6))
    raws = tuple(serialize_message(m) for m in msgs)
    pc = time.perf_counter_ns
    results = {}
    try:
        for kind, items in (("message", msgs), ("bytes", raws)):
            for sleep in (0.0, 0.001):
                r = np.empty((n, 3))
                for k in range(n):
                    if sleep:
                        time.sleep(sleep)
                    for j, (pub, item) in enumerate(zip(pubs, items)):
                        t0 = pc()
                        pub.publish(bytes(item) if kind == "bytes" else item)
                        r[k, j] = pc() - t0
                r /= 1000.0
                results[(kind, sleep)] = (np.percentile(r, 50, axis=0), np.percentile(r, 99, axis=0),
                                          np.percentile(r.sum(1), 50), np.percentile(r.sum(1), 99))
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    return results


def print_breakdown(yaml_path, duration, overrides, priority, messages=False):
    load0 = os.getloadavg()[0]
    if priority:
        from ros_nodes.common import set_real_time_priority
        set_real_time_priority(priority, rclpy.logging.get_logger("ros_rt"))
    stats, steps, serialized = breakdown(yaml_path, duration, unique_domain_id("breakdown"),
                                         overrides, messages)
    print(f"\nreal-time plant in-process, per-part times, {steps} steps ({duration:.0f} s), "
          f"load {load0:.2f} -> {os.getloadavg()[0]:.2f}, SCHED_FIFO {priority or 'off'}, "
          f"publication {'serialized bytes' if serialized else 'messages'}")
    print(f"  {'part':22s} {'p50':>8} {'p99':>8} {'max':>9}   (us)")
    for name in PARTS:
        p50, p99, pmax = stats[name]
        print(f"  {name:22s} {p50:8.1f} {p99:8.1f} {pmax:9.1f}")
    print("  (jitter: publication - deadline; wake_late: end of the sleep - its target;\n"
          "   work_*: publications + do_step + fill, wall / thread CPU / run-queue delay)")


def print_publish_cost():
    print(f"\nrclpy alone: publish Clock, JointState(2 joints), Float64MultiArray(6) "
          f"(load {os.getloadavg()[0]:.2f})")
    print(f"  {'':26s} {'clock':>7} {'joints':>7} {'outputs':>7} {'sum p50':>8} {'sum p99':>8}"
          "   (us, p50 per message)")
    for (kind, sleep), (p50, p99, s50, s99) in publish_cost(unique_domain_id("pubcost")).items():
        label = f"{kind}, {'after 1 ms sleep' if sleep else 'back to back'}"
        print(f"  {label:26s} {p50[0]:7.1f} {p50[1]:7.1f} {p50[2]:7.1f} {s50:8.1f} {s99:8.1f}")


def fmt(values, key):
    return values.get(key, "n/a")


def rt_extra_breakdown(args):
    return {} if args.spin is None else {"real_time.spin_threshold": args.spin}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 s per scenario")
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--spin", type=float, default=None,
                    help="real_time.spin_threshold in s (busy-wait before each deadline; "
                         "0.001 = the whole period)")
    ap.add_argument("--priority", type=int, default=0,
                    help="SCHED_FIFO priority of plant and controller (needs root); 0 = normal")
    ap.add_argument("--rt-only", action="store_true", help="the real-time scenario only")
    ap.add_argument("--async-publish", action="store_true",
                    help="RMW_FASTRTPS_PUBLICATION_MODE=ASYNCHRONOUS for the nodes (Fast DDS "
                         "sends from its own thread; rmw_fastrtps only)")
    ap.add_argument("--state-rate", type=float, default=0.0,
                    help="real time: state_publish_rate in Hz (joint_states/outputs every "
                         "k-th step, /clock every step); 0 = every step")
    ap.add_argument("--subscribe", action="store_true",
                    help="real time: this process subscribes to joint_states, outputs and "
                         "/clock (default QoS), so every publication is delivered")
    ap.add_argument("--breakdown", action="store_true",
                    help="only: per-part times of the real-time plant, in this process")
    ap.add_argument("--messages", action="store_true",
                    help="with --breakdown: publish ordinary messages (the path before "
                         "ros_nodes.wire), for comparison")
    ap.add_argument("--adaptive", action="store_true",
                    help="both plants adaptive with method auto (the default rule: dopri5) "
                         "instead of the files' fixed-step generalized-alpha")
    ap.add_argument("--publish-cost", action="store_true",
                    help="only: cost of rclpy publications without a simulation")
    args = ap.parse_args()
    duration = args.duration or (4.0 if args.quick else 10.0)
    if args.async_publish:  # read by rmw_fastrtps at start-up; the nodes inherit it
        os.environ["RMW_FASTRTPS_PUBLICATION_MODE"] = "ASYNCHRONOUS"
    rt_yaml = os.path.join(LAUNCH, "two_link_real_time.yaml")
    ls_yaml = os.path.join(LAUNCH, "two_link_lock_step.yaml")
    pd_yaml = os.path.join(LAUNCH, "pd_two_link.yaml")
    extra = {}
    extra["sched_priority"] = args.priority
    rt_extra = dict(extra)
    if args.spin is not None:
        rt_extra["real_time.spin_threshold"] = args.spin
    if args.state_rate:
        rt_extra["state_publish_rate"] = args.state_rate
    if args.adaptive:
        extra.update({"method": "auto", "integrator_step": 0.0})
        rt_extra.update(extra)

    print(f"machine: {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    if args.publish_cost or args.breakdown:
        if args.publish_cost:
            print_publish_cost()
        if args.breakdown:
            print_breakdown(rt_yaml, duration, rt_extra_breakdown(args), args.priority,
                            args.messages)
        return 0
    p50, p99, pmax = bare_step_cost(rt_yaml, overrides={k: v for k, v in rt_extra.items()
                                                       if k in ("method", "integrator_step")})
    print(f"bare cosim do_step, two_link, 1 ms{' (adaptive, method auto)' if args.adaptive else ''}: p50 {p50:.0f} us  p99 {p99:.0f} us  "
          f"max {pmax:.0f} us")

    # --- real-time mode, 1 kHz
    last, windows, logs, load, received = collect(
        duration, lambda env: [NodeProcess("ros_nodes.sim_node", env, rt_yaml, rt_extra)], "rt",
        subscribe=args.subscribe)
    if not last:
        print("real time: no diagnostics received\n" + "\n".join(logs))
        return 1
    steady = windows[1:] or windows  # skip the first window for the rate
    rate = np.mean([float(w["achieved_rate_hz"]) for w in steady])
    rtf = np.mean([float(w["achieved_real_time_factor"]) for w in steady])
    print(f"\nreal-time mode, two_link, 1 kHz, RTF 1, {duration:.0f} s "
          f"(load {load[0]:.2f}, "
          f"SCHED_FIFO {args.priority or 'off'}, busy-wait "
          f"{(args.spin if args.spin is not None else 2e-4) * 1e6:.0f} us, "
          f"{'default-QoS readers of joint_states, outputs, /clock in this process' if args.subscribe else 'no readers of the state topics'}"
          f"{f', joint_states at {args.state_rate:g} Hz' if args.state_rate else ''}"
          f"{', Fast DDS asynchronous publication' if args.async_publish else ''})")
    ready = [line.split("ready ", 1)[1] for log in logs for line in log.splitlines()
             if "ready (" in line]
    print(f"  plant                  {ready[0] if ready else '(no ready line in its log)'}")
    if args.subscribe:
        print(f"  received here          {received['joint_states']} joint_states, "
              f"{received['outputs']} outputs, {received['/clock']} /clock (whole run)")
    if args.priority and not any("SCHED_FIFO priority" in log and "cannot" not in log
                                 for log in logs):
        print("  (SCHED_FIFO could not be set: see the plant log)")
    print(f"  achieved rate          {rate:9.1f} Hz   (target 1000; real-time factor {rtf:.3f})")
    steps = int(fmt(last, 'latency_total_count') if 'latency_total_count' in last else 0)
    overruns = int(last.get('overruns_total', 0))
    print(f"  steps                  {steps:>9}")
    print(f"  overruns               {overruns:>9}   ({100.0 * overruns / max(steps, 1):.2f} %)"
          f"   per 1 s window: "
          f"{' '.join(w['overruns_window'] for w in windows)}")
    print(f"  jitter p99 per window  {' '.join(w.get('jitter_p99_us', '-') for w in windows)} us")
    print(f"  {'':22s} {'p50':>9} {'p99':>9} {'max':>9}   (us; 1 us bins, inf = beyond 10 ms)")
    for key, name in (("jitter", "publication jitter"), ("latency", "node work per step")):
        print(f"  {name:22s} {fmt(last, key + '_total_p50_us'):>9} "
              f"{fmt(last, key + '_total_p99_us'):>9} {fmt(last, key + '_total_max_us'):>9}")
    print("  (node work per step: publication + do_step + message filling, wall time)")
    if args.rt_only:
        return 0

    # --- lock-step round trip plant -> controller -> plant
    def lock_step_procs(env):
        ctl = NodeProcess("ros_nodes.pd_controller", env, pd_yaml,
                          {"sched_priority": args.priority})
        time.sleep(1.0)
        return [ctl, NodeProcess("ros_nodes.sim_node", env, ls_yaml, extra)]
    last, windows, logs, load, _ = collect(duration, lock_step_procs, "lockstep")
    if not last:
        print("lock step: no diagnostics received\n" + "\n".join(logs))
        return 1
    ready = [line.split("ready ", 1)[1] for log in logs for line in log.splitlines()
             if "ready (" in line and "model " in line]
    steady = windows[1:] or windows
    rate = np.mean([float(w["achieved_rate_hz"]) for w in steady])
    print(f"\nlock-step mode, two_link + PD controller (separate processes), {duration:.0f} s "
          f"(load {load[0]:.2f}, SCHED_FIFO {args.priority or 'off'})")
    print(f"  plant                  {ready[0] if ready else '(no ready line in its log)'}")
    print(f"  lock-step rate         {rate:9.1f} steps/s (simulated {fmt(last, 'sim_time')} s)")
    print(f"  {'':22s} {'p50':>9} {'p99':>9} {'max':>9}   (us)")
    for key, name in (("round_trip", "round trip"), ("turnaround", "plant turnaround")):
        print(f"  {name:22s} {fmt(last, key + '_total_p50_us'):>9} "
              f"{fmt(last, key + '_total_p99_us'):>9} {fmt(last, key + '_total_max_us'):>9}")
    print("  (round trip: state published -> its command received by the plant, i.e. DDS both\n"
          "   ways + controller; turnaround: command received -> next state published, i.e.\n"
          "   thread hand-over + do_step + publish)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
