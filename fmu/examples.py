"""Small models for FMUs that are mostly discrete blocks.

:class:`NoPlant` is a placeholder continuous part (one constant state, no
inputs or outputs) so that a controller made of :mod:`cosim.blocks` ships as
its own FMU, e.g. a discrete PD (a ``state_feedback`` block) for a plant FMU::

    build_fmu("fmu.examples:NoPlant", "PD.fmu", method="rk4", step=0.01,
              blocks=[{"type": "state_feedback", "name": "pd", "sample_time": 0.01,
                       "K": [[40.0, 8.0]], "reference_gain": [[40.0]],
                       "inputs": ["angle", "angular_velocity", "reference"],
                       "outputs": ["torque"],
                       "units": {"angle": "rad", "angular_velocity": "rad/s",
                                 "reference": "rad", "torque": "N.m"}}])

Its gains are tunable FMU parameters ``pd.K[1,1]``, ``pd.K[1,2]`` (units N.m/rad,
N.m/(rad/s)) and ``pd.reference_gain[1,1]``.
"""
import numpy as np

from cosim.models.base import FirstOrderModel


class NoPlant(FirstOrderModel):
    name = "no_plant"
    description = "placeholder continuous part (x' = 0) for block-only FMUs"
    states = ("x",)

    def initial_state(self):
        return np.zeros(1)

    def rhs(self, t, x, u):
        return np.zeros(1)

    def rhs_jacobian(self, t, x, u):
        return np.zeros((1, 1))

    def output_values(self, t, y, u):
        return np.zeros(0)
