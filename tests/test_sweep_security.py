"""`cosim sweep` security and bounds: the embedded cluster is TLS with a certificate made
for the run (a client without it -- no TLS, plain TCP, another run's certificate, a bare
TLS handshake without a client certificate -- is refused and runs nothing); `--scheduler`
takes tls:// with the user's Dask TLS configuration, warns once about plain TCP to
another machine and refuses every bad value in one line (exit 2); the number of runs is
checked before anything is drawn or built, and runs are made one at a time."""
import json
import os
import socket
import subprocess
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.cli import main
from cosim.errors import SpecError
from cosim.sweep import ClusterError, PlainTCPWarning, _security_for, connect, sweep
from cosim.variations import MAX_RUNS, RunTable, SpecsOf, make_variations, sample

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
PD = SCENARIOS / "pendulum_pd.yaml"
DASK = str(Path(sys.executable).with_name("dask"))
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")

# Run in another process: each way in either fails or runs a function that writes MARKER.
INTRUDER = r'''
import json, socket, ssl, sys
from distributed import Client
from distributed.security import Security
address, marker = sys.argv[1:3]
outcome = {}

def attempt(how, addr, **kw):
    try:
        client = Client(addr, timeout="5s", **kw)
        client.submit(lambda m: open(m, "w").write(how), marker, pure=False).result(timeout=20)
        outcome[how] = "ran"
    except Exception as exc:
        outcome[how] = f"refused: {type(exc).__name__}"

attempt("no credentials", address)
attempt("plain tcp", address.replace("tls://", "tcp://"))
attempt("another run's certificate", address, security=Security.temporary())
# a bare TLS client that does not check the server and has no certificate of its own
host, port = address[len("tls://"):].rsplit(":", 1)
ctx = ssl.create_default_context()
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
try:
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with ctx.wrap_socket(raw) as tls:
            tls.sendall(b"\x00" * 64)
            data = tls.recv(1024)  # TLS 1.3: the missing certificate is reported here
            outcome["TLS without a client certificate"] = "answered" if data else "refused: closed"
except (ssl.SSLError, OSError) as exc:
    outcome["TLS without a client certificate"] = f"refused: {type(exc).__name__}"
print(json.dumps(outcome))
'''


def test_embedded_cluster_refuses_every_client_without_its_certificate(tmp_path):
    marker = tmp_path / "intruder_ran"
    client, where, close = connect(workers=1)
    try:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:") and "TLS" in where
        proc = subprocess.run([sys.executable, "-c", INTRUDER, address, str(marker)], capture_output=True,
                              text=True, timeout=240, env=ENV)
        outcome = json.loads(proc.stdout.strip().splitlines()[-1])
        assert len(outcome) == 4 and all(v.startswith("refused") for v in outcome.values()), outcome
        assert not marker.exists()  # no function of the intruder ran
        # the cluster still serves its own client, and no worker shows the key on its command line
        pids = client.run(os.getpid)
        assert client.submit(lambda x: x + 1, 41, pure=False).result(timeout=60) == 42
        for pid in pids.values():
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert b"PRIVATE KEY" not in cmdline and b"CERTIFICATE" not in cmdline
        # no dashboard: the scheduler's HTTP server (loopback) answers health checks only
        import urllib.error
        import urllib.request
        port = client.scheduler_info()["services"]["dashboard"]
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).status == 200
        for page in ("/info/main/workers.html", "/json/counts.json", "/status"):
            with pytest.raises(urllib.error.HTTPError, match="404"):
                urllib.request.urlopen(f"http://127.0.0.1:{port}{page}", timeout=10)
    finally:
        close()


def _tls_files(folder):
    """A CA/certificate/key for a TLS Dask cluster, as files (Security.temporary's)."""
    from distributed.security import Security
    sec = Security.temporary()
    files = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    files["ca"].write_text(sec.tls_ca_file)
    files["cert"].write_text(sec.tls_client_cert)
    files["key"].write_text(sec.tls_client_key)
    files["key"].chmod(0o600)
    return files


