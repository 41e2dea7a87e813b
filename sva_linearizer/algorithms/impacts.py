# SPDX-License-Identifier: BSD-3-Clause
"""Impacts: the velocity jump at a touchdown, and the impulses that make it (Pinocchio 4.1's
impulseDynamics, so that results compare).

For the constraints of the contacts (contact_rows.py: a point's linear velocity or a 6d frame's
twist, in the contact's axes or world axes at its point; a loop's relative velocity), Jc their
rows at the pose q, the impulses Lambda acting ON the robot in each contact's reference frame
and the restitution e in [0, 1]:
    M (v+ - v-) = Jc^T Lambda,   Jc v+ = -e Jc v-   on a contact's rows,
                                 Jc v+ = 0           on a loop's rows (the loop holds, whatever e),
so that with K = Jc Minv Jc^T and r0 = e Jc v- (contact rows; 0 on a loop's)
    K Lambda = -(Jc v- + r0),   v+ = v- + Minv Jc^T Lambda:
the Delassus solve of the contact dynamics (constrained_dynamics.kkt_solve) with v- in the place
of the free acceleration, on an impact's own contact plan (contact_plan(impact=True): the rows
without Baumgarte terms, since an impact is a velocity-level event; the contacts' gains and
anchors play no part). The pose does not change. Dependent rows are handled as in the contact
dynamics (docs/loops.md): dropped in the order given, with no impulse, when they hold anyway.
The call (sl.impact) and its derivatives (the reset map's Jacobian, sl.linearize_impact): one compiled
entry in linearization/reset_map.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math

from .._jit import njit
from ..coupling import is_coupled
from ..layout import kernel
from ..state import State
from .common import check_state
from .constrained_dynamics import _carve_ws, kkt_solve
from .contact_rows import set_gather, set_rows
from .immamb import immamb
from .kinematics import prepare
from .status import BAD_INPUT

if TYPE_CHECKING:
    from ..model import Model

COMPILE_GROUP = "impacts"  # the compile group of this module's kernels (_jit)


@njit(inline="always")
def restitution_terms(ci, Jc, vm, e, r0):
    """r0 = e Jc v- on the contacts' rows, 0 on the loops' (ci: the set's ints, contact_rows.NI per
    constraint: [.., loop (4), .., published rows (6)])."""
    nv = vm.shape[0]
    o = 0
    for i in range(ci.shape[0]):
        er = 0.0 if ci[i, 4] != 0 else e
        for r in range(o, o + ci[i, 6]):
            acc = 0.0
            for c in range(nv):
                acc += Jc[r, c] * vm[c]
            r0[r, 0] = er * acc
        o += ci[i, 6]


@kernel
def impact_velocity(m, d, q, vm, e, cset, ws, lam):
    """The impact at the pose q with the velocity vm (v-) before it, one compiled call: kinematics,
    Minv (IMMAmb), the constraints' rows Jc (set_rows at zero velocity: the body twists d.v are
    zeroed, so that the rows' terms beside Jc stay finite), r0 = e Jc v- (restitution_terms) and
    the Delassus solve (kkt_solve): the impulses into lam, v+ into d.nu_dot (its Y, Y^T, K^-1 stay
    in ws for the reset map's derivatives). cset: the constraints' views (SetViews) of an impact
    plan; ws: its scratch (constrained_dynamics.workspace_size). Returns 0, BAD_INPUT, immamb's
    status (M singular) or CONTACTS_SINGULAR."""
    if prepare(m, d, q, vm, q[0:0]) != 0:
        return BAD_INPUT
    nv, n = m.nv, m.n
    ci, cp, co, cbuf, ccols = cset
    mc = lam.shape[0]
    Jc, YT, Y, K, L, Kinv, r0, rhs, G, R2, Ar, B0, V1, Jf, BfT, Bf, T1, T2, TB, KYT, keep, El, MEl = _carve_ws(
        nv, n, mc, 0, ws)
    status = immamb(m, d)
    if status != 0:
        return status
    vp = d.nu_dot
    for i in range(nv):
        vp[i] = 0.0
    for k in range(m.nb):
        for i in range(6):
            d.v[k, i] = 0.0
    if mc > 0:
        set_rows(m, d, q, vp, vp, bool(False), ci, cp, co, cbuf, ccols)   # poses and Jacobians only
        set_gather(nv, ci, co, cbuf, 0, Jc)
        restitution_terms(ci, Jc, vm, e, r0)
    for i in range(nv):
        vp[i] = vm[i]
    return kkt_solve(d.Minv, Jc, r0, vp, V1, YT, Y, K, L, Kinv, rhs, keep, lam)


def check_restitution(restitution) -> float:
    """The coefficient of restitution as a float in [0, 1], or a ValueError naming the problem."""
    try:
        e = float(restitution)
    except (TypeError, ValueError):
        raise ValueError(f"restitution must be a number in [0, 1], got {restitution!r}") from None
    if not (math.isfinite(e) and 0.0 <= e <= 1.0):
        raise ValueError(f"restitution must be in [0, 1] (0: the contacts stick, 1: they bounce back "
                         f"elastically), got {restitution!r}")
    return e


def impact_inputs(model: Model, state: State, contacts, restitution, what: str):
    """(the checked restitution, the contacts as a list) of an impact call named `what`;
    ValueErrors for a model with mimic joints, a state of another model, contacts that are not a
    list of sl.Contact / sl.Loop (contact_plan checks the items)."""
    if is_coupled(model):
        raise ValueError(f"{what}: a model with mimic joints has no impacts here (load it with "
                         "mimic=False)")
    if type(state) is not State or state.nj != model.nj or state.floating_base != model.floating_base:
        check_state(model, state)
    if type(contacts) is not list:
        if contacts is not None and not isinstance(contacts, (list, tuple)):
            raise ValueError(f"{what}: contacts must be a list of sl.Contact (and sl.Loop), got "
                             f"{type(contacts).__name__}")
        contacts = list(contacts or ())
    if type(restitution) is float and 0.0 <= restitution <= 1.0:     # (NaN fails the test)
        return restitution, contacts
    return check_restitution(restitution), contacts
