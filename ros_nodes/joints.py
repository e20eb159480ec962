"""Mapping between the model's states/outputs/inputs and the ROS messages:
which values fill each ``JointState`` field, which input each joint's effort
command drives, the order of ``Float64MultiArray`` commands."""
from __future__ import annotations

from array import array

import numpy as np

from .common import ConfigurationError


def _doubles(values):
    """A float64 numpy vector as the ``array('d')`` a ROS float64[] field keeps."""
    a = array("d")
    a.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return a


class JointMap:
    """Index maps built once from the plant parameters (errors name the parameter)."""

    def __init__(self, sim, cfg):
        n_y, outputs, inputs = len(sim.state_names), list(sim.output_names), list(sim.input_names)
        # one value vector [y, outputs, inputs] is indexed to fill the JointState
        sources = {n: i for i, n in enumerate(sim.state_names)}
        for i, n in enumerate(outputs):
            sources.setdefault(n, n_y + i)
        input_pos = {n: n_y + len(outputs) + i for i, n in enumerate(inputs)}
        coords = list(sim.coordinate_names)
        multibody = sim.model.kind == "multibody"
        positions = cfg["joint_positions"] if cfg["joint_positions"] is not None else coords
        names = cfg["joint_names"] if cfg["joint_names"] is not None else list(positions)
        if cfg["joint_velocities"] is not None:
            velocities = cfg["joint_velocities"]
        elif cfg["joint_positions"] is None and multibody:
            velocities = ["d" + c for c in coords]
        else:
            velocities = []
        efforts = cfg["joint_efforts"] or []
        if cfg["joint_efforts"] is None and getattr(sim.model, "efforts_by_joint", False):
            # a robot from URDF: each joint's effort is the input named after it
            efforts = [n if n in inputs else "" for n in names]
        for key, lst in (("joint_positions", positions), ("joint_velocities", velocities),
                         ("joint_efforts", efforts)):
            if lst and len(lst) != len(names):
                raise ConfigurationError(
                    f"parameter {key!r} has {len(lst)} entries but joint_names has {len(names)}")
        if len(set(names)) != len(names):
            raise ConfigurationError(f"parameter 'joint_names' has duplicates: {names}")

        def lookup(key, name, table, kinds):
            if name not in table:
                raise ConfigurationError(
                    f"parameter {key!r}: {name!r} is not {kinds} of model {sim.model.name!r} "
                    f"(known: {', '.join(table)})")
            return table[name]

        self.pos_index = np.array([lookup("joint_positions", n, sources, "a state or output")
                                   for n in positions], dtype=int)
        self.vel_index = np.array([lookup("joint_velocities", n, sources, "a state or output")
                                   for n in velocities], dtype=int)
        effort_inputs, eff = {}, []
        for joint, name in zip(names, efforts):
            if name:
                eff.append(lookup("joint_efforts", name, input_pos, "an input"))
                effort_inputs[joint] = name
            else:
                eff.append(-1)
        self.has_efforts = bool(efforts)
        self.eff_index = np.array([i if i >= 0 else 0 for i in eff], dtype=int)
        self.eff_missing = np.array([i < 0 for i in eff], dtype=bool)
        self.names = list(names)
        self.effort_inputs = effort_inputs  # joint name -> input name
        cmd = cfg["command_inputs"] if cfg["command_inputs"] is not None else inputs
        for n in cmd:
            lookup("command_inputs", n, {k: 0 for k in inputs}, "an input")
        self.command_inputs = list(cmd)
        self.commanded = sorted(set(self.command_inputs) | set(effort_inputs.values()))
        self.output_label = ",".join(outputs)
        self.out_slice = slice(n_y, n_y + len(outputs))
        n_values = n_y + len(outputs) + len(inputs)
        self._values = np.empty(n_values + 1)  # [y, outputs, inputs, NaN]
        self._values[n_values] = float("nan")   # the effort of a joint without an input
        self._gathered = self._values[:n_values]
        eff_or_nan = np.where(self.eff_missing, n_values, self.eff_index)
        self.sources = {"position": self.pos_index, "velocity": self.vel_index,
                        "effort": eff_or_nan if self.has_efforts else np.empty(0, dtype=int),
                        "data": np.arange(n_y, n_y + len(outputs))}

    def gather(self, sim):
        """The value vector ``[y, outputs, inputs, NaN]`` that ``sources`` (each
        published float64 field's positions in it) refer to; reused, not allocated."""
        np.concatenate((sim.integrator.y, sim.get_outputs(), sim.get_inputs()),
                       out=self._gathered)
        return self._values

    def fill(self, sim, js, out):
        """Fill a JointState and the outputs Float64MultiArray from the simulation.
        Sequences go in as ``array('d')``: the generated message setters take
        those as they are (a list is checked element by element in Python)."""
        values = np.concatenate((sim.integrator.y, sim.get_outputs(), sim.get_inputs()))
        js.position = _doubles(values[self.pos_index])
        js.velocity = _doubles(values[self.vel_index])
        if self.has_efforts:
            eff = values[self.eff_index]
            eff[self.eff_missing] = float("nan")
            js.effort = _doubles(eff)
        out.data = _doubles(values[self.out_slice])
