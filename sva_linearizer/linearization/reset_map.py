# SPDX-License-Identifier: BSD-3-Clause
"""The impact at a touchdown (sl.impact; algorithms/impacts.py has the definitions and the
kernel) and its linearization (sl.linearize_impact): the reset map x+ = (q, v+(q, v-)) as a
2nv x 2nv Jacobian on the package's z, and the impulses' derivatives, by the implicit-function
theorem on
    F1 = ID(q, 0, v+ - v-) - Jc(q)^T Lambda = 0   (M (v+ - v-) = Jc^T Lambda; ID without gravity)
    F2 = Jc(q) w = 0,  w = v+ + e v- on a contact's rows, v+ on a loop's.
With G = d F1/dz_q at fixed (v+, Lambda): EIDAmb's derivatives at zero velocity and the
acceleration v+ - v-, gravity off, the impulses as external wrenches fixed in the body, plus the
term E of those held in world axes or between two frames (with_contacts.with_rotation_terms);
Ar = d(Jc w)/dz_q at fixed w: the rows' derivatives at zero velocity and the acceleration w
(contact_rows.set_rows: there a row is exactly Jc w); Y = Minv Jc^T, K^-1 from the impact's
Delassus solve:
    dLambda/dz_q = K^-1 (Jc Minv G - Ar),   dv+/dz_q = -Minv G + Y dLambda/dz_q,
    dLambda/dv-  = -K^-1 (1 + e) Jc,        dv+/dv-  = 1 + Y dLambda/dv-
((1 + e) on a contact's rows, 1 on a loop's). The pose does not jump: the Jacobian is
    [[1, 0], [dv+/dz_q, dv+/dv-]]
(Pinocchio's computeImpulseDynamicsDerivatives gives dv+/dq, dv+/dv- - 1 (its ddq_dv) and the
impulses' derivatives: the same system).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._jit import DirectEntry, njit
from .._lanes import matmul
from ..algorithms.common import EIDAMB_STEPS, finite_result, largest_inputs, not_finite, overflow_error
from ..algorithms.constrained_dynamics import _carve_ws, contact_plan, plan_views, run_plan
from ..algorithms.contact_rows import set_gather, set_rows, set_wrench
from ..algorithms.eidamb import eidamb
from ..algorithms.eidamb_derivatives import eidamb_derivatives
from ..algorithms.impacts import impact_inputs, impact_velocity
from ..algorithms.status import NOT_FINITE
from ..data import Data
from ..layout import views
from .sparse_product import neg_minv_times
from .with_contacts import with_rotation_terms

if TYPE_CHECKING:
    from ..model import Model
    from ..state import State

COMPILE_GROUP = "impacts"  # the compile group of this module's kernels (_jit)


@njit(inline="always")
def _rows_at(m, d, q, zero, w, cset, Ar):
    """Ar = d(Jc w)/dz (the rows' derivatives at zero velocity and the acceleration w, module
    docstring), after impact_velocity's rows at the same q."""
    ci, cp, co, cbuf, ccols = cset
    set_rows(m, d, q, zero, w, bool(True), ci, cp, co, cbuf, ccols)
    set_gather(m.nv, ci, co, cbuf, 2, Ar)


