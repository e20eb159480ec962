"""Issue 14 item 3: every CLI error is one line on stderr with exit code 2 --
output paths checked before the run, YAML read with the bounded safe loader,
scenario paths taken literally.  Each probe class of the issue is one case.

The probes run ``cosim.cli.main`` in-process (its exit code and stderr are what
the console script prints); one case runs the real ``python -m cosim``.
"""
import os
import subprocess
import sys

import pytest

from cosim.cli import main
from cosim.errors import SpecError
from cosim.safe_yaml import MAX_DEPTH, MAX_NODES, load_text


def one_line_error(capsys, argv, needle):
    rc = main(argv)
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, (out, err)
    assert len(lines) == 1 and lines[0].startswith("cosim: error: "), err
    assert needle in lines[0], err
    return lines[0]


def alias_bomb():
    """'billion laughs': 9 levels of 9 aliases -> 9**10 strings from ~700 bytes."""
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 10):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "model: pendulum\nparams:\n  " + "\n  ".join(lines) + "\n"


YAML_PROBES = {  # file text -> what the one error line says
    "list_params": ("model: pendulum\nparams: [1, 2]\n", "params must be a mapping, got list"),
    "binary": (bytes(range(256)) * 4, "is not UTF-8 text"),
    "alias_bomb": (alias_bomb(), f"more than {MAX_NODES} values"),
    "recursive_alias": ("model: pendulum\nparams: &a\n  x: *a\n", "recursive alias"),
    "deep_nesting": ("model: pendulum\nparams: " + "[" * 5000 + "]" * 5000 + "\n",
                     f"nested more than {MAX_DEPTH} levels deep (line 2)"),
    "syntax": ("model: pendulum\nparams: {l: [1, 2}\n", "is not valid YAML: line 2, column 18: expected"),
    "python_tag": ("model: !!python/object/apply:os.system ['echo pwned']\n",
                   "is not valid YAML: line 1, column 8: could not determine a constructor"),
    "huge_integer": ("model: pendulum\nparams: {l: " + "1" * 5000 + "}\n", "a value cannot be read"),
    "too_big": ("model: pendulum\n#" + "x" * (1 << 20) + "\n", "bytes, more than 1048576"),
}


@pytest.mark.parametrize("case", sorted(YAML_PROBES))
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_hostile_yaml_is_one_line_error(tmp_path, capsys, command, case):
    text, needle = YAML_PROBES[case]
    path = tmp_path / f"{case}.yaml"
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    one_line_error(capsys, [command, str(path)] + (["--out", str(tmp_path / "o")] if command == "sweep" else []),
                   needle)
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_bounded_loader_directly():
    with pytest.raises(SpecError, match="recursive alias"):
        load_text("&a [*a]", "x")
    assert load_text("a: &v [1, 2]\nb: *v\n", "x") == {"a": [1, 2], "b": [1, 2]}  # aliases still work


def test_ros_parameter_file_is_read_with_the_bounded_loader(tmp_path):
    from ros_nodes.process import check_params_file_sections
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb().replace("model: pendulum\nparams:", "sim_node:\n  ros__parameters:"))
    error = check_params_file_sections(["--params-file", str(bomb)], "/sim_node")
    assert error is not None and f"more than {MAX_NODES} values" in error and "\n" not in error
    missing = str(tmp_path / "missing.yaml")
    assert check_params_file_sections(["--params-file", missing], "/sim_node").startswith(
        f"cannot read parameter file {missing!r}: No such file or directory (a shipped file by "
        f"name: -p config:=NAME, NAME one of pd_pendulum, ")


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("name: ok\nmodel: pendulum\nmethod: generalized-alpha\nstop_time: 0.05\n"
                    "communication_step: 0.01\n")
    return str(path)


def output_probes(tmp_path):
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("x")
    folder = tmp_path / "folder"
    folder.mkdir()
    missing = tmp_path / "no" / "such" / "dir"
    return {  # option value -> needle, per kind of output
        "file": [(str(missing / "x.csv"), f"no directory '{missing}'"),
                 (str(folder), "is a directory; give a file name"),
                 (str(a_file / "x.csv"), f"'{a_file}' is not a directory")],
        "plot": [(str(missing / "x.png"), f"no directory '{missing}'"),
                 (str(folder), "is a directory; give a file name"),
                 (str(tmp_path / "x.foo"), "give a file name ending in .png"),
                 (str(a_file / "x.png"), f"'{a_file}' is not a directory")],
        "dir": [(str(missing / "out"), f"no directory '{missing}'"),
                (str(a_file), "exists and is not a directory")],
    }


@pytest.mark.parametrize("command, option, kind", [
    ("simulate", "--out", "file"), ("simulate", "--plot", "plot"), ("run", "--out", "file"),
    ("run", "--plot", "plot"), ("sweep", "--out", "dir"), ("sweep", "--plot", "plot"),
    ("fmu", "--output", "file"), ("new-model", "--output", "file"), ("demo", "--out-dir", "dir")])
def test_output_paths_are_checked_before_the_run(tmp_path, capsys, scenario, command, option, kind):
    argv = {"simulate": ["simulate", "pendulum", "--t-end", "0.05"], "run": ["run", scenario],
            "sweep": ["sweep", scenario, "--out", str(tmp_path / "sweep_out")],
            "fmu": ["fmu", "build", "pendulum"], "new-model": ["new-model", "my_model"],
            "demo": ["demo"]}[command]
    before = sorted(os.listdir(tmp_path))
    for value, needle in output_probes(tmp_path)[kind]:
        before = sorted(os.listdir(tmp_path))
        value = value.replace(".csv", ".py") if command == "new-model" else value
        line = one_line_error(capsys, argv + [option, value], needle)
        assert line.startswith(f"cosim: error: {option} ")
        assert sorted(os.listdir(tmp_path)) == before  # nothing written, no folder created


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only directory")
def test_unwritable_output_directory(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        one_line_error(capsys, ["simulate", "pendulum", "--t-end", "0.05", "--out", str(locked / "x.csv")],
                       "is not writable")
    finally:
        locked.chmod(0o755)


def test_scenario_paths_are_taken_literally(tmp_path, capsys, monkeypatch):
    """A path with a folder never falls back to the shipped scenario of that name;
    a bare name that is not a file here does."""
    monkeypatch.chdir(tmp_path)
    for given in ("/no/such/dir/pendulum_pd.yaml", "./pendulum_pd.yaml", "pendulum_pd/",
                  str(tmp_path / "pendulum_pd")):
        one_line_error(capsys, ["run", given, "--json"], f"cannot read scenario {given!r}: ")
    assert main(["run", "pendulum_pd", "--t-end", "0.02", "--json"]) == 0  # bare name: shipped
    capsys.readouterr()
    (tmp_path / "pendulum_pd.yaml").write_text("model: pendulum\nparams: [1]\n")
    one_line_error(capsys, ["run", "pendulum_pd.yaml"], "params must be a mapping")  # the local file wins


def test_console_script_prints_one_line_for_a_missing_scenario_path():
    proc = subprocess.run([sys.executable, "-m", "cosim", "run", "/no/such/dir/pendulum_pd.yaml"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("cosim: error: cannot read scenario '/no/such/dir/pendulum_pd.yaml': "
                                  "No such file or directory") and proc.stderr.count("\n") == 1
