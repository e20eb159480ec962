"""A command whose optional extra is missing prints one line naming the extra and
the pip command, and exits with status 2 (no traceback).

Each case runs the real console script in a subprocess in which the extra's
module is hidden: a ``sitecustomize`` shim puts ``sys.modules[name] = None``
before anything else is imported, which is what an environment without the
extra looks like to ``import name``.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
URDF = REPO / "cosim" / "data" / "urdf" / "two_link.urdf"


def run_hidden(tmp_path, modules, argv, timeout=120):
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shim), str(REPO)]),
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", MPLBACKEND="Agg")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run([str(a) for a in argv], cwd=work, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


CASES = [
    # (hidden modules, command line, extra)
    (["distributed"], [BIN / "cosim", "sweep", "pendulum_pd", "--grid", "pd.kp=1:2:2"], "sweep"),
    (["pyarrow"], [BIN / "cosim", "sweep", "pendulum_pd"], "sweep"),
    (["numba"], [BIN / "cosim", "warmup", "pendulum"], "fast"),
    (["pythonfmu"], [BIN / "cosim", "fmu", "build", "pendulum", "-o", "P.fmu"], "fmu"),
    (["pinocchio"], [BIN / "cosim", "simulate", URDF, "--t-end", "0.01"], "robots"),
    (["rclpy"], [BIN / "cosim-ros", "--help"], "ros"),
    (["rclpy"], [BIN / "cosim-ros"], "ros"),
    (["rclpy"], [BIN / "cosim-ros", "--ros-args", "-p", "config:=two_link_real_time"], "ros"),
    (["rclpy"], [sys.executable, "-m", "ros_nodes.sim_node", "--help"], "ros"),
    (["rclpy"], [sys.executable, "-m", "ros_nodes.pd_controller", "--help"], "ros"),
]


@pytest.mark.parametrize("hidden,argv,extra", CASES,
                         ids=[f"{' '.join(Path(str(a)).name for a in c[1][:3])}-without-{c[0][0]}"
                              for c in CASES])
def test_missing_extra_is_one_line_naming_it(tmp_path, hidden, argv, extra):
    proc = run_hidden(tmp_path, hidden, argv)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert f"cosim-mbs[{extra}]" in lines[0], lines[0]
    assert ": error: " in lines[0]


def test_the_sweep_names_its_extra_from_python(tmp_path):
    code = ("import cosim\n"
            "try:\n"
            "    cosim.sweep(cosim.load_spec('pendulum_pd'))\n"
            "except cosim.errors.MissingExtraError as exc:\n"
            "    print(exc)\n")
    proc = run_hidden(tmp_path, ["distributed"], [sys.executable, "-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("cosim.sweep needs the 'sweep' extra (distributed is not "
                                   "installed): pip install 'cosim-mbs[sweep]'")


def test_sweep_in_a_script_without_main_guard_says_what_to_add(tmp_path):
    """Worker processes import the main script again; called from its top level the
    sweep refuses in one line before any process starts (no 'Nanny failed')."""
    pytest.importorskip("distributed")
    script = tmp_path / "work" / "sweep_script.py"
    script.parent.mkdir()
    script.write_text("import cosim\n"
                      "spec = cosim.load_spec('pendulum_pd').replace(stop_time=0.1)\n"
                      "cosim.sweep(spec, workers=1)\n")
    proc = subprocess.run([sys.executable, script.name], cwd=script.parent, capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("cosim.sweep.ClusterError: cosim.sweep starts worker processes")
    assert 'if __name__ == "__main__":' in last
    assert "Nanny" not in proc.stderr