@njit
def reset_map_entry(ib, fb, q, vm, e, derivatives, pi, pf):
    """The impact and, with `derivatives` (a run-time bool), its linearization (module docstring),
    one compiled call on the Data's buffers and an impact plan's (pi, pf: plan_views):
    impact_velocity (v+ into d.nu_dot, the impulses into the plan's lam); then the impulses as
    external wrenches, EIDAmb at zero velocity and the acceleration v+ - v- without gravity and
    its derivatives (IDSVA), G = D + E, -Minv G (the sparse product of linearize), the rows'
    derivatives Ar, and the implicit-function theorem's products: the reset map's Jacobian into
    the plan's A, dLambda/dz into its dz. One compilation unit for both calls (sl.impact's and
    sl.linearize_impact's): every unit re-optimises the kernels it links. Returns 0, BAD_INPUT,
    immamb's status, CONTACTS_SINGULAR or NOT_FINITE."""
    m, d, _ = views(ib, fb)
    fset, fvec, cset, ws, out = plan_views(m.nv, m.n, pi, pf)
    status = impact_velocity(m, d, q, vm, e, cset, ws, out.lam)
    if status != 0 or not derivatives:
        return status
    ci, cp, co, cbuf, ccols = cset
    A, B, lam, dz, dtau = out
    nv, n = m.nv, m.n
    nx = 2 * nv
    mc = lam.shape[0]
    Jc, YT, Y, K, L, Kinv, r0, rhs, G, R2, Ar, B0, V1, Jf, BfT, Bf, T1, T2, TB, KYT, keep, El, MEl = _carve_ws(
        nv, n, mc, 0, ws)
    vp, zero = d.nu_dot, d.bias
    w = V1.reshape((nv,))
    for i in range(nv):
        zero[i] = 0.0
        w[i] = vp[i] - vm[i]                                     # the velocity jump
    noE = G[0:0, 0:0]
    if mc > 0:                                                   # the impulses as external wrenches
        set_wrench(nv, d.fext, d.t6[3], ci, cp, co, cbuf, ccols, lam, True, noE)
    for i in range(6):
        d.g0[i] = 0.0
        d.a[0, i] = w[i] if m.floating else 0.0
    eidamb(m, d, zero, w, m.nb > 0)          # at zero velocity (d.v = 0 since impact_velocity)
    eidamb_derivatives(m, d)                 # D_q = d(M (v+ - v-) - Jc^T Lambda)/dz_q; D_nu = 0
    loops = with_rotation_terms(d, fset, fvec, cset, lam, G, El, MEl)   # G := D + E
    AL = A[nv:]
    neg_minv_times(d.Minv, G, AL, m.grp_start, m.grp_ptr, m.grp_rows)
    if loops:
        for i in range(nv):
            for c in range(nv):
                AL[i, c] -= MEl[i, c]
    if mc > 0:
        if loops and e != 0.0:               # w = v+ on a loop's rows, v+ + e v- on a contact's
            _rows_at(m, d, q, zero, vp, cset, Ar)
            _rows_at(m, d, q, zero, vm, cset, R2)
            o = 0
            for i in range(ci.shape[0]):
                if ci[i, 4] == 0:
                    for r in range(o, o + ci[i, 6]):
                        for c in range(nv):
                            Ar[r, c] += e * R2[r, c]
                o += ci[i, 6]
        else:
            for i in range(nv):
                w[i] = vp[i] + e * vm[i]
            _rows_at(m, d, q, zero, w, cset, Ar)
        matmul(Jc, AL, R2)                  # Jc (-Minv G) - Ar on the z_q columns
        o = 0
        for i in range(ci.shape[0]):
            f = 1.0 if ci[i, 4] != 0 else 1.0 + e
            for r in range(o, o + ci[i, 6]):
                for c in range(nv):
                    R2[r, c] = -R2[r, c] - Ar[r, c]
                    R2[r, nv + c] = -f * Jc[r, c]                # -(1 + e) Jc on the v- columns
            o += ci[i, 6]
        matmul(Kinv, R2, dz)
        matmul(Y, dz, G)                    # dv+/dz = [-Minv G | 0] + Y dLambda/dz
        for i in range(nv):
            for c in range(nx):
                AL[i, c] += G[i, c]
    bad = False
    for i in range(nv):
        AL[i, nv + i] += 1.0
        for c in range(nx):
            A[i, c] = 1.0 if c == i else 0.0
            bad |= not_finite(AL[i, c])
        bad |= not_finite(vp[i])
    if bad:
        return NOT_FINITE
    return 0


# reset_map_entry without numba's dispatch for its one signature: the Data's buffers, a State's own
# q and v, a float, a bool, a plan's two buffers
_ENTRY = DirectEntry(reset_map_entry, np.zeros(1, dtype=np.int64), np.zeros(1), np.zeros(1), np.zeros(1), 0.0,
                     True, np.zeros(1, dtype=np.int64), np.zeros(1))


