# SPDX-License-Identifier: BSD-3-Clause
"""The plant of the examples: Pinocchio's dynamics of the same URDF, an independent simulator
(``sva_linearizer.ros.demo.plant``, where the closed-loop demo and tests take it from too)."""
from sva_linearizer.ros.demo.plant import MISSING, Plant, pin, state_error  # noqa: F401  (the examples' imports)
