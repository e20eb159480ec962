"""The simulation thread's loops, one per mode.  Each loop applies queued
work (``node.drain``), runs step requests, steps and publishes; all waits are
bounded (``WAIT``) and end when ``node.stopping`` is set.

* lock_step: one communication step per command (normally run right in the
  command callback, see ``SimulationNode.post``); this loop covers what
  arrives while that is busy, stale inputs and republishing;
* free_run: as fast as possible;
* real_time: wall-clock paced: state k is published at deadline k, then step
  k+1 is computed in the remaining period (an overrun when it ends after the
  next deadline), so the publication jitter is the wake-up jitter only.
"""
from __future__ import annotations

import time

from . import services

WAIT = 0.05  # s: longest sleep of a loop without news


def _wait(node, timeout=WAIT):
    node.wake.wait(timeout)
    node.wake.clear()


def run_lock_step(node):
    republish = float(node.config["lock_step_republish_period"])
    with node.sim_lock:
        peers = node.peer_count()  # before publishing: a peer matched meanwhile
        node.publish_state()       # is seen as new and gets the state again
    while not node.stopping.is_set():
        with node.sim_lock:
            if node.pending_steps:
                node.drain()
                if node.pending_steps:
                    services.step_pending(node)
                continue
            if node.lock_step_once():
                continue
            now = time.monotonic()
            if node.runnable() and node.check_stale(now) and node.stale_policy != "pause":
                if node.advance():  # hold / zero: step with the held (or zeroed) inputs
                    node.publish_state()
                    node.last_command = now  # one step per timeout period
                continue
            count = node.peer_count()
            if count > peers or (republish > 0.0 and now - node.last_pub > republish):
                node.send_state()  # discovery race or lost message: the same state again
            elif node.paused or not node.runnable():
                node.idle_clock(now)
            peers = count
        _wait(node)


def run_free_run(node):
    node.publish_state()
    peers = node.peer_count()
    while not node.stopping.is_set():
        if node.jobs:
            node.drain()
        if node.pending_steps:
            services.step_pending(node)
            continue
        if node.runnable() and not (node.check_stale(time.monotonic())
                                    and node.stale_policy == "pause"):
            if node.advance():
                node.publish_state(step=True)
                continue
        peers = _idle(node, peers)
        _wait(node)


def _idle(node, peers):
    count = node.peer_count()
    if count > peers:
        node.send_state()
    else:
        node.idle_clock(time.monotonic())
    return count


def run_real_time(node):
    spin = float(node.config["real_time.spin_threshold"])
    max_lag = float(node.config["real_time.max_lag"])
    perf = time.perf_counter
    jitter, latency = node.telemetry.samples["jitter"], node.telemetry.samples["latency"]
    tel = node.telemetry
    node.prepare_state()
    deadline = perf()
    running = False
    peers = node.peer_count()
    while not node.stopping.is_set():
        if node.jobs:
            node.drain()
        if node.pending_steps:
            running = False
            services.step_pending(node)
            continue
        if not node.runnable() or (node.check_stale(time.monotonic())
                                   and node.stale_policy == "pause"):
            running = False
            peers = _idle(node, peers)
            _wait(node)
            continue
        period = node.step / node.real_time_factor
        if not running:  # (re)start the schedule now
            running = True
            node.prepare_state()
            deadline = perf()
        # wait for the deadline: sleep, then busy-wait the last `spin` seconds
        remaining = deadline - perf()
        while remaining > spin and not node.stopping.is_set():
            _wait(node, min(remaining - spin, WAIT))
            if node.jobs:
                break
            remaining = deadline - perf()
        if node.jobs or node.stopping.is_set():
            continue  # a command or service arrived: handle it, then wait again
        now = perf()
        while now < deadline:
            now = perf()
        node.send_state(step=True)
        jitter.append(now - deadline)
        if node.advance():
            node.prepare_state(step=True)
        done = perf()
        latency.append(done - now)
        deadline += period
        if done > deadline:
            tel.overruns += 1
            tel.overruns_window += 1
            if done - deadline > max_lag:
                node.throttle.warning("behind", f"real time: {done - deadline:.4f} s behind at "
                                      f"t={node.sim.time!r}, re-anchoring the schedule")
                deadline = done
