"""A plain (non-editable) install works outside the checkout (issue 20).

Builds a wheel from the package sources, installs it with ``--no-deps`` into a
fresh venv whose dependencies come from the running environment (a ``.pth``
line naming its site-packages: nothing is downloaded but the build backend),
and from a directory outside the checkout runs what a new user runs first:
``cosim scenarios``, ``cosim demo`` (the README's first command's main steps),
``cosim run`` with a bare shipped name, one ``cosim fmu build`` (imported by
fmpy), and ``cosim-ros --help``.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("cosim", "fmu", "ros_nodes", "pyproject.toml", "README.md", "LICENSE")


def _run(cmd, cwd, env, timeout=300):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout, proc.stderr


def _build_wheel(tmp):
    """The wheel of a copy of the sources (so the checkout gets no build/ or egg-info)."""
    src = tmp / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "*.fmu")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore, symlinks=False)
        else:
            shutil.copy2(path, src / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
           "-w", tmp / "dist", src]
    have_backend = all(importlib.util.find_spec(m) for m in ("setuptools", "wheel"))
    if have_backend:  # no download at all; else pip fetches setuptools + wheel from the registry
        cmd.insert(4, "--no-build-isolation")
    _run(cmd, tmp, env)
    [wheel] = (tmp / "dist").glob("cosim_mbs-*.whl")   # distribution cosim-mbs (cosim/_version.py)
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    wheel = _build_wheel(tmp)
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
          "--disable-pip-version-check", "--no-index", wheel], tmp, env)
    # dependencies (numpy, scipy, fmpy, ...) from the running environment, appended
    # after the venv's own site-packages (a plain path: no editable hooks of it run)
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp, env)[0].strip())
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp / "elsewhere"   # outside the checkout
    work.mkdir()
    return {"bin": env_dir / "bin", "python": python, "env": env, "cwd": work, "site": site}


def test_installed_package_is_the_wheel_not_the_checkout(installed):
    out, _ = _run([installed["python"], "-c", "import cosim, fmu; print(cosim.__file__); print(fmu.__file__)"],
                  installed["cwd"], installed["env"])
    for line in out.split():
        assert Path(line).is_relative_to(installed["site"]), line
        assert not Path(line).is_relative_to(REPO)


def test_wheel_metadata_names_the_license(installed):
    """The installed distribution says MIT and carries the LICENSE text."""
    code = ("import importlib.metadata as m; d = m.distribution('cosim-mbs'); "
            "print(d.metadata['License']); "
            "print(any(f.name == 'LICENSE' for f in d.files)); "
            "print('License :: OSI Approved :: MIT License' in d.metadata.get_all('Classifier'))")
    out, _ = _run([installed["python"], "-c", code], installed["cwd"], installed["env"])
    assert out.split() == ["MIT", "True", "True"], out


def test_shipped_files_are_package_data(installed):
    out, _ = _run([installed["bin"] / "cosim", "scenarios"], installed["cwd"], installed["env"])
    names = [line.split()[0] for line in out.splitlines() if line and not line[0].isspace()][:3]
    assert names == ["bouncing_ball", "lti_state_feedback", "pendulum_pd"]
    data = installed["site"] / "cosim" / "data"
    assert str(data / "scenarios") in out and str(data / "launch") in out
    for name in ("pendulum_lock_step.yaml", "pd_pendulum.yaml", "plant.launch.py", "closed_loop.launch.py"):
        assert (data / "launch" / name).is_file(), name


def test_readme_demo_from_the_wheel(installed):
    """The main steps of `bash scripts/demo.sh` (the README's first command):
    `cosim demo`; the outputs exist and the summary names them."""
    out_dir = installed["cwd"] / "out"
    out, err = _run([installed["bin"] / "cosim", "demo", "--out-dir", "out", "--backend", "python"],
                    installed["cwd"], installed["env"])
    summary = out[out.index("cosim demo: done in"):]
    for name in ("andrews.png", "andrews.csv", "pendulum_pd.png", "pendulum_pd.csv",
                 "pendulum_pd_staircase.png"):
        path = out_dir / name
        assert path.stat().st_size > 1000, path
        assert f"    {path}\n" in summary
    assert "scenario pendulum_pd: model pendulum" in out and "base step 0.0005 s = 1/2000 s" in out
    assert "warning" not in err and "Traceback" not in err


def test_run_by_bare_name_from_anywhere(installed):
    out, _ = _run([installed["bin"] / "cosim", "run", "lti_state_feedback", "--json"],
                  installed["cwd"], installed["env"])
    import json
    result = json.loads(out)
    # closed loop s^2 + 6 s + 20 with unit DC gain: the position settles at the 0.5 m reference
    assert result["scenario"] == "lti_state_feedback"
    assert abs(result["outputs"]["position"] - 0.5) < 1e-3


@pytest.mark.fmu
def test_fmu_build_from_the_wheel(installed):
    """A shipped scenario (by name) as an FMU, simulated by fmpy in the fresh venv."""
    pytest.importorskip("fmpy")
    pytest.importorskip("pythonfmu")
    out, _ = _run([installed["bin"] / "cosim", "fmu", "build", "lti_state_feedback", "-o", "lti.fmu"],
                  installed["cwd"], installed["env"])
    fmu = installed["cwd"] / "lti.fmu"
    assert "wrote" in out and fmu.is_file()
    code = ("import sys, fmpy; r = fmpy.simulate_fmu(sys.argv[1], start_values={'controller.reference': 0.5}); "
            "print(r['time'][-1], r['position'][-1])")
    out, _ = _run([installed["python"], "-c", code, fmu], installed["cwd"], installed["env"])
    t, x = map(float, out.split())
    # DefaultExperiment: the scenario's 5 s; the state feedback (closed loop s^2 + 6 s + 20,
    # unit DC gain, poles -3 +- 3.3j: e^-15 left at 5 s) settles the mass at the 0.5 m reference
    assert t == pytest.approx(5.0) and x == pytest.approx(0.5, abs=1e-4)


@pytest.mark.ros
def test_cosim_ros_console_script_help(installed):
    pytest.importorskip("rclpy")
    out, err = _run([installed["bin"] / "cosim-ros", "--help"], installed["cwd"], installed["env"],
                    timeout=60)
    assert out.startswith("usage: cosim-ros") and "[INFO]" not in out + err


@pytest.mark.ros
def test_cosim_ros_runs_a_shipped_config_by_name_from_the_wheel(installed):
    """Outside a checkout: a shipped parameter file by name, overridden on the command line."""
    pytest.importorskip("rclpy")
    from ros_nodes.testing import ros_environment, unique_domain_id
    ros = ros_environment(unique_domain_id("wheel-config"))
    env = dict(installed["env"], **{k: v for k, v in ros.items() if k.startswith(("ROS_", "RCUTILS_"))})
    out, err = _run([installed["bin"] / "cosim-ros", "--ros-args", "-p", "config:=pendulum_free_run",
                     "-p", "end_time:=0.2", "-p", "shutdown_at_end:=true"], installed["cwd"], env,
                    timeout=180)
    assert "shipped configuration 'pendulum_free_run'" in err
    assert str(installed["site"] / "cosim" / "data" / "launch" / "pendulum_free_run.yaml") in err
    assert "end_time reached at t=0.2" in err
