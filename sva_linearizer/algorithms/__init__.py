# SPDX-License-Identifier: BSD-3-Clause
"""The thesis's algorithms, one per file, each a compiled kernel `f(m, d, ...)` on the model's and
the workspace's named views (layout.py) with its typed Python wrapper:

    kinematics.py          jcalc (Appendix B), tree transforms, gravity term (EIDAmb lines 7, 16)
    eidamb.py              EIDAmb (Table 4.1)                     extended_inverse_dynamics
    eidamb_derivatives.py  Tables 4.2-4.5, as IDSVA (Singh Alg. 1) extended_inverse_dynamics_derivatives
    eidamb_second_derivatives.py  their derivatives (seeds/002)   extended_inverse_dynamics_second_derivatives
    articulated.py         the articulated-body sweep shared by ABAmb, IMMAmb and the pivot check
    abamb.py               ABAmb (E.6) / ABA (E.5)                forward_dynamics
    crbamb.py              CRBAmb (E.4) / CRBA (E.3)              mass_matrix
    immamb.py              IMMAmb (Table 4.7) / IMMA (Table 4.6)  inverse_mass_matrix
    rneamb.py              RNEAmb (E.2) / RNEA (E.1)              rneamb
    frames.py              frame poses, Jacobians, twist/acceleration derivatives   frame_*
    contact_rows.py        contact definitions (Pinocchio's), their rows, residuals, wrenches   Contact
    constrained_dynamics.py  forward dynamics with contacts (the KKT solve through IMMAmb)
    impacts.py             the impact at a touchdown (the same KKT solve; sl.impact: linearization/reset_map.py)
    centroidal.py          centroidal momentum, its rate, A_G, derivatives   centroidal_momentum, _derivatives
    checks.py              the model's check (massless subtrees): Model.validate
    status.py              the status codes of the compiled entry points
"""
from .abamb import forward_dynamics
from .crbamb import mass_matrix
from .eidamb import extended_inverse_dynamics
from .eidamb_derivatives import extended_inverse_dynamics_derivatives
from .eidamb_second_derivatives import SecondOrderDerivatives, extended_inverse_dynamics_second_derivatives
from .immamb import inverse_mass_matrix
from .articulated import articulated_pivots
from .rneamb import rneamb
from . import checks  # noqa: F401 - registers Model.validate's check

__all__ = ["SecondOrderDerivatives", "articulated_pivots", "extended_inverse_dynamics",
           "extended_inverse_dynamics_derivatives", "extended_inverse_dynamics_second_derivatives",
           "forward_dynamics", "inverse_mass_matrix", "mass_matrix", "rneamb"]
