"""`cosim sweep` on Dask (issue 17): a real scheduler and two workers started here on
127.0.0.1, every run of a sweep bit-identical to the same spec run alone, a worker
killed mid-sweep without losing or duplicating a run, same seed -> identical files,
the embedded LocalCluster, and one-line errors (exit 2) for bad input."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import cosim
from cosim.cli import main
from cosim.sweep import connect, make_variations, sweep

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
PD = SCENARIOS / "pendulum_pd.yaml"
DASK = str(Path(sys.executable).with_name("dask"))
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")


def _stop(procs):
    for p in reversed(procs):  # workers first, then the scheduler
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`dask scheduler` + two `dask worker` processes (no nanny: a killed worker stays
    dead) on 127.0.0.1; yields (address, worker processes); stopped by pid."""
    from distributed import Client
    folder = tmp_path_factory.mktemp("dask")
    sched_file = folder / "scheduler.json"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=folder)
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], **quiet)]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        workers = [subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--no-nanny",
                                     "--host", "127.0.0.1", "--no-dashboard"], **quiet) for _ in range(2)]
        procs += workers
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address, workers
    finally:
        _stop(procs)


def _same_run(a, b):
    return (a.time.tobytes() == b.time.tobytes() and a.states.tobytes() == b.states.tobytes()
            and a.outputs.tobytes() == b.outputs.tobytes() and a.final_state == b.final_state
            and a.stats == b.stats and a.metrics == b.metrics)


def _short(tmp_path, stop_time, extra=""):
    """pendulum_pd.yaml with another stop time (CI time) and extra YAML lines."""
    path = tmp_path / f"pendulum_pd_{stop_time}.yaml"
    path.write_text(PD.read_text().replace("stop_time: 4.0", f"stop_time: {stop_time}") + extra)
    return path


