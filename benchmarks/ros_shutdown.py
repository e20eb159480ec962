"""Time from SIGINT/SIGTERM to the exit of the plant node (a subprocess), per
mode and phase (start-up, spinning, paused, inside a long step); prints a table.

    .venv/bin/python benchmarks/ros_shutdown.py [--repeat N]
"""
import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ros_nodes.testing import LAUNCH, NodeProcess, ros_environment, unique_domain_id  # noqa: E402

YAML = os.path.join(LAUNCH, "pendulum_free_run.yaml")
LONG_STEP = {"communication_step": 100.0, "integrator_step": 1e-5, "end_time": 0.0,
             "input_timeout": 0.2}
PHASES = {"startup": {}, "spinning": {}, "paused": {"start_paused": True}, "long_step": LONG_STEP}


def wait_log(proc, text, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and text not in proc.log():
        time.sleep(0.02)


def one(mode, phase, signum):
    env = ros_environment(unique_domain_id(f"bench-shutdown-{mode}-{phase}"))
    proc = NodeProcess("ros_nodes.sim_node", env, YAML, {"mode": mode, **PHASES[phase]})
    try:
        if phase == "startup":
            time.sleep(0.3)
        else:
            wait_log(proc, "ready")
            if phase == "long_step" and mode == "lock_step":
                wait_log(proc, "no command for", 10.0)
            time.sleep(0.5)
        t0 = time.monotonic()
        proc.proc.send_signal(signum)
        status = proc.wait(30.0)
        dt = time.monotonic() - t0
        return dt, status, "Traceback" in proc.log()
    finally:
        proc.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print(f"{'mode':10s} {'phase':10s} {'signal':8s} {'exit s (max)':>12s} {'status':>7s} traceback")
    for mode in ("lock_step", "real_time", "free_run"):
        for phase in PHASES:
            for signum in (signal.SIGINT, signal.SIGTERM):
                runs = [one(mode, phase, signum) for _ in range(args.repeat)]
                print(f"{mode:10s} {phase:10s} {signum.name:8s} {max(r[0] for r in runs):12.2f} "
                      f"{','.join(str(r[1]) for r in runs):>7s} {any(r[2] for r in runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
