"""Spec and scenario files import nothing: their `model` is a library name or a robot and a
block's `function` one of cosim.code_refs.BLOCK_FUNCTIONS; anything else is refused in one
line before any import, in `cosim run`, `cosim sweep` and `cosim fmu build` (even with the
current folder on sys.path, as `python -m cosim` has it), and `cosim fmu build` no longer
adds the current folder to sys.path.  A planted evil_blk.py in the current folder writes a
marker file when imported: it never exists afterwards."""
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import cosim
from cosim.blocks import make_block
from cosim.code_refs import BLOCK_FUNCTIONS
from cosim.errors import InvalidInputError, SpecError
from cosim.scenario import Scenario
from cosim.spec import SimulationSpec

REPO = Path(__file__).resolve().parents[1]
PD = (REPO / "scenarios" / "pendulum_pd.yaml").read_text()
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))


@pytest.fixture
def planted(tmp_path):
    """tmp_path with evil_blk.py (writes MARKER when imported) and three scenarios naming it."""
    marker = tmp_path / "MARKER"
    (tmp_path / "evil_blk.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\n"
        "from cosim.models.pendulum import Pendulum as Plant\n"
        "def f(t, inputs, state, params):\n    return {'reference': 0.0, 'alarm': 0.0}\n")
    assert "model: pendulum" in PD and "function: cosim.blocks:supervisor" in PD
    files = {
        "model": PD.replace("model: pendulum", 'model: "evil_blk:Plant"'),
        "installed": PD.replace("model: pendulum", "model: 'this:X'"),
        "function_file": PD.replace("function: cosim.blocks:supervisor", 'function: "evil_blk.py:f"'),
        "function_module": PD.replace("function: cosim.blocks:supervisor", 'function: "evil_blk:f"'),
        "model_mapping": PD.replace("model: pendulum", "model: {name: 'evil_blk:Plant'}"),
    }
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path, marker


NEEDLES = {
    "model": "model 'evil_blk:Plant': a spec or scenario file names a library model",
    "installed": "model 'this:X': a spec or scenario file names a library model",
    "function_file": "block 'supervisor': function 'evil_blk.py:f' is not one of cosim.blocks:supervisor",
    "function_module": "block 'supervisor': function 'evil_blk:f' is not one of cosim.blocks:supervisor",
    "model_mapping": "model 'evil_blk:Plant': a spec or scenario file names a library model",
}


@pytest.mark.parametrize("command", ["run", "sweep", "fmu build"])
@pytest.mark.parametrize("case", sorted(NEEDLES))
def test_a_file_naming_code_is_refused_before_any_import(planted, command, case):
    """`python -m cosim` from the folder of evil_blk.py (the current folder is on sys.path)."""
    folder, marker = planted
    if command == "fmu build":
        pytest.importorskip("pythonfmu")
    extra = {"run": [], "sweep": ["--out", str(folder / "out")],
             "fmu build": ["-o", str(folder / "x.fmu")]}[command]
    proc = subprocess.run([sys.executable, "-m", "cosim", *command.split(), f"{case}.yaml", *extra],
                          capture_output=True, text=True, timeout=300, env=ENV, cwd=folder)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"cosim: error: {case}.yaml: ") and NEEDLES[case] in lines[0], lines[0]
    assert "nothing was imported" in lines[0]
    assert not marker.exists()  # evil_blk never ran
    assert "Beautiful is better than ugly" not in proc.stdout + proc.stderr  # `this` never ran
    assert not (folder / "out").exists() and not (folder / "x.fmu").exists()


def test_the_library_api_refuses_file_data_naming_code(planted, monkeypatch):
    folder, marker = planted
    monkeypatch.syspath_prepend(str(folder))  # even importable, it is not imported
    had_this = "this" in sys.modules
    for case in NEEDLES:
        with pytest.raises(SpecError, match="nothing was imported"):
            cosim.load_spec(folder / f"{case}.yaml")
        with pytest.raises(SpecError, match="nothing was imported"):
            SimulationSpec.from_yaml((folder / f"{case}.yaml").read_text(), source=case)
        with pytest.raises(SpecError, match="nothing was imported"):
            Scenario.load(folder / f"{case}.yaml")
    assert not marker.exists() and "evil_blk" not in sys.modules
    assert had_this or "this" not in sys.modules
    # the shipped scenario's own block function is on the allow-list and still runs
    assert "cosim.blocks:supervisor" in BLOCK_FUNCTIONS
    assert cosim.load_spec("pendulum_pd").blocks


def test_a_block_function_naming_a_file_is_never_imported(planted, monkeypatch):
    """In Python a block may name an importable module:function; `file.py:f` is refused
    before the import (importing `evil_blk.py` would run evil_blk first)."""
    folder, marker = planted
    monkeypatch.syspath_prepend(str(folder))
    for spec in ("evil_blk.py:f", f"{folder}/evil_blk.py:f"):
        with pytest.raises(InvalidInputError, match="names a file, not an importable module"):
            make_block({"type": "user", "name": "b", "sample_time": 0.1, "function": spec,
                        "outputs": ["reference", "alarm"]})
    assert not marker.exists() and "evil_blk" not in sys.modules


def test_fmu_build_does_not_add_the_current_folder_to_sys_path(planted, monkeypatch, capsys):
    pytest.importorskip("pythonfmu")
    from cosim.cli import main
    folder, marker = planted
    monkeypatch.chdir(folder)
    before = list(sys.path)
    assert main(["fmu", "build", "evil_blk:Plant", "-o", str(folder / "x.fmu")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No module named 'evil_blk'" in err[0], err
    assert sys.path == before and not marker.exists() and not (folder / "x.fmu").exists()


def test_the_fmu_slave_refuses_code_its_configuration_does_not_bundle():
    from fmu.slave import CosimSlave
    slave = SimpleNamespace(_package="cosim_fmu_0123", _cfg={"user_modules": ["fragile_model"]})
    assert CosimSlave._private(slave, "fragile_model:Fragile") == "cosim_fmu_0123.fragile_model:Fragile"
    assert CosimSlave._private(slave, "cosim.blocks:supervisor") == "cosim_fmu_0123.cosim.blocks:supervisor"
    assert CosimSlave._private(slave, "fmu.examples:NoPlant") == "cosim_fmu_0123.fmu.examples:NoPlant"
    assert CosimSlave._private(slave, "pendulum") == "pendulum"
    for spec in ("os:system", "this:X", "evil_blk:Plant", "cosim.jit:cache_dir"):
        with pytest.raises(InvalidInputError, match="that this FMU does not bundle"):
            CosimSlave._private(slave, spec)
