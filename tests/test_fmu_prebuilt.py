"""A prebuilt FMU binary (``python -m fmu.native prebuild``): ``cosim fmu build`` uses it and
needs no compiler; one for other sources (a stale digest) is never used."""
import subprocess
import sys

import numpy as np
import pytest

import cosim

pytest.importorskip("fmpy")
pytest.importorskip("pythonfmu")
import fmu.native as native  # noqa: E402
from fmu.builder import build_fmu  # noqa: E402

pytestmark = pytest.mark.fmu


def test_prebuilt_binary_makes_fmus_without_a_compiler(tmp_path, monkeypatch):
    """Prebuilt into a folder, then with no compiler and an empty cache: build_fmu takes the
    prebuilt binary, and the FMU runs in fmpy identically to cosim.Simulation (max difference
    0); a prebuilt folder holding only another digest is ignored (the build then fails with
    the compiler message)."""
    if native._compiler() is None:
        pytest.skip("no C++ compiler to prebuild with")
    prebuilt = tmp_path / "prebuilt"
    proc = subprocess.run([sys.executable, "-m", "fmu.native", "prebuild", str(prebuilt)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    binary = prebuilt / native.source_digest() / "cosim_fmi2.so"
    assert proc.stdout.splitlines()[-1] == str(binary) and binary.is_file()

    monkeypatch.delenv("COSIM_CACHE_DIR", raising=False)   # (it would name a filled cache)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(native, "_compiler", lambda: None)
    monkeypatch.setattr(native, "PREBUILT", prebuilt)
    assert native.native_library() == binary
    path = build_fmu("pendulum", tmp_path / "Pendulum.fmu", backend="python")
    from fmpy import simulate_fmu
    res = simulate_fmu(str(path), stop_time=0.2, output_interval=0.01, output=["angle"])
    sim = cosim.Simulation(model="pendulum", method="dopri5", backend="python")  # the FMU's default
    want = [sim.get_output_dict()["angle"]]
    for k in range(20):
        sim.do_step(k * 0.01, (k + 1) * 0.01 - k * 0.01)
        want.append(sim.get_output_dict()["angle"])
    assert np.max(np.abs(res["angle"] - np.array(want))) == 0.0

    stale = tmp_path / "stale"
    (stale / "0123456789abcdef").mkdir(parents=True)
    (stale / "0123456789abcdef" / "cosim_fmi2.so").write_bytes(binary.read_bytes())
    monkeypatch.setattr(native, "PREBUILT", stale)
    with pytest.raises(native.NativeBuildError, match="needs a C\\+\\+17 compiler"):
        native.native_library()