def test_fifty_runs_on_a_real_cluster_equal_serial_runs_bit_for_bit(cluster, tmp_path, capsys):
    """pendulum_pd to 2.5 s (past the reference step at 2 s) for 50 rod lengths."""
    address, _ = cluster
    path = _short(tmp_path, 2.5)
    assert main(["sweep", str(path), "--grid", "l=0.5:2.0:50", "--scheduler", address,
                 "--out", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == 50 and summary["failed"] == 0
    runs = pq.read_table(tmp_path / "runs.parquet").to_pydict()
    series = {k: np.asarray(v) for k, v in pq.read_table(tmp_path / "timeseries.parquet").to_pydict().items()}
    assert runs["run"] == list(range(50)) and set(runs["status"]) == {"ok"}
    spec = cosim.load_spec(path)
    for i, l in enumerate(np.linspace(0.5, 2.0, 50)):
        alone = cosim.run(spec.with_parameter("l", float(l)))
        assert runs["l"][i] == float(l)
        assert runs["final:angle"][i] == alone.signal("angle")[-1]
        rows = series["run"] == i
        assert series["time"][rows].tobytes() == alone.time.tobytes()
        assert series["angle"][rows].tobytes() == alone.signal("angle").tobytes()
        assert series["pd.u"][rows].tobytes() == alone.signal("pd.u").tobytes()


def test_a_worker_killed_mid_sweep_loses_and_duplicates_nothing(cluster):
    """SIGKILL one worker after 4 of 16 runs: Dask reschedules what it held; every run
    arrives once, equal to the run alone."""
    from distributed import Client
    address, workers = cluster
    spec = cosim.load_spec(PD).replace(stop_time=1.0)
    variations = make_variations(spec, ["blocks.pd.kp=40:80:16"])
    victim = workers[1]

    def progress(done, total):
        if done == 4 and victim.poll() is None:
            os.kill(victim.pid, signal.SIGKILL)

    with Client(address, timeout="30s") as client:
        result = sweep(spec, variations, client=client, progress=progress)
    assert victim.poll() is not None  # really killed
    assert len(result.results) == 16 and result.failures == []
    assert result.runs_table().column("run").to_pylist() == list(range(16))
    for r, kp in zip(result.results, np.linspace(40, 80, 16)):
        assert _same_run(r, cosim.run(spec.with_parameter("blocks.pd.kp", float(kp))))


def test_same_seed_gives_identical_files_and_records_the_seed(cluster, tmp_path, capsys):
    address, _ = cluster
    spec = _short(tmp_path, 0.5, "metrics:\n  - {signal: angle, kind: max}\n"
                                 "  - {signal: angle, kind: settling_time}\n  - events\n")
    outs = []
    for k in range(2):
        out = tmp_path / f"o{k}"
        assert main(["sweep", str(spec), "--samples", "6", "--dist", "m=normal(1,0.05)",
                     "--dist", "phi0=uniform(0.4,0.8)", "--seed", "1234", "--scheduler", address,
                     "--out", str(out)]) == 0
        outs.append(out)
    text = capsys.readouterr().out
    assert "seed 1234 (lhs)" in text and "max:angle" in text
    for name in ("runs.parquet", "timeseries.parquet"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    table = pq.read_table(outs[0] / "runs.parquet")
    meta = json.loads(table.schema.metadata[b"cosim.sweep"])
    assert meta["seed"] == 1234 and meta["variations"]["dist"] == ["m=normal(1,0.05)", "phi0=uniform(0.4,0.8)"]
    # Latin hypercube: one sample in each sixth of phi0's range
    phi0 = np.sort(table.column("phi0").to_numpy())
    assert np.array_equal(np.floor((phi0 - 0.4) / 0.4 * 6), np.arange(6))


def test_a_list_of_spec_files_is_one_run_each_in_order(cluster, tmp_path, capsys):
    files = [_short(tmp_path, t) for t in (0.3, 0.2)]
    assert main(["sweep", *map(str, files), "--scheduler", cluster[0], "--out", str(tmp_path)]) == 0
    assert "2 runs (specs), 2 ok" in capsys.readouterr().out
    runs = pq.read_table(tmp_path / "runs.parquet").to_pydict()
    assert runs["spec"] == [str(f) for f in files]
    assert runs["final:angle"] == [cosim.run(cosim.load_spec(f)).signal("angle")[-1] for f in files]


def test_embedded_local_cluster_is_the_default(tmp_path, capsys):
    path = _short(tmp_path, 0.5)
    assert main(["sweep", str(path), "--grid", "l=0.8,1.2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 runs (grid), 2 ok, 0 failed" in out and "embedded LocalCluster" in out
    runs = pq.read_table(tmp_path / "runs.parquet").to_pydict()
    spec = cosim.load_spec(path)
    assert runs["final:angle"] == [cosim.run(spec.with_parameter("l", l)).signal("angle")[-1] for l in (0.8, 1.2)]


def test_embedded_workers_listen_on_loopback_with_one_blas_thread():
    client, where, close = connect(workers=1)
    try:
        env = client.run(lambda: {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
        assert list(env.values()) == [{"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}]
        assert all(a.startswith("tls://127.0.0.1:") for a in env) and "1 worker processes x 1 thread" in where
        assert client.scheduler.address.startswith("tls://127.0.0.1:")
    finally:
        close()


def test_a_failed_run_is_recorded_and_the_others_complete(cluster):
    from distributed import Client
    spec = cosim.load_spec(PD).replace(stop_time=0.2)
    variations = make_variations(spec, ["l=-1,1"])  # l = -1: the model rejects it
    with Client(cluster[0], timeout="30s") as client:
        result = sweep(spec, variations, client=client)
    [failure] = result.failures
    assert failure.index == 0 and "parameter 'l' must be in [1e-12, 1e+12]" in failure.error
    table = result.runs_table().to_pydict()
    assert table["status"] == ["failed", "ok"] and np.isnan(table["final:angle"][0])


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args, needle", [
    (["--grid", "lenght=0.5:2:3"], "unknown parameter 'lenght' of model 'pendulum'"),
    (["--grid", "l=2.0:0.5:3"], "empty range"),
    (["--grid", "l=0.5:2.0:0"], "empty range"),
    (["--samples", "4", "--dist", "m=normal(1,-0.05)"], "the spread must be > 0, got -0.05"),
    (["--scheduler", "tcp://127.0.0.1:{port}", "--timeout", "2"], "does not answer within 2 s"),
    (["--spec-file-with-unknown-keys"], "unknown keys ['colour']"),
])
def test_bad_input_is_a_one_line_error_with_exit_code_2(tmp_path, args, needle):
    spec = PD
    if args == ["--spec-file-with-unknown-keys"]:
        spec, args = tmp_path / "bad.yaml", []
        spec.write_text(PD.read_text() + "colour: blue\n")
    args = [a.format(port=_free_port()) for a in args]
    proc = subprocess.run([sys.executable, "-m", "cosim", "sweep", str(spec), *args, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=ENV)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("cosim: error: ") and needle in lines[0], lines[0]
    assert not (tmp_path / "runs.parquet").exists()


def test_ctrl_c_during_an_embedded_sweep_is_one_line_and_stops_every_worker(tmp_path):
    """Ctrl-C in a terminal reaches the sweep's whole process group, the embedded
    cluster's worker processes too: exit 130 and "cosim: interrupted", no Dask traceback
    or error log from the workers or the scheduler, and no process of the group left."""
    proc = subprocess.Popen([sys.executable, "-m", "cosim", "sweep", "pendulum_pd", "--samples", "2000",
                             "--dist", "l=uniform(0.5,2)", "--seed", "1", "--workers", "2",
                             "--out", str(tmp_path / "out")],
                            cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines, deadline = [], time.monotonic() + 180
    try:
        # stderr is a pipe: the progress line comes after 10 s, with the runs under way
        while time.monotonic() < deadline and not any("runs=" in line for line in lines):
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
        assert any("runs=" in line for line in lines), "".join(lines)
        os.killpg(proc.pid, signal.SIGINT)
        rest = proc.communicate(timeout=60)[1]
        for _ in range(100):   # the workers end with the cluster the sweep closed
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail("a process of the sweep's group is still running")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    text = "".join(lines) + rest
    assert proc.returncode == 130, text
    assert "cosim: interrupted" in rest, text
    assert "Traceback" not in text and " ERROR " not in text and "KeyboardInterrupt" not in text, text


def test_the_dask_cancel_race_of_ctrl_c_logs_nothing_during_a_sweep():
    """Ctrl-C reaching ``distributed.utils.sync`` before its call started makes Dask's
    cancel callback (``sync.<locals>.cancel``) raise NameError on the IO loop, which
    tornado logs with a traceback (a Dask race the Ctrl-C test above met now and then).
    The same record is made here on a real tornado IO loop, by a callback of that name
    raising NameError: the filter a sweep installs keeps it from every handler, and other
    errors of the loop, a NameError of another callback included, are still shown."""
    import importlib
    import logging

    import distributed.utils as dask_utils
    sweep_module = importlib.import_module("cosim.sweep")
    made, shown = [], []

    class Spy(logging.Filter):
        def filter(self, record):
            made.append(record)
            return True

    class Keep(logging.Handler):
        def emit(self, record):
            shown.append(record)

    def sync():   # named like Dask's, so tornado's record names sync.<locals>.cancel
        def cancel():
            raise NameError("cannot access free variable 'fut'")
        return cancel

    def other():
        raise NameError("name 'x' is not defined")

    logger = logging.getLogger("tornado.application")
    spy, keep = Spy(), Keep()
    sweep_module._drop_the_cancel_race_record()
    logger.filters.insert(0, spy)
    logger.addHandler(keep)
    runner = dask_utils.LoopRunner(asynchronous=False)
    runner.start()
    try:
        for callback in (sync(), other):
            count = len(made)
            runner.loop.add_callback(callback)
            for _ in range(250):   # the callback runs on the loop's thread
                if len(made) > count:
                    break
                time.sleep(0.02)
    finally:
        runner.stop()
        logger.removeFilter(spy)
        logger.removeHandler(keep)
    assert len(made) == 2, [r.getMessage() for r in made]
    assert all(isinstance(r.exc_info[1], NameError) for r in made)
    assert "sync.<locals>.cancel" in made[0].getMessage()
    assert [r.exc_info[1].args[0] for r in shown] == ["name 'x' is not defined"]
