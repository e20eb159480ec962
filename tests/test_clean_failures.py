"""Clean failures: a spec/scenario file holding a NUL byte, a control character or binary
garbage is one line naming the character and where it is (no traceback) in `cosim run`,
`cosim sweep`, `cosim fmu build` and the ROS node's parameter-file check; a user model with
a singular mass matrix, or built on a library model whose setup() skips super().setup(),
is a ModelDefinitionError (not an AttributeError) with every method."""
import numpy as np
import pytest

import cosim
from cosim.cli import main
from cosim.errors import ModelDefinitionError
from cosim.models import MultibodyModel, Parameter
from cosim.models.pendulum import Pendulum

PROBES = {
    "nul": (b"model: pendulum\x00\nstop_time: 1\n", "is not YAML text: character U+0000 at line 1, column 16 "
                                                   "is not allowed (binary data?)"),
    "nul_json": (b'{"model": "pend\x00ulum"}', "is not YAML text: character U+0000 at line 1, column 16"),
    "control": (b"model: pendulum\nstop_time: 1\x01\n", "character U+0001 at line 2, column 13"),
    "delete": (b'model: "pendulum"\n\x7f\n', "character U+007F at line 2, column 1"),
    "png": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "is not UTF-8 text"),
    "ascii_garbage": (bytes(range(1, 32)) * 4, "character U+0001 at line 1, column 1"),
}


@pytest.mark.parametrize("case", sorted(PROBES))
@pytest.mark.parametrize("command", ["run", "sweep", "fmu build"])
def test_binary_spec_files_are_one_line_errors(tmp_path, capsys, command, case):
    if command == "fmu build":
        pytest.importorskip("pythonfmu")
    raw, needle = PROBES[case]
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(raw)
    extra = {"run": [], "sweep": ["--out", str(tmp_path / "o")], "fmu build": ["-o", str(tmp_path / "x.fmu")]}
    assert main([*command.split(), str(path), *extra[command]]) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("cosim: error: "), err
    assert f"'{path}'" in lines[0] and needle in lines[0], lines[0]
    assert not (tmp_path / "o").exists() and not (tmp_path / "x.fmu").exists()


def test_ros_parameter_file_with_a_nul_byte_is_one_line(tmp_path):
    pytest.importorskip("rclpy")
    from ros_nodes.process import check_params_file_sections
    path = tmp_path / "params.yaml"
    path.write_bytes(b"sim_node:\n  ros__parameters:\n    model: pendulum\x00\n")
    error = check_params_file_sections(["--params-file", str(path)], "/sim_node")
    assert error is not None and "\n" not in error
    assert "is not YAML text: character U+0000 at line 3, column 20" in error


class SkipsSuperSetup(Pendulum):
    """A library model extended with a setup() that forgets super().setup()."""

    def setup(self):
        self.scale = 2.0 * self.params["l"]


class SingularMass(MultibodyModel):
    name = "singular_mass"
    coordinates = ("x", "y")
    parameters = (Parameter("m", 1.0, "kg"),)

    def mass(self, q, t):
        return np.diag([self.params["m"], 0.0])

    def forces(self, q, v, t, u):
        return np.array([0.0, -9.81])

    def initial_state(self):
        return np.zeros(2), np.zeros(2)


@pytest.mark.parametrize("method", ["generalized-alpha", "bdf", "dopri5"])
def test_user_model_mistakes_are_model_definition_errors(method):
    with pytest.raises(ModelDefinitionError, match=r"SkipsSuperSetup\.setup\(\) does not call super\(\)\.setup\(\)"
                                                   r"; a model built on a library model \(Pendulum\) must"):
        cosim.Simulation(model=SkipsSuperSetup, method=method, backend="python")
    with pytest.raises(ModelDefinitionError, match=r"M positive definite: smallest eigenvalue 0\.000e\+00"):
        cosim.Simulation(model=SingularMass, method=method, backend="python")


def test_the_command_line_says_it_in_one_line(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text("from cosim.models.pendulum import Pendulum\n\n\nclass Mine(Pendulum):\n"
                    "    def setup(self):\n        self.extra = 1.0\n")
    assert main(["simulate", f"{path}:Mine", "--t-end", "0.1", "--backend", "python"]) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Mine.setup() does not call super().setup()" in lines[0], lines