def _stop(procs):
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_tls_scheduler_with_the_users_dask_tls_configuration(tmp_path):
    """`dask scheduler`/`dask worker` with TLS; `cosim sweep --scheduler tls://...` (and the
    scheduler file) with DASK_DISTRIBUTED__COMM__TLS__* set: the runs equal the serial ones;
    without that configuration: one line naming the settings."""
    files = _tls_files(tmp_path)
    tls = ["--tls-ca-file", str(files["ca"]), "--tls-cert", str(files["cert"]), "--tls-key", str(files["key"])]
    sched_file = tmp_path / "scheduler.json"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=tmp_path)
    procs = [subprocess.Popen([DASK, "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file), *tls], **quiet)]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tls://127.0.0.1:")
        procs.append(subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--no-nanny",
                                       "--host", "127.0.0.1", "--no-dashboard", *tls], **quiet))
        spec = tmp_path / "pd.yaml"
        spec.write_text(PD.read_text().replace("stop_time: 4.0", "stop_time: 0.3"))
        conf = dict(ENV, DASK_DISTRIBUTED__COMM__TLS__CA_FILE=str(files["ca"]),
                    DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=str(files["cert"]),
                    DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=str(files["key"]))
        base = [sys.executable, "-m", "cosim", "sweep", str(spec), "--grid", "l=0.8,1.2", "--timeout", "60",
                "--json"]
        for where in (address, str(sched_file)):
            out = tmp_path / f"out_{len(where)}"
            proc = subprocess.run(base + ["--scheduler", where, "--out", str(out)], capture_output=True,
                                  text=True, timeout=300, env=conf)
            assert proc.returncode == 0, proc.stderr
            summary = json.loads(proc.stdout)
            assert summary["runs"] == 2 and summary["failed"] == 0 and summary["cluster"] == f"cluster {address}"
        plain = subprocess.run(base + ["--scheduler", address, "--out", str(tmp_path / "o")], capture_output=True,
                               text=True, timeout=120, env=ENV)
        lines = [x for x in plain.stderr.splitlines() if x.strip()]
        assert plain.returncode == 2 and len(lines) == 1, plain.stderr
        assert "uses TLS: set the cluster's CA and your client certificate" in lines[0]
        assert "distributed.comm.tls.ca-file" in lines[0]
    finally:
        _stop(procs)


def test_plain_tcp_to_another_machine_is_warned_about_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _security_for("tcp://127.0.0.1:8786", "127.0.0.1")
        _security_for("tcp://localhost:8786", "localhost")
        _security_for("tcp://[::1]:8786", "::1")
        assert caught == []  # loopback: no warning
        _security_for("tcp://10.11.12.13:8786", "10.11.12.13")
        _security_for("tcp://10.11.12.13:8786", "10.11.12.13")
        _security_for("tcp://scheduler.example:8786", "scheduler.example")
    messages = [str(w.message) for w in caught if issubclass(w.category, PlainTCPWarning)]
    assert len(messages) == 2
    assert "plain TCP to another machine" in messages[0] and "tls://" in messages[0]
    assert "tcp://10.11.12.13:8786" in messages[0] and "scheduler.example" in messages[1]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bad_scheduler_values(tmp_path):
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"address": "tcp://127.0.0.1:1", "pad": "x" * 100_000}))
    not_scheduler = tmp_path / "other.json"
    not_scheduler.write_text('{"adress": "tcp://127.0.0.1:1"}')
    bad_address = tmp_path / "bad_address.json"
    bad_address.write_text('{"address": "file:///etc/passwd"}')
    return [
        (["--scheduler", str(tmp_path / "missing.json"), "--timeout", "0.5"],
         f"scheduler file '{tmp_path / 'missing.json'}' does not exist (waited 0.5 s, --timeout)"),
        (["--scheduler", "/etc/passwd"], "'/etc/passwd' is not a Dask scheduler file"),
        (["--scheduler", str(tmp_path)], "is not a file: give tls://HOST:PORT"),
        (["--scheduler", str(big)], "bytes, more than 65536"),
        (["--scheduler", str(not_scheduler)], "is not a Dask scheduler file"),
        (["--scheduler", str(bad_address)], "give tls://HOST:PORT, tcp://HOST:PORT or a Dask scheduler file"),
        (["--scheduler", "nonsense://x"], "--scheduler 'nonsense://x': give tls://HOST:PORT"),
        (["--scheduler", "tcp://127.0.0.1:99999"], "with a port from 1 to 65535"),
        (["--scheduler", "tcp://:8786"], "expected tcp://HOST:PORT"),
        (["--scheduler", "127.0.0.1:8786"], "give the scheme, tls://127.0.0.1:8786 or tcp://127.0.0.1:8786"),
        (["--scheduler", f"tls://127.0.0.1:{_free_port()}"], "uses TLS: set the cluster's CA"),
        (["--scheduler", f"tcp://127.0.0.1:{_free_port()}", "--timeout", "1"], "does not answer within 1 s"),
        (["--timeout", "nan"], "--timeout must be a finite number of seconds > 0, got nan"),
        (["--timeout", "inf"], "--timeout must be a finite number of seconds > 0, got inf"),
        (["--timeout", "0"], "--timeout must be a finite number of seconds > 0, got 0.0"),
        (["--scheduler", "tcp://127.0.0.1:1", "--timeout=-inf"], "got -inf"),
    ]


def test_every_bad_scheduler_value_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    for var in ("DASK_DISTRIBUTED__COMM__TLS__CA_FILE", "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"):
        monkeypatch.delenv(var, raising=False)
    spec = tmp_path / "pd.yaml"
    spec.write_text(PD.read_text().replace("stop_time: 4.0", "stop_time: 0.2"))
    for args, needle in _bad_scheduler_values(tmp_path):
        out = tmp_path / "o"
        assert main(["sweep", str(spec), *args, "--out", str(out)]) == 2, args
        captured = capsys.readouterr()
        lines = [x for x in captured.err.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("cosim: error: "), (args, captured.err)
        assert needle in lines[0], (args, lines[0])
        assert not (out / "runs.parquet").exists()


def test_an_existing_cluster_without_workers_is_an_error_within_the_timeout(tmp_path, capsys):
    sched_file = tmp_path / "scheduler.json"
    proc = subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                             "--scheduler-file", str(sched_file)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=ENV, cwd=tmp_path)
    try:
        # the scheduler writes its file once it listens (seconds on a loaded machine): wait for
        # it, bounded, so that the 1 s below is the wait for a worker
        deadline = time.monotonic() + 60.0
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sched_file.exists(), "the dask scheduler did not start within 60 s"
        with pytest.raises(ClusterError, match=r"has no worker \(waited 1 s, --timeout\): start some with "
                                               r"`dask worker tcp://127\.0\.0\.1:"):
            connect(str(sched_file), timeout=1)  # waits for the file (up to 1 s), then 1 s for a worker
    finally:
        _stop([proc])


