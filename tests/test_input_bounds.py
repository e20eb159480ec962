"""Bounded untrusted input: a URDF's nesting depth, element count, name lengths and link
count are checked in one streaming pass before a tree is built (3 000 nested elements: one
line, no RecursionError; a 1 MiB joint name: one short line); complex input vectors are
refused by Simulation.set_inputs in every form (not truncated to their real part), the
inputs unchanged."""
import numpy as np
import pytest

import cosim
from cosim.cli import main
from cosim.errors import InvalidInputError
from cosim.models import urdf_parse
from cosim.models.urdf_parse import MAX_DEPTH, MAX_ELEMENTS, MAX_LINKS, MAX_NAME

INERTIAL = ('<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>'
            '</inertial>')


def robot(link_extra="", joint_name="j", child="L", links=""):
    return ('<?xml version="1.0"?>\n<robot name="r"><link name="base">' + INERTIAL + '</link>'
            f'<link name="L">{INERTIAL}{link_extra}</link>{links}'
            f'<joint name="{joint_name}" type="continuous"><parent link="base"/><child link="{child}"/>'
            '<axis xyz="0 0 1"/></joint></robot>\n')


def test_a_plain_robot_still_parses():
    assert [j.name for j in urdf_parse.parse(robot()).movable] == ["j"]
    assert urdf_parse.parse(robot("<a>" * (MAX_DEPTH - 2) + "</a>" * (MAX_DEPTH - 2))).name == "r"


CASES = {
    "3000 nested elements": (robot("<a>" * 3000 + "</a>" * 3000),
                             f"URDF nests elements more than {MAX_DEPTH} deep (<a> at line 2)"),
    "1 MiB joint name": (robot(joint_name="j" * 2 ** 20),
                         f"URDF <joint> name of 1048576 characters at line 2, more than the limit {MAX_NAME}"),
    "1 MiB link reference": (robot(child="L" * 2 ** 20), "URDF <child> link of 1048576 characters"),
    "100 000 links": (robot(links="".join(f'<link name="x{i}"/>' for i in range(100_000))),
                      f"URDF has more than {MAX_ELEMENTS} elements (line 2)"),
    "300 links": (robot(links="".join(f'<link name="x{i}"/>' for i in range(300))),
                  f"URDF robot 'r' has 302 links, more than the limit {MAX_LINKS}"),
    "250 roots": (robot(links="".join(f'<link name="{"x" * 200}{i}">{INERTIAL}</link>' for i in range(250))),
                  ", ... (251 in all)]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_unbounded_urdf_is_one_short_line(case):
    text, needle = CASES[case]
    with pytest.raises(InvalidInputError) as info:
        urdf_parse.parse(text)
    message = str(info.value)
    assert needle in message and "\n" not in message and len(message) < 600, message[:300]


@pytest.mark.parametrize("command", ["simulate", "fmu build"])
def test_deep_urdf_on_the_command_line(tmp_path, capsys, command):
    if command == "fmu build":
        pytest.importorskip("pythonfmu")
    path = tmp_path / "deep.urdf"
    path.write_text(CASES["3000 nested elements"][0])
    extra = ["--t-end", "0.01"] if command == "simulate" else ["-o", str(tmp_path / "x.fmu")]
    assert main([*command.split(), str(path), *extra]) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert lines == [f"cosim: error: URDF nests elements more than {MAX_DEPTH} deep (<a> at line 2)"]


COMPLEX = {
    "ndarray complex128": lambda n: np.full(n, 1 + 2j),
    "ndarray complex64": lambda n: np.full(n, 1 + 2j, dtype=np.complex64),
    "ndarray complex, zero imaginary part": lambda n: np.full(n, 1 + 0j),
    "list of complex": lambda n: [1 + 2j] * n,
    "list of numpy complex128": lambda n: [np.complex128(1 + 2j)] * n,
    "tuple of numpy complex64": lambda n: (np.complex64(1 + 2j),) * n,
    "object array of complex": lambda n: np.array([1 + 2j] * n, dtype=object),
    "mapping to numpy complex": lambda n: {"torque": np.complex128(1 + 2j)},
}


@pytest.mark.parametrize("model", ["pendulum", "lti"])
@pytest.mark.parametrize("case", sorted(COMPLEX))
def test_complex_inputs_are_refused_and_change_nothing(model, case):
    sim = cosim.Simulation(model=model, method="dopri5", backend="python")
    n = len(sim.input_names)
    start = np.arange(1.0, n + 1.0)
    sim.set_inputs(start)
    value = COMPLEX[case](n)
    if isinstance(value, dict):
        value = {sim.input_names[0]: value["torque"]}
    with pytest.raises(InvalidInputError, match="must be (real numbers|a real number|a sequence of numbers)"):
        sim.set_inputs(value)
    assert sim.get_inputs().tolist() == start.tolist()
    for real in ([0.5] * n, np.full(n, 0.5), [np.float64(0.5)] * n, [1] * n):  # real ones still pass
        sim.set_inputs(real)
        assert sim.get_inputs().tolist() == [float(np.asarray(real)[0])] * n
