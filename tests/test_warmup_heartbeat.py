"""`cosim warmup` is never quiet for long (nothing a user runs is silent > 10 s): its
own timer prints a line whenever nothing was printed for HEARTBEAT_S seconds, naming
what runs — also while worker processes import and generate before they print.  With
a fake clock and fake worker jobs: no timing."""
import concurrent.futures

import pytest

from cosim import jit
from cosim.commands import warmup
from cosim.commands.warmup import HEARTBEAT_S, Heartbeat


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_heartbeat_prints_after_every_quiet_stretch_and_names_the_busy_workers():
    clock, lines = FakeClock(), []
    hb = Heartbeat(every=HEARTBEAT_S, clock=clock, out=lines.append)
    assert HEARTBEAT_S < 10.0
    slow, slow2, next_up, queued, done = (concurrent.futures.Future() for _ in range(5))
    for future in (done, slow, slow2, next_up):   # the pool marks one more than its workers
        future.set_running_or_notify_cancel()     # running (the next one in its queue)
    done.set_result(1.0)
    hb.workers = 2                           # two workers, both still importing (silent)
    hb.futures.update({done: "rk4", slow: "generalized-alpha", slow2: "spark", next_up: "bdf",
                       queued: "dopri5"})
    printed_at = []
    for _ in range(400):                     # 0.1 s steps of fake time: 40 s of a silent worker
        clock.now += 0.1
        before = len(lines)
        wait = hb.poll()
        assert 0.0 <= wait <= HEARTBEAT_S
        if len(lines) > before:
            printed_at.append(clock.now)
    gaps = [b - a for a, b in zip([100.0] + printed_at, printed_at)]
    assert len(printed_at) == 4 and all(HEARTBEAT_S <= g < HEARTBEAT_S + 0.11 for g in gaps), gaps
    assert lines[0] == "warmup still busy with generalized-alpha, spark (8 s in all)"
    assert lines[-1] == "warmup still busy with generalized-alpha, spark (32 s in all)"


def test_a_printed_line_restarts_the_quiet_time_and_the_doing_is_named():
    clock, lines = FakeClock(), []
    hb = Heartbeat(every=HEARTBEAT_S, clock=clock, out=lines.append)
    hb.doing = "the URDF robots' kernels"
    clock.now += HEARTBEAT_S - 1.0
    hb.note()                                # a row printed (or a cosim.jit notice)
    clock.now += HEARTBEAT_S - 0.5
    assert hb.poll() == pytest.approx(0.5) and lines == []
    clock.now += 0.5
    hb.poll()
    assert lines == ["warmup still busy with the URDF robots' kernels (15 s in all)"]


def test_notices_of_this_process_count_as_lines_while_it_runs(monkeypatch):
    """jit.say (a compile notice in this process) restarts the count; the heartbeat
    thread stops and unregisters on exit; workers get no periodic lines of their own."""
    clock, lines = FakeClock(), []
    monkeypatch.setattr(jit, "say", lambda message: [f(message) for f in list(jit.listeners)])
    with Heartbeat(every=1e9, clock=clock, out=lines.append) as hb:
        clock.now += 5.0
        jit.say("compiling method bdf …")
        assert hb.last == 105.0
    assert hb.note not in jit.listeners and not hb._thread.is_alive()
    monkeypatch.setattr(jit.compiling, "periodic", True)
    Heartbeat.worker_initializer()
    assert jit.compiling.periodic is False


def test_methods_warmup_tells_the_heartbeat_of_every_row(monkeypatch, capsys):
    """_compile_methods (serial here, with a fake compile): each row restarts the quiet
    time, and the heartbeat names the method being compiled."""
    seen = []

    class Recorder:
        worker_initializer = None
        futures = {}
        doing = ""

        def note(self):
            seen.append(("row", self.doing))

    def fake_compile(method):
        seen.append(("compile", recorder.doing))

    recorder = Recorder()
    monkeypatch.setattr("cosim.integrators.compile_method", fake_compile)
    monkeypatch.setattr(warmup, "_urdf_robots", lambda: [])
    assert warmup._compile_methods(1, recorder) == 0
    from cosim.integrators import METHOD_REGISTRY
    assert [s for s in seen if s[0] == "compile"] == [("compile", f"method {m}")
                                                      for m in sorted(METHOD_REGISTRY)]
    assert sum(s[0] == "row" for s in seen) == len(METHOD_REGISTRY)
    assert len(capsys.readouterr().out.splitlines()) == len(METHOD_REGISTRY)