# -- the number of runs, before anything is built; runs made one at a time ---------------------
def test_the_run_count_is_refused_before_anything_is_drawn_or_built(capsys, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("sampled before the run count was checked")
    monkeypatch.setattr("cosim.variations.sample", must_not_run)
    assert main(["sweep", str(PD), "--grid", "l=0.5:2:100000", "--grid", "rtol=1e-6:1e-3:100000",
                 "--out", "never_written"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"cosim: error: 10000000000 runs (100000 x 100000), more than the limit of {MAX_RUNS} "
                   f"runs a sweep makes"]
    spec = cosim.load_spec(PD)
    with pytest.raises(SpecError, match=r"2000000 runs \(1000 x 2000\), more than the limit"):
        make_variations(spec, ["l=0.5:2:1000"], ["m=normal(1,0.05)"], samples=2000)
    assert not os.path.exists("never_written")


def test_a_million_samples_are_columns_not_a_million_specs():
    """1e6 Latin-hypercube samples: made in bounded memory (the columns, ~8 MB each), each run
    made when asked for and equal to the drawn sample; the specs are made one at a time."""
    spec = cosim.load_spec(PD)
    tracemalloc.start()
    try:
        variations = make_variations(spec, ["l=1,2"], ["m=normal(1,0.05)", "phi0=uniform(0.4,0.8)"],
                                     samples=500_000, seed=7)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(variations) == MAX_RUNS and peak < 150e6, peak  # the old list of runs: > 1 GB
    cols, seed = sample({"m": ("normal", 1.0, 0.05), "phi0": ("uniform", 0.4, 0.8)}, 500_000, 7,
                        columns=True)
    for i in (0, 1, 499_999, 500_000, 777_777, MAX_RUNS - 1):
        k = i % 500_000
        assert variations.runs[i] == (("l", 1.0 if i < 500_000 else 2.0), ("m", float(cols["m"][k])),
                                      ("phi0", float(cols["phi0"][k])))
    assert np.array_equal(variations.column("phi0")[500_000:], cols["phi0"])
    specs = SpecsOf(spec, variations)
    assert len(specs) == MAX_RUNS and specs[777_777].params["m"] == float(cols["m"][277_777])


def test_run_table_is_the_full_factorial_in_row_major_order():
    import itertools
    axes = [("a", [1.0, 2.0, 3.0]), ("b", [10.0, 20.0]), ("c", [0.1, 0.2, 0.3, 0.4])]
    samples = {"s": np.array([7.0, 8.0])}
    table = RunTable(axes, samples, 2)
    expected = [tuple(zip("abc", combo)) + (("s", s),) for combo in itertools.product(*[v for _, v in axes])
                for s in (7.0, 8.0)]
    assert len(table) == 48 and list(table) == expected and table[-1] == expected[-1]
    for name in ("a", "b", "c", "s"):
        assert table.column(name).tolist() == [dict(r)[name] for r in expected]
    with pytest.raises(IndexError):
        table[48]


def test_a_sweep_makes_its_specs_as_runs_are_submitted(monkeypatch):
    """40 runs on one embedded worker: when the first run finishes, at most the window
    (16 in flight, plus the first spec checked beforehand) of specs has been made."""
    made = []
    original = SpecsOf.__getitem__

    def counting(self, i):
        made.append(i)
        return original(self, i)

    monkeypatch.setattr(SpecsOf, "__getitem__", counting)
    spec = cosim.load_spec(PD).replace(stop_time=0.05)
    variations = make_variations(spec, ["l=0.5:2:40"])
    at_first = []
    client, _, close = connect(workers=1)
    try:
        result = sweep(spec, variations, client=client,
                       progress=lambda done, total: at_first.append(len(made)) if done == 1 else None)
    finally:
        close()
    assert len(result.results) == 40 and result.failures == []
    assert at_first and at_first[0] <= 17, at_first
    assert sorted(set(made)) == list(range(40))
    assert result.runs_table().column("l").to_pylist() == np.linspace(0.5, 2, 40).tolist()


def test_a_refused_value_at_a_grid_end_is_an_error_before_the_cluster_starts(capsys, monkeypatch):
    monkeypatch.setattr(sys.modules["cosim.sweep"], "connect", lambda *a, **k: pytest.fail("cluster started"))
    assert main(["sweep", str(PD), "--grid", "rtol=-1e-3,1e-6", "--out", "never_written"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rtol" in err[0] and "-0.001" in err[0], err
