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
* for reference, the bare cosim.Simulation.do_step cost of the same plant.

    python benchmarks/ros_rt.py            # 10 s per scenario
    python benchmarks/ros_rt.py --quick    # 4 s per scenario
    python benchmarks/ros_rt.py --priority 50   # plant and controller at SCHED_FIFO 50 (root)
    python benchmarks/ros_rt.py --priority 50 --spin 0.001   # busy-wait whole periods
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import rclpy  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402

import cosim  # noqa: E402
from ros_nodes.testing import (LAUNCH, NodeProcess, load_parameters, ros_environment,  # noqa: E402
                               simulation_kwargs, unique_domain_id)


def collect(duration, procs_factory, label):
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
    return last, windows, logs, load


_executors = {}


def executor_spin(node, ctx, timeout):
    ex = _executors.get(id(ctx))
    if ex is None:
        ex = _executors[id(ctx)] = rclpy.executors.SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
    ex.spin_once(timeout_sec=timeout)


def bare_step_cost(yaml_path, n=2000):
    params = load_parameters(yaml_path, "cosim_sim")
    sim = cosim.Simulation(**simulation_kwargs(params))
    h = params["communication_step"]
    costs = np.empty(n)
    for k in range(n):
        t0 = time.perf_counter()
        sim.do_step(sim.time, h)
        costs[k] = time.perf_counter() - t0
    us = costs * 1e6
    return np.percentile(us, 50), np.percentile(us, 99), us.max()


def fmt(values, key):
    return values.get(key, "n/a")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 s per scenario")
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--spin", type=float, default=None,
                    help="real_time.spin_threshold in s (busy-wait before each deadline; "
                         "0.001 = the whole period)")
    ap.add_argument("--priority", type=int, default=0,
                    help="SCHED_FIFO priority of plant and controller (needs root); 0 = normal")
    args = ap.parse_args()
    duration = args.duration or (4.0 if args.quick else 10.0)
    rt_yaml = os.path.join(LAUNCH, "two_link_real_time.yaml")
    ls_yaml = os.path.join(LAUNCH, "two_link_lock_step.yaml")
    pd_yaml = os.path.join(LAUNCH, "pd_two_link.yaml")
    extra = {}
    extra["sched_priority"] = args.priority
    rt_extra = dict(extra)
    if args.spin is not None:
        rt_extra["real_time.spin_threshold"] = args.spin

    print(f"machine: {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    p50, p99, pmax = bare_step_cost(rt_yaml)
    print(f"bare cosim do_step, two_link, h=1 ms: p50 {p50:.0f} us  p99 {p99:.0f} us  "
          f"max {pmax:.0f} us")

    # --- real-time mode, 1 kHz
    last, windows, logs, load = collect(
        duration, lambda env: [NodeProcess("ros_nodes.sim_node", env, rt_yaml, rt_extra)], "rt")
    if not last:
        print("real time: no diagnostics received\n" + "\n".join(logs))
        return 1
    steady = windows[1:] or windows  # skip the first window for the rate
    rate = np.mean([float(w["achieved_rate_hz"]) for w in steady])
    rtf = np.mean([float(w["achieved_real_time_factor"]) for w in steady])
    print(f"\nreal-time mode, two_link, 1 kHz, RTF 1, {duration:.0f} s "
          f"(load {load[0]:.2f}, "
          f"SCHED_FIFO {args.priority or 'off'}, busy-wait "
          f"{(args.spin if args.spin is not None else 2e-4) * 1e6:.0f} us)")
    if args.priority and not any("SCHED_FIFO priority" in log and "cannot" not in log
                                 for log in logs):
        print("  (SCHED_FIFO could not be set: see the plant log)")
    print(f"  achieved rate          {rate:9.1f} Hz   (target 1000; real-time factor {rtf:.3f})")
    print(f"  steps                  {fmt(last, 'latency_total_count'):>9}")
    print(f"  overruns               {fmt(last, 'overruns_total'):>9}   per 1 s window: "
          f"{' '.join(w['overruns_window'] for w in windows)}")
    print(f"  jitter p99 per window  {' '.join(w.get('jitter_p99_us', '-') for w in windows)} us")
    print(f"  {'':22s} {'p50':>9} {'p99':>9} {'max':>9}   (us; 1 us bins, inf = beyond 10 ms)")
    for key, name in (("jitter", "publication jitter"), ("latency", "step latency")):
        print(f"  {name:22s} {fmt(last, key + '_total_p50_us'):>9} "
              f"{fmt(last, key + '_total_p99_us'):>9} {fmt(last, key + '_total_max_us'):>9}")

    # --- lock-step round trip plant -> controller -> plant
    def lock_step_procs(env):
        ctl = NodeProcess("ros_nodes.pd_controller", env, pd_yaml,
                          {"sched_priority": args.priority})
        time.sleep(1.0)
        return [ctl, NodeProcess("ros_nodes.sim_node", env, ls_yaml, extra)]
    last, windows, logs, load = collect(duration, lock_step_procs, "lockstep")
    if not last:
        print("lock step: no diagnostics received\n" + "\n".join(logs))
        return 1
    steady = windows[1:] or windows
    rate = np.mean([float(w["achieved_rate_hz"]) for w in steady])
    print(f"\nlock-step mode, two_link + PD controller (separate processes), {duration:.0f} s "
          f"(load {load[0]:.2f}, SCHED_FIFO {args.priority or 'off'})")
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
