"""Telemetry of the plant node: latency samples, whole-run histograms and the
``/diagnostics`` status (built on the executor thread, never on the
simulation thread's real-time path)."""
from __future__ import annotations

import math
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from .common import time_to_msg

HIST_BINS = 10_000  # 1 µs bins up to 10 ms (last bin: longer) for whole-run percentiles


class Histogram:
    """Whole-run latency histogram, 1 µs bins up to 10 ms."""

    def __init__(self):
        self.counts = np.zeros(HIST_BINS, dtype=np.int64)
        self.n = 0
        self.max = 0.0

    def add(self, us):
        """Add samples given in µs (a float array)."""
        if us.size == 0:
            return
        self.max = max(self.max, float(us.max()))
        self.counts += np.bincount(np.clip(us.astype(np.int64), 0, HIST_BINS - 1),
                                   minlength=HIST_BINS)
        self.n += us.size

    def percentiles(self, ps):
        """Upper edges (µs) of the bins holding the given percentiles (inf: beyond 10 ms)."""
        if self.n == 0:
            return [float("nan")] * len(ps)
        cum = np.cumsum(self.counts)
        ranks = [max(math.ceil(p / 100.0 * self.n), 1) for p in ps]
        return [float(i + 1) if i < HIST_BINS - 1 else math.inf
                for i in (int(np.searchsorted(cum, r)) for r in ranks)]


class Telemetry:
    """Counters and samples written by the simulation thread, read by diagnostics.

    Samples (s): real_time ``jitter`` = publication - deadline, ``latency`` =
    step + message preparation; lock_step ``round_trip`` = state published ->
    its command received, ``turnaround`` = command received -> next state
    published."""

    KEYS = ("jitter", "latency", "round_trip", "turnaround")

    def __init__(self, sim_time):
        self.samples = {k: [] for k in self.KEYS}
        self.hist = {k: Histogram() for k in self.KEYS}
        self.rejected = 0
        self.ignored = 0
        self.overruns = 0
        self.overruns_window = 0
        self.steps_window = 0
        self.window_start = time.monotonic()
        self.window_sim_start = sim_time

    def diagnostics(self, node):
        """The DiagnosticArray for the window since the last call."""
        now = time.monotonic()
        wall = max(now - self.window_start, 1e-9)
        sim_time = node.sim.time
        samples = {}
        for key, lst in self.samples.items():  # the simulation thread appends meanwhile
            samples[key] = lst[:]
            del lst[:len(samples[key])]
        steps, self.steps_window = self.steps_window, 0
        overruns, self.overruns_window = self.overruns_window, 0
        sim_dt = sim_time - self.window_sim_start
        self.window_start, self.window_sim_start = now, sim_time
        status = DiagnosticStatus(name=f"{node.get_name()}: cosim simulation",
                                  hardware_id=node.model_label)
        status.level, status.message = DiagnosticStatus.OK, "running"
        if node.step_error is not None:
            status.level, status.message = DiagnosticStatus.ERROR, f"step failed: {node.step_error}"
        elif node.paused:
            status.message = "paused"
        elif node.stale:
            status.level, status.message = DiagnosticStatus.WARN, f"stale inputs ({node.stale_policy})"
        elif overruns:
            status.level, status.message = DiagnosticStatus.WARN, f"{overruns} overruns"
        values = {
            "mode": node.mode, "sim_time": repr(sim_time), "paused": str(node.paused),
            "communication_step": repr(node.step), "real_time_factor": repr(node.real_time_factor),
            "steps_window": str(steps), "achieved_rate_hz": f"{steps / wall:.3f}",
            "achieved_real_time_factor": f"{sim_dt / wall:.5f}",
            "overruns_window": str(overruns), "overruns_total": str(self.overruns),
            "rejected_messages_total": str(self.rejected),
            "ignored_commands_total": str(self.ignored), "stale_inputs": str(node.stale),
        }
        for key, data in samples.items():
            hist = self.hist[key]
            if data:
                arr = np.sort(np.asarray(data)) * 1e6
                hist.add(arr)
                values[f"{key}_p50_us"] = f"{arr[(arr.size - 1) // 2]:.1f}"
                values[f"{key}_p99_us"] = f"{arr[math.ceil(0.99 * arr.size) - 1]:.1f}"
                values[f"{key}_max_us"] = f"{arr[-1]:.1f}"
            if hist.n:
                p50, p99 = hist.percentiles((50, 99))
                values[f"{key}_total_count"] = str(hist.n)
                values[f"{key}_total_p50_us"] = f"{p50:.0f}"  # 'inf': beyond 10 ms
                values[f"{key}_total_p99_us"] = f"{p99:.0f}"
                values[f"{key}_total_max_us"] = f"{hist.max:.1f}"
        for key, value in node.sim.stats.items():
            values[f"sim_{key}"] = str(value)
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        time_to_msg(sim_time, msg.header.stamp)
        return msg

    def summary(self):
        """Whole-run telemetry as a dict (in-process use and benchmarks)."""
        out = {"overruns": self.overruns, "rejected": self.rejected, "ignored": self.ignored}
        for key, hist in self.hist.items():
            p50, p99 = hist.percentiles((50, 99))
            out[key] = {"count": hist.n, "p50_us": p50, "p99_us": p99, "max_us": hist.max}
        return out