class Impact:
    """An impact's values and linearization (linearize_impact): v_plus (nv,) the velocity after,
    impulses (m,) on the robot (each in its contact's reference frame), jacobian (2nv, 2nv) the
    reset map's Jacobian d z+ / d z = [[1, 0], [dv+/dz_q, dv+/dv-]] (z = [z_q, z_v], as A's
    columns), dimpulses_dz (m, 2nv), restitution e."""

    __slots__ = ("v_plus", "impulses", "jacobian", "dimpulses_dz", "restitution")

    def __init__(self, v_plus, impulses, jacobian, dimpulses_dz, restitution):
        self.v_plus = v_plus
        self.impulses = impulses
        self.jacobian = jacobian
        self.dimpulses_dz = dimpulses_dz
        self.restitution = restitution

    @property
    def dv_plus_dz(self) -> np.ndarray:
        """d v+ / d z (nv, 2nv): the Jacobian's lower rows, columns [z_q | z_v] (z_v: v-)."""
        return self.jacobian[self.jacobian.shape[0] // 2:]

    def __repr__(self):
        return f"<Impact nv={self.v_plus.shape[0]} m={self.impulses.shape[0]} e={self.restitution}>"


def impact(model: Model, state: State, contacts, restitution: float = 0.0,
           data: Data | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The impact when the contacts close at this state (a touchdown): (v_plus (nv,), impulses (m,)).

    contacts: [sl.Contact, ...] (point and 6d, local and world_aligned; their Baumgarte gains and
    anchors play no part) and sl.Loop constraints (which hold through the impact). restitution: e
    in [0, 1]: Jc v+ = -e Jc v- on the contacts' rows (0: they stick; Pinocchio's impulseDynamics
    r_coeff). v_plus: the velocity after, [v (6, body twist), r] as state.v; impulses: stacked in
    the given order, each in its contact's reference frame, acting on the robot (Pinocchio's
    data.impulse_c); M (v+ - v-) = Jc^T impulses (algorithms/impacts.py). The pose does not
    change. With data= the results are views into it, overwritten by its next use. The reset
    map's Jacobian: linearize_impact."""
    e, contacts = impact_inputs(model, state, contacts, restitution, "impact")
    call = _ENTRY.code or _ENTRY.get()

    def entry(ib, fb, q, v, tau, pi, pf):
        return call(ib, fb, q, v, e, False, pi, pf)

    def collect(d, plan, status):
        out = (d.nu_dot, plan.lam)
        return out if data is not None else tuple(x.copy() for x in out)

    vp, lam = run_plan(model, state, None, contacts, None, data, entry, collect, impact=True)
    return finite_result(model, None, "impact", EIDAMB_STEPS, "the velocity after the impact and the impulses",
                         (vp, lam), q=state.q, v=state.v)


def linearize_impact(model: Model, state: State, contacts, restitution: float = 0.0,
                     data: Data | None = None) -> Impact:
    """The impact when the contacts close at this state, with its linearization: an Impact with
    v_plus, impulses (as sl.impact), the reset map's Jacobian on z (jacobian, 2nv x 2nv: z+ =
    jacobian z for the map x+ = (q, v+(q, v-)); the pose is unchanged) and dimpulses_dz
    (m x 2nv). contacts, restitution: as sl.impact. With data= the arrays are views into it,
    overwritten by its next use."""
    e, contacts = impact_inputs(model, state, contacts, restitution, "linearize_impact")
    call = _ENTRY.code or _ENTRY.get()
    if type(data) is Data and data._arrays is model._arrays and not data.custom:
        # the control-loop call, into the caller's Data (nothing to mark busy: get_data never
        # hands out a caller's Data); any status but 0 goes the long way below, which names it
        plan = contact_plan(model, data, contacts, None, True)[0]
        if call(data.ib, data.fb, state._q, state._v, e, True, plan.pi, plan.pf) == 0:
            return Impact(data.nu_dot, plan.lam, plan.A, plan.dz, e)

    def entry(ib, fb, q, v, tau, pi, pf):
        return call(ib, fb, q, v, e, True, pi, pf)

    def collect(d, plan, status):
        if status == NOT_FINITE:
            raise overflow_error(model, d, "linearize_impact", EIDAMB_STEPS, "the reset map's Jacobian",
                                 largest_inputs(q=state.q, v=state.v))
        out = (d.nu_dot, plan.lam, plan.A, plan.dz)
        out = out if data is not None else tuple(x.copy() for x in out)
        return Impact(*out, e)

    return run_plan(model, state, None, contacts, None, data, entry, collect, impact=True)
