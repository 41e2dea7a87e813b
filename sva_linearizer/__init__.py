# SPDX-License-Identifier: BSD-3-Clause
"""sva_linearizer: exact, singularity-free linearization (A, B) of whole-body robot dynamics.

Algorithms of M.P. Bos, "Efficient Geometric Sensitivity Analysis of Moving-Base Multibody
Dynamics" (TU/e 2019): EIDAmb and its left-trivialized derivatives, IMMA / IMMAmb, ABAmb, CRBAmb.
"""
from .algorithms import (
    SecondOrderDerivatives,
    extended_inverse_dynamics,
    extended_inverse_dynamics_derivatives,
    extended_inverse_dynamics_second_derivatives,
    forward_dynamics,
    inverse_mass_matrix,
    mass_matrix,
    rneamb,
)
from .algorithms.centroidal import Centroidal, centroidal_derivatives, centroidal_momentum
from .algorithms.contact_rows import Contact, Loop
from .algorithms.frames import frame_jacobian, frame_placement, frame_velocity
from .linearization.reset_map import Impact, impact, linearize_impact
from .coupling import CoupledModel
from .data import Data
from .joints import Joint
from .linearization import (Horizon, Linearization, discretize, linearize, linearize_batch, linearize_flat,
                            linearize_horizon, next_state)
from .model import Inertia, Model
from .state import State
from . import warmup as _warmup  # noqa: F401 (registers the kernels' compiler: a cold group compiles in the background)

__version__ = "0.1.0"


def load_urdf(path_or_xml, floating_base: bool | None = None, gravity=(0.0, 0.0, -9.81), validate=True,
              mimic=False):
    """Build a Model from a URDF file path or XML string (see sva_linearizer.urdf); floating_base
    None: fixed when the URDF's root link is `world`, else floating; mimic=True couples the URDF's
    mimic joints to their parents (a CoupledModel: sva_linearizer.coupling)."""
    from .urdf import load_urdf as _load

    return _load(path_or_xml, floating_base=floating_base, gravity=gravity, validate=validate, mimic=mimic)


__all__ = [
    "Contact", "CoupledModel", "Data", "Horizon", "Inertia", "frame_jacobian", "frame_placement", "frame_velocity",
    "Joint", "Linearization", "Loop", "Model", "SecondOrderDerivatives", "State", "extended_inverse_dynamics",
    "extended_inverse_dynamics_derivatives", "extended_inverse_dynamics_second_derivatives",
    "forward_dynamics", "inverse_mass_matrix", "discretize", "linearize", "linearize_batch", "linearize_flat",
    "linearize_horizon", "load_urdf", "mass_matrix", "next_state", "rneamb", "__version__",
]

__all__ += ["Centroidal", "Impact", "centroidal_derivatives", "centroidal_momentum", "impact", "linearize_impact"]
