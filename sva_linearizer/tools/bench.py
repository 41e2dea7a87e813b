# SPDX-License-Identifier: BSD-3-Clause
"""`sva-linearizer bench`: this package and Pinocchio side by side, in one process, on the same
random states; per robot the medians and the ratios ours/Pinocchio (one state; a batch, per state),
the first linearization after process start (warm compile cache, and cold: empty cache), and peak
memory. Absolute times on shared machines are noise; the ratios measured in one run are the figure:
ours and Pinocchio take turns within every timing run, and the ratio is the median of the runs'
ratios (the medians of the times are printed too).

What is timed (both sides from the same flat vectors q, v, tau), like against like:
  ours, lean        linearize_flat(model, q, v, tau, data) -> A, B (the control-loop path), against
  Pinocchio, prealloc  computeABADerivatives on a preallocated [0; tau], then its ddq_dq, ddq_dv
                    and Minv copied into preallocated A, B (-ad(v) written by index; no object
                    built per call): Pinocchio as a careful Python user calls it;
  ours, State+Data  State.from_vectors + linearize(model, state, tau, data=Data), against the same;
  ours, default     State.from_vectors + linearize(model, state, tau), its A and B read, against
  Pinocchio, alloc  computeABADerivatives on np.concatenate([0, tau]), A, B allocated per call
                    and -ad(v) from pin.Motion(v).action: the plain way to write it.
  ours, batch       linearize_batch(model, Q, V, TAU) / N (worker threads; "1 thr": on one thread)
  Pinocchio, batch  the one-state call in a Python loop / N (it has no batched API), each
                    state's A, B assembled into (N, ...) arrays allocated per call, as ours
  dt                ours with dt= (A, B and the discrete Ad, Bd) over ours without, one state
Second-order rows (run_second_order): extended_inverse_dynamics_second_derivatives against central
differences of Pinocchio's computeRNEADerivatives, with the kernel's counted flops.
Impact rows (run_impacts): linearize_impact against impulseDynamics + computeImpulseDynamicsDerivatives
with the reset map's Jacobian assembled; centroidal rows (run_centroidal): centroidal_derivatives
against computeCentroidalDynamicsDerivatives.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np

from .._child import python_command

from .profile import machine_line
from .samples import pinocchio_model as _pinocchio, random_states

DEFAULT_ROBOTS = ("solo12", "anymal_c", "icub", "g1_29dof")


def _require_pinocchio() -> None:
    """The bench's reference: a ValueError naming what to install when Pinocchio is missing."""
    try:
        import pinocchio  # noqa: F401
    except ImportError:
        raise ValueError("bench needs Pinocchio as the reference: pip install pin "
                         "example-robot-data (or '.[test]')") from None


def _timings_us(fns, repeat, number):
    """For each function, `repeat` timings (mean time of `number` calls, in microseconds). The
    functions take turns within every run, so that the machine's slow and fast spells (shared
    cores) fall on all of them alike."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, tt in zip(fns, times):
            t = time.perf_counter()
            for _ in range(number):
                fn()
            tt.append(1e6 * (time.perf_counter() - t) / number)
    return [np.array(tt) for tt in times]


def _medians_and_ratio(ours, theirs, per=1):
    """Median times (per `per` items) and the median of the run-by-run ratios ours/theirs."""
    return (float(np.median(ours)) / per, float(np.median(theirs)) / per,
            float(np.median(ours / theirs)))


def bench_robot(name, batch=128, repeat=15, number=20, seed=0):
    """One robot's figures (dict). Pinocchio is required."""
    import sva_linearizer as sl
    from sva_linearizer.robots import load_robot, robot_urdf_path

    model = load_robot(name)
    path = robot_urdf_path(name)
    pin, pm, pd = _pinocchio(path, model.floating_base, model)
    Q, V, T = random_states(model, batch, seed)
    nv, nj = model.nv, model.nj
    off = nv - nj
    data = sl.Data(model)
    q, v, tau = Q[0], V[0], T[0]

    def ours():
        return sl.linearize(model, sl.State.from_vectors(model, q, v), tau, data=data)

    eye = np.eye(nv)
    zeros_tau = np.zeros(off)

    def pin_linearize(q, v, tau, A=None, B=None):
        """The lean way a Python user assembles A, B from Pinocchio (its Minv is filled in full):
        into new arrays, or into the given ones (every entry written), as a batch keeps them."""
        pin.computeABADerivatives(pm, pd, q, v, np.concatenate([zeros_tau, tau]))
        if A is None:
            A, B = np.zeros((2 * nv, 2 * nv)), np.zeros((2 * nv, nj))
        else:
            A[:nv, :nv] = 0.0
            B[:nv] = 0.0
        A[:nv, nv:] = eye
        if off:
            A[0:6, 0:6] = -pin.Motion(v[0:6]).action           # -ad(v), linear-angular
        A[nv:, :nv] = pd.ddq_dq
        A[nv:, nv:] = pd.ddq_dv
        B[nv:] = pd.Minv[:, off:]
        return A, B

    def theirs():
        return pin_linearize(q, v, tau)

    # Pinocchio as a careful user calls it: every buffer preallocated, the constant blocks of A
    # written once, -ad(v) = -[[w^, v^], [0, w^]] by index from v (no object per call)
    tau_full = np.zeros(nv)
    PA, PB = np.zeros((2 * nv, 2 * nv)), np.zeros((2 * nv, nj))
    PA[:nv, nv:] = eye
    ad_rows, ad_cols, ad_src, ad_sign = [], [], [], []
    for blk_r, blk_c, src in ((0, 0, 3), (0, 3, 0), (3, 3, 3)):      # w^, v^, w^
        for (i, j, k, sg) in ((0, 1, 2, -1.0), (0, 2, 1, 1.0), (1, 0, 2, 1.0), (1, 2, 0, -1.0),
                              (2, 0, 1, -1.0), (2, 1, 0, 1.0)):      # x^[i, j] = sg * x[k]
            ad_rows.append(blk_r + i)
            ad_cols.append(blk_c + j)
            ad_src.append(src + k)
            ad_sign.append(-sg)                                      # -ad(v)
    ad_idx = np.array(ad_rows) * (2 * nv) + np.array(ad_cols)
    ad_src, ad_sign = np.array(ad_src), np.array(ad_sign)
    PAf = PA.reshape(-1)

    def pin_prealloc():
        tau_full[off:] = tau
        pin.computeABADerivatives(pm, pd, q, v, tau_full)
        if off:
            PAf[ad_idx] = ad_sign * v[ad_src]
        PA[nv:, :nv] = pd.ddq_dq
        PA[nv:, nv:] = pd.ddq_dv
        PB[nv:] = pd.Minv[:, off:]
        return PA, PB

    def ours_default():     # (A and B read, as Pinocchio's side returns its arrays)
        lin = sl.linearize(model, sl.State.from_vectors(model, q, v), tau)
        return lin.A, lin.B

    lin = ours()
    A_p, B_p = theirs()
    err = max(float(np.max(np.abs(lin.A - A_p)) / np.mean(np.abs(A_p))),
              float(np.max(np.abs(lin.B - B_p)) / np.mean(np.abs(B_p))))
    A_pp, B_pp = pin_prealloc()
    if not (np.array_equal(A_pp, A_p) and np.array_equal(B_pp, B_p)):
        raise RuntimeError("bench: Pinocchio's preallocated assembly differs from its plain one")
    sl.linearize_batch(model, Q, V, T)   # compile / warm up
    def lean():
        return sl.linearize_flat(model, q, v, tau, data)

    ours_default()
    t_ours, t_lean, t_default, t_pin, t_pre = _timings_us(
        [ours, lean, ours_default, theirs, pin_prealloc], repeat, number)
    single_ours, single_pin, single_ratio = _medians_and_ratio(t_ours, t_pre)
    lean_ratio = float(np.median(t_lean / t_pre))
    default_ratio = float(np.median(t_default / t_pin))

    def ours_batch():
        sl.linearize_batch(model, Q, V, T)

    def pin_batch():
        """Each state's A, B kept, in (N, ...) arrays allocated per call as linearize_batch's are:
        a loop that dropped them would not write N results to memory, which ours does (~9 us per
        state for talos_full's 115 KB on a 2 GHz Zen 1)."""
        PA, PB = np.empty((batch, 2 * nv, 2 * nv)), np.empty((batch, 2 * nv, nj))
        for i in range(batch):
            pin_linearize(Q[i], V[i], T[i], PA[i], PB[i])
        return PA, PB

    A_n, B_n = pin_linearize(q, v, tau, np.full_like(A_p, np.nan), np.full_like(B_p, np.nan))
    if not (np.array_equal(A_n, A_p) and np.array_equal(B_n, B_p)):   # every entry written
        raise RuntimeError("bench: Pinocchio's batch assembly differs from its one-state assembly")

    def ours_dt():
        return sl.linearize(model, sl.State.from_vectors(model, q, v), tau, data=data, dt=0.01)

    ours_dt()
    dt_ratio = _medians_and_ratio(*_timings_us([ours_dt, ours], repeat, number))[2]

    def ours_batch_1():
        sl.linearize_batch(model, Q, V, T)

    nb = max(1, number // 10)
    batch_ours, batch_pin, batch_ratio = _medians_and_ratio(
        *_timings_us([ours_batch, pin_batch], repeat, nb), per=batch)
    old = os.environ.get("SVA_LINEARIZER_NUM_THREADS")
    os.environ["SVA_LINEARIZER_NUM_THREADS"] = "1"
    try:
        batch1_ratio = _medians_and_ratio(*_timings_us([ours_batch_1, pin_batch], repeat, nb),
                                          per=batch)[2]
    finally:
        if old is None:
            del os.environ["SVA_LINEARIZER_NUM_THREADS"]
        else:
            os.environ["SVA_LINEARIZER_NUM_THREADS"] = old
    return {"robot": name, "nv": nv, "e_max_vs_pinocchio": err,
            "single_ours_us": single_ours, "single_pin_us": single_pin,
            "single_ratio": single_ratio, "lean_ratio": lean_ratio,
            "lean_us": float(np.median(t_lean)), "default_us": float(np.median(t_default)),
            "pin_alloc_us": float(np.median(t_pin)), "default_ratio": default_ratio,
            "batch": batch, "batch_ours_us": batch_ours, "batch_pin_us": batch_pin,
            "batch_ratio": batch_ratio, "batch_1thread_ratio": batch1_ratio,
            "dt_over_continuous": dt_ratio}


# Contact rows: per robot, its feet as the contacts. Quadrupeds stand on four point
# feet (world-aligned, Pinocchio CONTACT_3D LOCAL_WORLD_ALIGNED), humanoids on two 6d soles (local,
# CONTACT_6D LOCAL). Baumgarte (Kp, Kd) = (0, CONTACT_KD): the Kd term is exercised on both sides,
# and with Kp = 0 the anchor (each state's own frame pose for ours) does not enter the numbers.
CONTACT_FEET = {
    "solo12": (("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "point", "world_aligned"),
    "anymal_c": (("LF_FOOT", "LH_FOOT", "RF_FOOT", "RH_FOOT"), "point", "world_aligned"),
    "hyq": (("lf_foot", "lh_foot", "rf_foot", "rh_foot"), "point", "world_aligned"),
    "talos": (("left_sole_link", "right_sole_link"), "6d", "local"),
    "g1_29dof": (("left_ankle_roll_link", "right_ankle_roll_link"), "6d", "local"),
}
DEFAULT_CONTACT_ROBOTS = ("solo12", "anymal_c", "talos")
CONTACT_KD = 2.0


def _pin_contacts(pin, pm, feet, kind, reference):
    """Pinocchio's RigidConstraintModels for the feet (joint2 = the world; with Kp = 0 its
    placement does not matter) and a function (q, v, tau) -> (A, B, forces, dforces_dz,
    dforces_dtau) on one Data kept for all calls (initConstraintDynamics once, as a user would)."""
    ctype = pin.ContactType.CONTACT_3D if kind == "point" else pin.ContactType.CONTACT_6D
    rf = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED if reference == "world_aligned" else pin.ReferenceFrame.LOCAL
    cms = pin.StdVec_RigidConstraintModel()
    for f in feet:
        fr = pm.frames[pm.getFrameId(f)]
        cm = pin.RigidConstraintModel(ctype, pm, fr.parentJoint, fr.placement, 0, pin.SE3.Identity(), rf)
        cm.m_baumgarte_parameters.Kp = 0.0
        cm.m_baumgarte_parameters.Kd = CONTACT_KD
        cms.append(cm)
    pd = pm.createData()
    cds = pin.StdVec_RigidConstraintData()
    for cm in cms:
        cds.append(cm.createData())
    pin.initConstraintDynamics(pm, pd, cms, cds)
    nv = pm.nv
    floating = pm.joints[1].shortname() == "JointModelFreeFlyer"
    off = 6 if floating else 0
    nj = nv - off
    eye = np.eye(nv)
    zeros_tau = np.zeros(off)

    def pin_contact_linearize(q, v, tau):
        """constraintDynamics + computeConstraintDynamicsDerivatives + assembling A, B (numpy)."""
        pin.constraintDynamics(pm, pd, q, v, np.concatenate([zeros_tau, tau]), cms, cds)
        ddq_dq, ddq_dv, ddq_dtau, dl_dq, dl_dv, dl_dtau = pin.computeConstraintDynamicsDerivatives(
            pm, pd, cms, cds)
        A = np.zeros((2 * nv, 2 * nv))
        A[:nv, nv:] = eye
        if off:
            A[0:6, 0:6] = -pin.Motion(v[0:6]).action           # -ad(v), linear-angular
        A[nv:, :nv] = ddq_dq
        A[nv:, nv:] = ddq_dv
        B = np.zeros((2 * nv, nj))
        B[nv:] = ddq_dtau[:, off:]
        return A, B, pd.lambda_c.copy(), np.hstack([dl_dq, dl_dv]), dl_dtau[:, off:].copy()

    return pin_contact_linearize


def bench_contacts_robot(name, batch=128, repeat=15, number=20, seed=0):
    """One robot's contact figures (dict): ours = State.from_vectors + linearize(contacts=, data=)
    -> A, B, forces, dforces_dz, dforces_dtau; Pinocchio = constraintDynamics +
    computeConstraintDynamicsDerivatives + assembling A, B (numpy); batch: linearize_batch(contacts=)
    / N vs Pinocchio in a Python loop / N. Same random states (those where neither side's contact
    solve fails); e_max over A, B, the forces and their derivatives, on every state used."""
    import sva_linearizer as sl
    from sva_linearizer.robots import load_robot, robot_urdf_path

    if name not in CONTACT_FEET:
        raise ValueError(f"bench --contacts: no feet defined for robot '{name}' (known: "
                         f"{', '.join(CONTACT_FEET)})")
    feet, kind, reference = CONTACT_FEET[name]
    model = load_robot(name)
    pin, pm, _ = _pinocchio(robot_urdf_path(name), model.floating_base, model)
    contacts = [sl.Contact(f, kind, reference, baumgarte=(0.0, CONTACT_KD)) for f in feet]
    theirs_fn = _pin_contacts(pin, pm, feet, kind, reference)
    data = sl.Data(model)
    Qr, Vr, Tr = random_states(model, 4 * batch, seed)
    keep, err = [], 0.0
    for i in range(Qr.shape[0]):           # states both sides can solve (K well-conditioned)
        try:
            lin = sl.linearize(model, sl.State.from_vectors(model, Qr[i], Vr[i]), Tr[i],
                               contacts=contacts, data=data)
            ref = theirs_fn(Qr[i], Vr[i], Tr[i])
        except (ValueError, RuntimeError):
            continue
        mine = (lin.A, lin.B, lin.forces, lin.dforces_dz, lin.dforces_dtau)
        if not all(np.all(np.isfinite(x)) for x in ref):
            continue
        err = max(err, max(float(np.max(np.abs(x - y)) / max(np.mean(np.abs(y)), 1e-300))
                           for x, y in zip(mine, ref)))
        keep.append(i)
        if len(keep) == batch:
            break
    if not keep:
        raise RuntimeError(f"bench --contacts: no state of {name} that both sides solve")
    Q, V, T = Qr[keep], Vr[keep], Tr[keep]
    n = len(keep)
    q, v, tau = Q[0], V[0], T[0]

    def ours():
        lin = sl.linearize(model, sl.State.from_vectors(model, q, v), tau, contacts=contacts, data=data)
        return lin.A, lin.B, lin.forces, lin.dforces_dz, lin.dforces_dtau

    def theirs():
        return theirs_fn(q, v, tau)

    def ours_batch():
        sl.linearize_batch(model, Q, V, T, contacts=contacts)

    def pin_batch():
        for i in range(n):
            theirs_fn(Q[i], V[i], T[i])

    OA, OB = sl.linearize_batch(model, Q, V, T, contacts=contacts)
    for i in range(n):                       # the batch's A, B against Pinocchio's too
        A_p, B_p = theirs_fn(Q[i], V[i], T[i])[:2]
        err = max(err, float(np.max(np.abs(OA[i] - A_p)) / np.mean(np.abs(A_p))),
                  float(np.max(np.abs(OB[i] - B_p)) / np.mean(np.abs(B_p))))
    single_ours, single_pin, single_ratio = _medians_and_ratio(
        *_timings_us([ours, theirs], repeat, number))
    nb = max(1, number // 10)
    batch_ours, batch_pin, batch_ratio = _medians_and_ratio(
        *_timings_us([ours_batch, pin_batch], repeat, nb), per=n)
    return {"robot": name, "nv": model.nv, "contacts": f"{len(feet)} x {kind} ({reference})",
            "m": sum(c.dim for c in contacts), "e_max_vs_pinocchio": err,
            "single_ours_us": single_ours, "single_pin_us": single_pin, "single_ratio": single_ratio,
            "batch": n, "batch_ours_us": batch_ours, "batch_pin_us": batch_pin,
            "batch_ratio": batch_ratio}


def run_contacts(robots=DEFAULT_CONTACT_ROBOTS, batch=128, repeat=15, number=20, out=print):
    """The contact rows (bench_contacts_robot per robot), printed as a table of their own."""
    _require_pinocchio()
    from sva_linearizer.linearization import num_threads

    out(f"with contacts (rigid, KKT): linearize(contacts=) vs Pinocchio constraintDynamics + "
        f"computeConstraintDynamicsDerivatives + A, B; batch of up to {batch} on {num_threads()} thread(s)")
    hdr = (f"{'robot':<10} {'nv':>3} {'contacts':<24} {'m':>3} | {'one state: ours':>15} {'pin':>7} "
           f"{'ratio':>6} | {'batch/state: ours':>17} {'pin':>7} {'ratio':>6} | e_max")
    out(hdr)
    out("-" * len(hdr))
    rows = []
    for name in robots:
        r = bench_contacts_robot(name, batch=batch, repeat=repeat, number=number)
        rows.append(r)
        out(f"{name:<10} {r['nv']:>3} {r['contacts']:<24} {r['m']:>3} | {r['single_ours_us']:>12.1f} us "
            f"{r['single_pin_us']:>7.1f} {r['single_ratio']:>5.2f}x | {r['batch_ours_us']:>14.1f} us "
            f"{r['batch_pin_us']:>7.1f} {r['batch_ratio']:>5.2f}x | {r['e_max_vs_pinocchio']:.1e}")
    out("one state: ours = State.from_vectors + linearize(contacts=, data=Data) -> A, B, forces, "
        f"dforces_dz, dforces_dtau; Pinocchio = constraintDynamics + computeConstraintDynamicsDerivatives "
        f"+ assembling A, B (numpy), one Data reused. Baumgarte (Kp, Kd) = (0, {CONTACT_KD}). batch/state: "
        "linearize_batch(contacts=) / N vs Pinocchio in a Python loop / N. e_max = max|ours - Pinocchio| "
        "/ mean|Pinocchio| over A, B, forces, dforces_dz, dforces_dtau (and the batch's A, B), every state.")
    return rows



# ---- impacts and the centroidal momentum ----------------------------------------------------------

DEFAULT_IMPACT_ROBOTS = ("solo12", "anymal_c", "talos")
IMPACT_E = 0.5                       # the restitution of the impact rows


def _pin_impacts(pin, pm, feet, kind, reference, e):
    """Pinocchio's RigidConstraintModels for the feet and a function (q, v) -> (v+, impulses, the
    reset map's Jacobian [[1, 0], [ddq_dq, ddq_dv + 1]], [dlambda_dq | dlambda_dv]) on one Data kept
    for all calls: impulseDynamics + computeImpulseDynamicsDerivatives, then the Jacobian and the
    impulses' derivatives assembled with numpy, as the contact rows assemble A, B."""
    ctype = pin.ContactType.CONTACT_3D if kind == "point" else pin.ContactType.CONTACT_6D
    rf = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED if reference == "world_aligned" else pin.ReferenceFrame.LOCAL
    cms = pin.StdVec_RigidConstraintModel()
    for f in feet:
        fr = pm.frames[pm.getFrameId(f)]
        cms.append(pin.RigidConstraintModel(ctype, pm, fr.parentJoint, fr.placement, 0, pin.SE3.Identity(), rf))
    pd = pm.createData()
    cds = pin.StdVec_RigidConstraintData()
    for cm in cms:
        cds.append(cm.createData())
    pin.initConstraintDynamics(pm, pd, cms, cds)
    nv = pm.nv
    eye = np.eye(nv)

    def pin_impact(q, v):
        pd.dvc_dq[:] = 0.0      # Pinocchio 4.1 subtracts into it (columns off the contacts' paths): a
        v_plus = pin.impulseDynamics(pm, pd, q, v, cms, cds, e)   # reused Data needs it zeroed
        pin.computeImpulseDynamicsDerivatives(pm, pd, cms, cds, e)
        J = np.zeros((2 * nv, 2 * nv))
        J[:nv, :nv] = eye
        J[nv:, :nv] = pd.ddq_dq
        J[nv:, nv:] = pd.ddq_dv + eye
        return v_plus.copy(), pd.impulse_c.copy(), J, np.hstack([pd.dlambda_dq, pd.dlambda_dv])

    return pin_impact


def bench_impact_robot(name, repeat=15, number=20, seed=0, states=32):
    """One robot's impact figures (dict): ours = State.from_vectors + linearize_impact(data=) ->
    v+, impulses, the reset map's Jacobian, dimpulses_dz; Pinocchio = _pin_impacts; restitution
    IMPACT_E, the feet of CONTACT_FEET. e_max over the four, on every state used (those both sides
    solve)."""
    import sva_linearizer as sl
    from sva_linearizer.robots import load_robot, robot_urdf_path

    if name not in CONTACT_FEET:
        raise ValueError(f"bench --impact-robots: no feet defined for robot '{name}' (known: "
                         f"{', '.join(CONTACT_FEET)})")
    feet, kind, reference = CONTACT_FEET[name]
    model = load_robot(name)
    pin, pm, _ = _pinocchio(robot_urdf_path(name), model.floating_base, model)
    contacts = [sl.Contact(f, kind, reference) for f in feet]
    theirs_fn = _pin_impacts(pin, pm, feet, kind, reference, IMPACT_E)
    data = sl.Data(model)
    Q, V, _ = random_states(model, 4 * states, seed)
    keep, err = [], 0.0
    for i in range(Q.shape[0]):
        try:
            imp = sl.linearize_impact(model, sl.State.from_vectors(model, Q[i], V[i]), contacts, IMPACT_E, data=data)
            ref = theirs_fn(Q[i], V[i])
        except (ValueError, RuntimeError):
            continue
        mine = (imp.v_plus, imp.impulses, imp.jacobian, imp.dimpulses_dz)
        if not all(np.all(np.isfinite(x)) for x in ref):
            continue
        err = max(err, max(float(np.max(np.abs(x - y)) / max(np.mean(np.abs(y)), 1e-300)) for x, y in zip(mine, ref)))
        keep.append(i)
        if len(keep) == states:
            break
    if not keep:
        raise RuntimeError(f"bench --impacts: no state of {name} that both sides solve")
    q, v = Q[keep[0]], V[keep[0]]

    def ours():
        imp = sl.linearize_impact(model, sl.State.from_vectors(model, q, v), contacts, IMPACT_E, data=data)
        return imp.v_plus, imp.impulses, imp.jacobian, imp.dimpulses_dz

    def theirs():
        return theirs_fn(q, v)

    t_ours, t_pin, ratio = _medians_and_ratio(*_timings_us([ours, theirs], repeat, number))
    return {"robot": name, "nv": model.nv, "contacts": f"{len(feet)} x {kind} ({reference})",
            "m": sum(c.dim for c in contacts), "e_max_vs_pinocchio": err, "states": len(keep),
            "ours_us": t_ours, "pin_us": t_pin, "ratio": ratio}


def run_impacts(robots=DEFAULT_IMPACT_ROBOTS, repeat=15, number=20, out=print):
    """The impact rows (bench_impact_robot per robot), printed as a table of their own."""
    _require_pinocchio()
    out(f"impacts (restitution {IMPACT_E}): linearize_impact vs Pinocchio impulseDynamics + "
        "computeImpulseDynamicsDerivatives + the reset map's Jacobian")
    hdr = (f"{'robot':<10} {'nv':>3} {'contacts':<24} {'m':>3} | {'ours':>9} {'pin':>9} {'ratio':>6} | e_max")
    out(hdr)
    out("-" * len(hdr))
    rows = []
    for name in robots:
        r = bench_impact_robot(name, repeat=repeat, number=number)
        rows.append(r)
        out(f"{name:<10} {r['nv']:>3} {r['contacts']:<24} {r['m']:>3} | {r['ours_us']:>6.1f} us "
            f"{r['pin_us']:>6.1f} us {r['ratio']:>5.2f}x | {r['e_max_vs_pinocchio']:.1e}")
    out("ours = State.from_vectors + linearize_impact(data=Data) -> v+, impulses, the reset map's Jacobian "
        "on z (2nv x 2nv), dimpulses_dz; Pinocchio = impulseDynamics + computeImpulseDynamicsDerivatives "
        "+ [[1, 0], [ddq_dq, ddq_dv + 1]] and [dlambda_dq | dlambda_dv] assembled (numpy), one Data reused. "
        "e_max = max|ours - Pinocchio| / mean|Pinocchio| over the four, on up to 32 states.")
    return rows


DEFAULT_CENTROIDAL_ROBOTS = ("solo12", "anymal_c", "talos", "g1_29dof")


def bench_centroidal_robot(name, repeat=15, number=20, seed=0, states=32):
    """One robot's centroidal figures (dict): ours = State.from_vectors + centroidal_derivatives(data=)
    -> h, h_dot, A_G, com, mass, dh_dz, dhdot_dz; Pinocchio = computeCentroidalDynamicsDerivatives
    (its four matrices) and its hg, dhg read. e_max over h, h_dot and the derivatives (Pinocchio's
    columns in our joint order), on every state."""
    import sva_linearizer as sl
    from sva_linearizer.robots import load_robot, robot_urdf_path

    model = load_robot(name)
    pin, pm, pd = _pinocchio(robot_urdf_path(name), model.floating_base, model)
    data = sl.Data(model)
    Q, V, _ = random_states(model, states, seed)
    A = np.random.default_rng(seed + 1).normal(size=(states, model.nv))
    err = 0.0
    for i in range(states):
        c = sl.centroidal_derivatives(model, sl.State.from_vectors(model, Q[i], V[i]), A[i], data=data)
        dh_dq, dhd_dq, dhd_dv, dhd_da = pin.computeCentroidalDynamicsDerivatives(pm, pd, Q[i], V[i], A[i])
        ref = (pd.hg.vector, pd.dhg.vector, np.hstack([dh_dq, dhd_da]), np.hstack([dhd_dq, dhd_dv]))
        mine = (c.h, c.h_dot, c.dh_dz, c.dhdot_dz)
        err = max(err, max(float(np.max(np.abs(x - y)) / max(np.mean(np.abs(y)), 1e-300)) for x, y in zip(mine, ref)))
    q, v, a = Q[0], V[0], A[0]

    def ours():
        c = sl.centroidal_derivatives(model, sl.State.from_vectors(model, q, v), a, data=data)
        return c.h, c.h_dot, c.dh_dz, c.dhdot_dz

    def theirs():
        d = pin.computeCentroidalDynamicsDerivatives(pm, pd, q, v, a)
        return pd.hg.vector, pd.dhg.vector, d

    t_ours, t_pin, ratio = _medians_and_ratio(*_timings_us([ours, theirs], repeat, number))
    return {"robot": name, "nv": model.nv, "e_max_vs_pinocchio": err, "states": states,
            "ours_us": t_ours, "pin_us": t_pin, "ratio": ratio}


def run_centroidal(robots=DEFAULT_CENTROIDAL_ROBOTS, repeat=15, number=20, out=print):
    """The centroidal rows (bench_centroidal_robot per robot), printed as a table of their own."""
    _require_pinocchio()
    out("centroidal momentum with derivatives: centroidal_derivatives vs Pinocchio "
        "computeCentroidalDynamicsDerivatives")
    hdr = f"{'robot':<10} {'nv':>3} | {'ours':>9} {'pin':>9} {'ratio':>6} | e_max"
    out(hdr)
    out("-" * len(hdr))
    rows = []
    for name in robots:
        r = bench_centroidal_robot(name, repeat=repeat, number=number)
        rows.append(r)
        out(f"{name:<10} {r['nv']:>3} | {r['ours_us']:>6.1f} us {r['pin_us']:>6.1f} us {r['ratio']:>5.2f}x | "
            f"{r['e_max_vs_pinocchio']:.1e}")
    out("ours = State.from_vectors + centroidal_derivatives(data=Data) -> h_G, h_G_dot, A_G, dh_dz, dhdot_dz; "
        "Pinocchio = computeCentroidalDynamicsDerivatives (dh_dq, dhdot_dq, dhdot_dv, dhdot_da) and its hg, "
        "dhg read, one Data reused (the same q, v and nu_dot = a: Pinocchio's joint order is ours for "
        "these robots). e_max = max|ours - Pinocchio| / mean|Pinocchio| over h, h_dot, [dh_dq | A_G], "
        "[dhdot_dq | dhdot_dv], on 32 states.")
    return rows

# ---- a horizon: linearize_batch per state against Pinocchio's bare loop ---------------------------

DEFAULT_HORIZON_ROBOTS = ("ur5", "solo12", "go2", "g1_29dof", "talos_full")
# contact horizons: four point feet, in the foot frames (Pinocchio CONTACT_3D LOCAL), Kd as above
HORIZON_FEET = {"solo12": ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"),
                "go2": ("FL_foot", "FR_foot", "RL_foot", "RR_foot")}


def _threads(n):
    """A context manager: SVA_LINEARIZER_NUM_THREADS = n inside (linearize_batch reads it per call)."""
    import contextlib

    @contextlib.contextmanager
    def scope():
        old = os.environ.get("SVA_LINEARIZER_NUM_THREADS")
        os.environ["SVA_LINEARIZER_NUM_THREADS"] = str(n)
        try:
            yield
        finally:
            if old is None:
                del os.environ["SVA_LINEARIZER_NUM_THREADS"]
            else:
                os.environ["SVA_LINEARIZER_NUM_THREADS"] = old
    return scope()


def bench_horizon_robot(name, horizon=64, repeat=15, number=10, seed=0, contacts=False):
    """Per state of a horizon (dict): ours = linearize_batch(model, Q, V, T, out=) (A, B into the
    caller's arrays) on one thread and on all; Pinocchio = computeABADerivatives(m, d, q, v, tau)
    in a Python loop on its own Data (no copies, no A, B: its bare cost), or with contacts=True
    constraintDynamics + computeConstraintDynamicsDerivatives (four point feet, local)."""
    import sva_linearizer as sl
    from sva_linearizer.linearization import num_threads
    from sva_linearizer._jit import compiled
    from sva_linearizer._lanes import lane_width
    from sva_linearizer.robots import load_robot, robot_urdf_path

    model = load_robot(name)
    pin, pm, pd = _pinocchio(robot_urdf_path(name), model.floating_base, model)
    nv, nj = model.nv, model.nj
    kw = {}
    if contacts:
        if name not in HORIZON_FEET:
            raise ValueError(f"bench: no feet for a contact horizon of '{name}' (known: {', '.join(HORIZON_FEET)})")
        feet = HORIZON_FEET[name]
        kw["contacts"] = [sl.Contact(f, "point", "local", baumgarte=(0.0, CONTACT_KD)) for f in feet]
        ctype, rf = pin.ContactType.CONTACT_3D, pin.ReferenceFrame.LOCAL
        cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
        for f in feet:
            fr = pm.frames[pm.getFrameId(f)]
            cm = pin.RigidConstraintModel(ctype, pm, fr.parentJoint, fr.placement, 0, pin.SE3.Identity(), rf)
            cm.m_baumgarte_parameters.Kp = 0.0
            cm.m_baumgarte_parameters.Kd = CONTACT_KD
            cms.append(cm)
            cds.append(cm.createData())
        pin.initConstraintDynamics(pm, pd, cms, cds)
    Q, V, T = random_states(model, horizon, seed)
    TF = np.hstack([np.zeros((horizon, nv - nj)), T])
    m = sum(c.dim for c in kw.get("contacts", ()))
    OA, OB = np.empty((horizon, 2 * nv, 2 * nv)), np.empty((horizon, 2 * nv, nj))

    def ours():
        if contacts:
            sl.linearize_batch(model, Q, V, T, **kw)
        else:
            sl.linearize_batch(model, Q, V, T, out=(OA, OB))

    def theirs():
        for i in range(horizon):
            if contacts:
                pin.constraintDynamics(pm, pd, Q[i], V[i], TF[i], cms, cds)
                pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds)
            else:
                pin.computeABADerivatives(pm, pd, Q[i], V[i], TF[i])

    figures = {}
    for label, n in (("1thr", 1), ("all", num_threads())):
        with _threads(n):
            ours()
            t_o, t_p = _timings_us([ours, theirs], repeat, number)
        figures[label] = _medians_and_ratio(t_o, t_p, per=horizon)
    return {"robot": name, "nv": nv, "m": m, "horizon": horizon, "threads": num_threads(),
            "lanes": lane_width() if compiled("contacts_batch" if contacts else "batch") else 1,
            "ours_1thr_us": figures["1thr"][0], "pin_us": figures["1thr"][1], "ratio_1thr": figures["1thr"][2],
            "ours_all_us": figures["all"][0], "pin_all_us": figures["all"][1], "ratio_all": figures["all"][2]}


def run_horizon(robots=DEFAULT_HORIZON_ROBOTS, contact_robots=tuple(HORIZON_FEET), horizon=64, repeat=15,
                flops=True, out=print):
    """The horizon rows (bench_horizon_robot), with GFLOP/s on one thread from the profile's
    counted flops (a child process per robot) against this core's vector peak."""
    _require_pinocchio()
    from .profile import flops_in_child, machine_peak

    peak = machine_peak()
    out(f"a horizon of {horizon} states, per state (us): linearize_batch(out=) on 1 thread and on all, "
        "against Pinocchio's bare computeABADerivatives loop (with contacts: constraintDynamics + "
        "computeConstraintDynamicsDerivatives, four point feet, local)")
    hdr = (f"{'robot':<12} {'nv':>3} {'m':>3} {'lanes':>5} | {'ours 1 thr':>10} {'pin':>7} {'ratio':>6} | "
           f"{'ours all':>8} {'pin':>7} {'ratio':>6} | {'GFLOP/s 1 thr':>13} {'of vector peak':>14}")
    out(hdr)
    out("-" * len(hdr))
    rows = []
    for name, with_contacts in [(r, False) for r in robots] + [(r, True) for r in contact_robots]:
        r = bench_horizon_robot(name, horizon=horizon, repeat=repeat, contacts=with_contacts)
        gf = of = "-"
        if flops and not with_contacts:
            r["flop"] = flops_in_child(name)["kernel"]
            rate = r["flop"] / (1e3 * r["ours_1thr_us"])
            gf = f"{rate:.1f}"
            of = f"{100 * rate / peak['simd_peak']:.0f} %" if peak["simd_peak"] else "-"
        rows.append(dict(r, contacts=with_contacts))
        out(f"{name:<12} {r['nv']:>3} {r['m']:>3} {r['lanes']:>5} | {r['ours_1thr_us']:>7.2f} us {r['pin_us']:>7.2f} "
            f"{r['ratio_1thr']:>5.2f}x | {r['ours_all_us']:>5.2f} us {r['pin_all_us']:>7.2f} {r['ratio_all']:>5.2f}x | "
            f"{gf:>13} {of:>14}")
    out("lanes: states computed in lockstep, one per vector lane (1: one at a time). Pinocchio runs on one "
        "thread in both columns; all = SVA_LINEARIZER_NUM_THREADS or the CPUs available. GFLOP/s: the "
        "kernel's counted flops per state (sva-linearizer profile) over the 1-thread time; vector peak: "
        "one core, nominal clock.")
    return rows


# ---- a horizon in one call: linearize_horizon per knot --------------------------------------------

HORIZON_DT = 0.01


def trot_schedule(n, period=8):
    """Diagonal pairs of four feet (FL, FR, HL, HR order) alternating every `period` knots: FL+HR,
    then FR+HL."""
    first = (np.arange(n) // period) % 2 == 0
    return np.stack([first, ~first, ~first, first], axis=1)


def bench_horizon_call_robot(name, horizon=64, repeat=15, number=10, seed=0, contacts=False):
    """Per knot of a horizon, one thread (dict): ours = linearize_horizon(model, Q, V, T, dt) (every
    record section but the touchdowns' impacts: touchdowns=False), with contacts=True four point
    feet (local) on a trot schedule; against linearize_batch(model, Q, V, T, dt=) on the same
    states (with contacts: the four feet fixed at every state) and Pinocchio per knot:
    computeABADerivatives (with contacts: constraintDynamics + computeConstraintDynamicsDerivatives
    with the knot's two feet, a Data per contact set) and the integration (v+ = v + dt ddq, q+ =
    integrate(q, dt v+))."""
    import sva_linearizer as sl
    from sva_linearizer.robots import load_robot, robot_urdf_path

    model = load_robot(name)
    pin, pm, pd = _pinocchio(robot_urdf_path(name), model.floating_base, model)
    nv, nj, dt = model.nv, model.nj, HORIZON_DT
    Q, V, T = random_states(model, horizon, seed)
    TF = np.hstack([np.zeros((horizon, nv - nj)), T])
    kw, batch_kw, m = {}, {}, 0
    per_knot = [None] * horizon
    if contacts:
        if name not in HORIZON_FEET:
            raise ValueError(f"bench: no feet for a contact horizon of '{name}' (known: {', '.join(HORIZON_FEET)})")
        feet = HORIZON_FEET[name]
        cs = [sl.Contact(f, "point", "local", baumgarte=(0.0, CONTACT_KD)) for f in feet]
        schedule = trot_schedule(horizon)
        kw = {"contacts": cs, "active": schedule}
        batch_kw = {"contacts": cs}
        m = sum(c.dim for c in cs)
        sets = {}
        for i in range(horizon):
            key = tuple(schedule[i])
            if key not in sets:
                cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
                for f, on in zip(feet, key):
                    if on:
                        fr = pm.frames[pm.getFrameId(f)]
                        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, fr.parentJoint, fr.placement,
                                                      0, pin.SE3.Identity(), pin.ReferenceFrame.LOCAL)
                        cm.m_baumgarte_parameters.Kp = 0.0
                        cm.m_baumgarte_parameters.Kd = CONTACT_KD
                        cms.append(cm)
                        cds.append(cm.createData())
                dk = pm.createData()
                pin.initConstraintDynamics(pm, dk, cms, cds)
                sets[key] = (dk, cms, cds)
            per_knot[i] = sets[key]

    def ours():     # without the touchdowns' impacts, as the other two (the impacts have rows of their own)
        sl.linearize_horizon(model, Q, V, T, dt, touchdowns=False, **kw)

    def batch():
        sl.linearize_batch(model, Q, V, T, dt=dt, **batch_kw)

    def theirs():
        for i in range(horizon):
            if contacts:
                dk, cms, cds = per_knot[i]
                ddq = pin.constraintDynamics(pm, dk, Q[i], V[i], TF[i], cms, cds)
                pin.computeConstraintDynamicsDerivatives(pm, dk, cms, cds)
            else:
                pin.computeABADerivatives(pm, pd, Q[i], V[i], TF[i])
                ddq = pd.ddq
            v_next = V[i] + dt * ddq
            pin.integrate(pm, Q[i], dt * v_next)

    with _threads(1):
        ours()
        batch()
        t_o, t_b, t_p = _timings_us([ours, batch, theirs], repeat, number)
    return {"robot": name, "nv": nv, "m": m, "horizon": horizon, "dt": dt,
            "schedule": "trot" if contacts else "free",
            "ours_us": float(np.median(t_o)) / horizon, "batch_us": float(np.median(t_b)) / horizon,
            "pin_us": float(np.median(t_p)) / horizon, "ratio_batch": float(np.median(t_o / t_b)),
            "ratio_pin": float(np.median(t_o / t_p))}


def run_horizon_call(robots=("ur5", "g1_29dof", "talos_full"), contact_robots=tuple(HORIZON_FEET), horizon=64,
                     repeat=15, out=print):
    """The rows of linearize_horizon (bench_horizon_call_robot): the contact robots on a trot, the
    others free."""
    _require_pinocchio()
    out(f"a horizon in one call, {horizon} knots, dt = {HORIZON_DT}, per knot on one thread (us): "
        "linearize_horizon (every record section, touchdowns=False) against linearize_batch(dt=) on the same "
        "states (four feet fixed) and Pinocchio per knot (constraintDynamics + computeConstraintDynamicsDerivatives "
        "with the knot's feet, or computeABADerivatives; then the integration)")
    hdr = (f"{'robot':<12} {'nv':>3} {'m':>3} {'schedule':>8} | {'horizon':>10} | {'batch':>8} {'ratio':>6} | "
           f"{'pin':>8} {'ratio':>6}")
    out(hdr)
    out("-" * len(hdr))
    rows = []
    for name, with_contacts in [(r, True) for r in contact_robots] + [(r, False) for r in robots]:
        r = bench_horizon_call_robot(name, horizon=horizon, repeat=repeat, contacts=with_contacts)
        rows.append(dict(r, contacts=with_contacts))
        out(f"{name:<12} {r['nv']:>3} {r['m']:>3} {r['schedule']:>8} | {r['ours_us']:>7.2f} us | "
            f"{r['batch_us']:>5.2f} us {r['ratio_batch']:>5.2f}x | {r['pin_us']:>5.2f} us {r['ratio_pin']:>5.2f}x")
    out("trot: four point feet (local), diagonal pairs alternating every 8 knots; the batch has all four fixed. "
        "Ratios: the median of the run-by-run ratios (the three take turns in every run).")
    return rows


# ---- second-order derivatives ---------------------------------------------------------------------

DEFAULT_SECOND_ORDER_ROBOTS = ("solo12", "g1_29dof", "talos")


def count_second_order_flops(name: str) -> int:
    """Floating-point operations of the second-order kernel (second_order_entry, after EIDAmb) on
    one state of robot `name`: its plain-Python form on profile's counting floats. Call in a
    process with SVA_LINEARIZER_NO_JIT=1 (second_order_flops_in_child)."""
    import sva_linearizer as sl
    from sva_linearizer.algorithms import eidamb_second_derivatives as so
    from sva_linearizer.algorithms.eidamb import eidamb, set_base_acceleration
    from sva_linearizer.algorithms.kinematics import prepare
    from sva_linearizer.data import views_py
    from sva_linearizer.robots import load_robot

    from sva_linearizer import _jit
    from sva_linearizer.tools.profile import _COUNT, _counted
    if _jit.HAVE_NUMBA:
        raise RuntimeError("count_second_order_flops runs the plain-Python kernels: set SVA_LINEARIZER_NO_JIT=1")
    model = load_robot(name)
    Q, V, _ = random_states(model, 1, 0)
    d = sl.Data(model)
    fb = _counted(d.fb)
    q, v, nu_dot = _counted(Q[0]), _counted(V[0]), _counted(np.zeros(model.nv))
    m, w, _ = views_py(d.ib, fb)
    prepare(m, w, q, v, nu_dot)
    set_base_acceleration(m, w, nu_dot)
    eidamb(m, w, v, nu_dot, True)
    ws = so._Workspace(d)
    args = [x if x.dtype.kind == "i" else _counted(x) for x in ws.args()]
    out = [_counted(x) for x in so._outputs(model, model.nv)]
    before = _COUNT[0]
    so.second_order_entry(d.ib, fb, *args, *out)
    return _COUNT[0] - before


def second_order_flops_in_child(name: str) -> int:
    code = ("import sys; from sva_linearizer.tools.bench import count_second_order_flops; "
            f"print(count_second_order_flops({name!r}))")
    env = dict(os.environ, SVA_LINEARIZER_NO_JIT="1")
    r = subprocess.run(python_command(code), capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"bench: counting the second-order flops of {name} failed:\n{r.stderr[-2000:]}")
    return int(r.stdout.strip().splitlines()[-1])


def bench_second_order_robot(name, repeat=15, number=5, seed=0, h=1e-6):
    """One robot's second-order figures (dict): extended_inverse_dynamics_second_derivatives with
    a Data and without, against Pinocchio's central differences of computeRNEADerivatives along
    each tangent direction of q (pin.integrate; 2 nv calls: d2tau/dq2 and d2tau/dq dnu) and also
    along v (4 nv calls in all: d2tau/dnu2 too), buffers preallocated."""
    import sva_linearizer as sl
    from sva_linearizer.robots import load_robot, robot_urdf_path

    model = load_robot(name)
    pin, pm, pd = _pinocchio(robot_urdf_path(name), model.floating_base, model)
    Q, V, _ = random_states(model, 1, seed)
    q, v = Q[0], V[0]
    nv = model.nv
    nu_dot = np.random.default_rng(seed + 1).normal(size=nv)
    state = sl.State.from_vectors(model, q, v)
    data = sl.Data(model)
    steps = [h * e for e in np.eye(nv)]
    T, X, W = (np.zeros((nv, nv, nv)) for _ in range(3))
    inv2h = 1.0 / (2.0 * h)

    def ours():
        return sl.extended_inverse_dynamics_second_derivatives(model, state, nu_dot, data=data)

    def ours_default():
        return sl.extended_inverse_dynamics_second_derivatives(model, state, nu_dot)

    def pin_q():
        for k in range(nv):
            pin.computeRNEADerivatives(pm, pd, pin.integrate(pm, q, steps[k]), v, nu_dot)
            T[:, :, k] = pd.dtau_dq
            X[:, k, :] = pd.dtau_dv
            pin.computeRNEADerivatives(pm, pd, pin.integrate(pm, q, -steps[k]), v, nu_dot)
            T[:, :, k] -= pd.dtau_dq
            X[:, k, :] -= pd.dtau_dv
        T[...] *= inv2h
        X[...] *= inv2h

    def pin_q_v():
        pin_q()
        for k in range(nv):
            pin.computeRNEADerivatives(pm, pd, q, v + steps[k], nu_dot)
            W[:, :, k] = pd.dtau_dv
            pin.computeRNEADerivatives(pm, pd, q, v - steps[k], nu_dot)
            W[:, :, k] -= pd.dtau_dv
        W[...] *= inv2h

    so = ours()
    pin_q_v()
    err = max(float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(b))))
              for a, b in ((so.d2tau_dq2, T), (so.d2tau_dq_dnu, X), (so.d2tau_dnu2, W)))
    t_ours, t_default, t_q, t_qv = _timings_us([ours, ours_default, pin_q, pin_q_v], repeat, number)
    return {"robot": name, "nv": nv, "ours_us": float(np.median(t_ours)),
            "default_us": float(np.median(t_default)), "pin_q_us": float(np.median(t_q)),
            "pin_qv_us": float(np.median(t_qv)), "ratio_q": float(np.median(t_q / t_ours)),
            "ratio_qv": float(np.median(t_qv / t_ours)),
            "ratio_default_q": float(np.median(t_q / t_default)), "e_max_vs_pinocchio_fd": err}


def run_second_order(robots=DEFAULT_SECOND_ORDER_ROBOTS, repeat=15, number=5, flops=True, out=print):
    """The second-order rows (bench_second_order_robot per robot), printed as a table of their own."""
    _require_pinocchio()
    out("second-order derivatives of inverse dynamics: extended_inverse_dynamics_second_derivatives "
        "(d2tau/dq2, d2tau/dnu2, d2tau/dq dnu, dM/dq) vs central differences of Pinocchio's "
        "computeRNEADerivatives")
    hdr = (f"{'robot':<10} {'nv':>3} | {'ours, Data':>10} {'default':>9} | {'pin 2nv':>9} {'speed-up':>8} "
           f"{'(default)':>9} | {'pin 4nv':>9} {'speed-up':>8} | {'kflop':>7} {'GFLOP/s':>7} | e_max")
    out(hdr)
    out("-" * len(hdr))
    rows = []
    for name in robots:
        r = bench_second_order_robot(name, repeat=repeat, number=number)
        r["flops"] = second_order_flops_in_child(name) if flops else float("nan")
        r["gflops"] = r["flops"] / (r["ours_us"] * 1e3)
        rows.append(r)
        out(f"{name:<10} {r['nv']:>3} | {r['ours_us']:>7.1f} us {r['default_us']:>6.1f} us | "
            f"{r['pin_q_us']:>6.0f} us {r['ratio_q']:>7.1f}x {r['ratio_default_q']:>8.1f}x | "
            f"{r['pin_qv_us']:>6.0f} us {r['ratio_qv']:>7.1f}x | {r['flops'] / 1e3:>7.0f} "
            f"{r['gflops']:>7.2f} | {r['e_max_vs_pinocchio_fd']:.1e}")
    out("ours, Data = with data= (the result's arrays reused); default = new arrays per call. pin 2nv = "
        "2 nv calls of computeRNEADerivatives at q (+) +-h e_k (pin.integrate), differenced into "
        "preallocated d2tau/dq2 and d2tau/dq dnu; pin 4nv = also at v +- h e_k (d2tau/dnu2); "
        "speed-up = Pinocchio's time over ours (median of the runs' ratios; (default): over ours "
        "without a Data). kflop: the second-order kernel's counted operations after EIDAmb (plain-"
        "Python kernels on counting floats); GFLOP/s: those over ours, Data. e_max = max|ours - "
        "Pinocchio's differences| / max(1, max|differences|) over the three tensors (h = 1e-6).")
    return rows


_STARTUP = r"""
import json, resource, sys, time
t0 = time.perf_counter()
side, name, path, floating = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
import numpy as np
if side == "ours":
    import sva_linearizer as sl
    m = sl.load_urdf(path, floating_base=floating)
    nq, nv, nj = m.nq, m.nv, m.nj
else:                      # Pinocchio alone: this package (and numba) not imported
    import pinocchio as pin
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating \
        else pin.buildModelFromUrdf(path)
    pd = pm.createData()
    nq, nv, nj = pm.nq, pm.nv, pm.nv - (6 if floating else 0)
rng = np.random.default_rng(0)
q = np.zeros(nq)
if floating:
    q[0:3] = rng.normal(size=3)
    quat = rng.normal(size=4)
    q[3:7] = quat / np.linalg.norm(quat)
q[nq - nj:] = rng.uniform(-1.0, 1.0, nj)
v, tau = rng.normal(size=nv), rng.normal(size=nj)
t1 = time.perf_counter()
if side == "ours":
    sl.linearize(m, sl.State.from_vectors(m, q, v), tau)
else:
    pin.computeABADerivatives(pm, pd, q, v, np.concatenate([np.zeros(nv - nj), tau]))
t2 = time.perf_counter()
try:                       # VmHWM: this process's peak RSS (ru_maxrss can inherit the parent's)
    with open("/proc/self/status") as fh:
        peak = [float(x.split()[1]) / 1024.0 for x in fh if x.startswith("VmHWM:")][0]
except (OSError, IndexError):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
print(json.dumps({"first_call_s": t2 - t1, "process_to_result_s": t2 - t0, "peak_rss_mb": peak}))
"""


def startup(name, side="ours", cold=False, timeout=900):
    """First linearization in a fresh process (after imports and model loading): its time (s),
    the time from process start (s) and the process's peak RSS (MB). cold=True empties numba's
    compile cache first (a private NUMBA_CACHE_DIR)."""
    from sva_linearizer.robots import default_floating_base, robot_urdf_path

    floating = default_floating_base(name)
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if cold:       # the first answer from an empty cache: the plain-Python kernels (its
            env["NUMBA_CACHE_DIR"] = tmp      # background compile not started: it would outlive tmp)
            env["SVA_LINEARIZER_COMPILE"] = "never"
        out = subprocess.run(python_command(_STARTUP, side, name, str(robot_urdf_path(name)),
                                            "1" if floating else "0"), env=env,
                             capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"startup run failed for {name} ({side}): {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(robots=DEFAULT_ROBOTS, batch=128, repeat=15, number=20, cold=True, out=print):
    _require_pinocchio()
    from sva_linearizer.linearization import num_threads

    rows = []
    out(machine_line())   # (the ratios depend on the CPU: say which)
    out(f"sva_linearizer vs Pinocchio, same random states, one process; batch of {batch} on "
        f"{num_threads()} thread(s); medians of {repeat} runs, ours and Pinocchio taking turns; "
        "ratio = median of the runs' ratios")
    hdr = (f"{'robot':<10} {'nv':>3} | {'lean':>7} {'pin pre':>7} {'ratio':>6} | {'State+Data':>10} "
           f"{'ratio':>6} | {'default':>7} {'pin alloc':>9} {'ratio':>6} | "
           f"{'batch/state: ours':>17} {'pin':>7} {'ratio':>6} {'1 thr':>6} | {'dt':>5} | {'1st call warm':>13} "
           f"{'cold':>7} {'pin':>7} | {'peak RSS MB ours':>16} {'pin':>5} | e_max")
    out(hdr)
    out("-" * len(hdr))
    for name in robots:
        r = bench_robot(name, batch=batch, repeat=repeat, number=number)
        warm = startup(name, "ours")
        pin_start = startup(name, "pinocchio")
        r["first_call_warm_s"] = warm["first_call_s"]
        r["process_to_result_warm_s"] = warm["process_to_result_s"]
        r["peak_rss_ours_mb"] = warm["peak_rss_mb"]
        r["peak_rss_pin_mb"] = pin_start["peak_rss_mb"]
        r["first_call_pin_s"] = pin_start["first_call_s"]
        r["first_call_cold_s"] = startup(name, "ours", cold=True)["first_call_s"] if cold else float("nan")
        rows.append(r)
        out(f"{name:<10} {r['nv']:>3} | {r['lean_us']:>7.1f} {r['single_pin_us']:>7.1f} {r['lean_ratio']:>5.2f}x | "
            f"{r['single_ours_us']:>10.1f} {r['single_ratio']:>5.2f}x | {r['default_us']:>7.1f} "
            f"{r['pin_alloc_us']:>9.1f} {r['default_ratio']:>5.2f}x | "
            f"{r['batch_ours_us']:>14.1f} us {r['batch_pin_us']:>7.1f} "
            f"{r['batch_ratio']:>5.2f}x {r['batch_1thread_ratio']:>5.2f}x | {r['dt_over_continuous']:>4.2f}x | "
            f"{r['first_call_warm_s']:>11.3f} s {r['first_call_cold_s']:>5.1f} s "
            f"{r['first_call_pin_s']:>5.4f} s | {r['peak_rss_ours_mb']:>16.0f} {r['peak_rss_pin_mb']:>5.0f} | "
            f"{r['e_max_vs_pinocchio']:.1e}")
    out("one state, from flat vectors to A and B, in us: lean = linearize_flat(model, q, v, tau, data) "
        "against pin pre = computeABADerivatives into preallocated buffers and A, B; State+Data = "
        "State.from_vectors + linearize(..., data=) against pin pre; default = State.from_vectors + "
        "linearize(model, state, tau) against pin alloc = the same Pinocchio call with tau "
        "concatenated and A, B allocated per call. batch/state: "
        "linearize_batch / N vs Pinocchio in a Python loop / N that keeps each A, B in (N, ...) "
        "arrays as ours does (1 thr: the batch on one thread). "
        "dt: one state with dt (A, B and Ad, Bd) over one state without. 1st call: in a fresh process, "
        "after imports and model loading (warm: numba cache present; cold: empty cache, the "
        "kernels' plain-Python form answering while they would compile). "
        "e_max = max|ours - Pinocchio| / mean|Pinocchio| over A and B.")
    return rows


def add_subcommand(sub):
    bp = sub.add_parser("bench", help="benchmark against Pinocchio (one process, same states)")
    bp.add_argument("--robots", default=",".join(DEFAULT_ROBOTS),
                    help="comma-separated robot names (default: %(default)s)")
    bp.add_argument("--batch", type=int, default=128, help="batch size (default: %(default)s)")
    bp.add_argument("--against", default="pinocchio", choices=["pinocchio"],
                    help="the reference (only Pinocchio for now)")
    bp.add_argument("--repeat", type=int, default=15, help="timing runs per figure (median)")
    bp.add_argument("--no-cold", action="store_true",
                    help="skip the cold-start measurement (it compiles everything, ~1 min)")
    _row_options(bp, "contacts", "contact-robots", DEFAULT_CONTACT_ROBOTS, "contact rows",
                 "rigid contacts on the feet vs Pinocchio's constraintDynamics + derivatives", CONTACT_FEET)
    _row_options(bp, "second-order", "second-order-robots", DEFAULT_SECOND_ORDER_ROBOTS, "second-order rows",
                 "extended_inverse_dynamics_second_derivatives vs central differences of Pinocchio's "
                 "computeRNEADerivatives")
    bp.add_argument("--horizon", type=int, default=64,
                    help="states of the horizon rows (linearize_batch per state against Pinocchio's bare "
                         "loop; default: %(default)s; 0: no horizon rows)")
    bp.add_argument("--horizon-robots", default=",".join(DEFAULT_HORIZON_ROBOTS),
                    help="robots of the horizon rows (default: %(default)s)")
    bp.add_argument("--horizon-contact-robots", default=",".join(HORIZON_FEET),
                    help="robots of the horizon rows with contacts, and of linearize_horizon's rows on a trot "
                         "(the other horizon robots: free) (default: %(default)s)")
    bp.add_argument("--only-horizon", action="store_true", help="the horizon rows alone")
    _row_options(bp, "impacts", "impact-robots", DEFAULT_IMPACT_ROBOTS, "impact rows",
                 "linearize_impact vs Pinocchio's impulseDynamics + derivatives", CONTACT_FEET)
    _row_options(bp, "centroidal", "centroidal-robots", DEFAULT_CENTROIDAL_ROBOTS, "centroidal rows",
                 "centroidal_derivatives vs Pinocchio's computeCentroidalDynamicsDerivatives")
    bp.add_argument("--json", help="also write the figures to this JSON file")
    bp.set_defaults(func=cmd_bench)


def _row_options(bp, name: str, robots_flag: str, robots, rows: str, what: str, known=None) -> None:
    """--NAME/--no-NAME (the rows, default on), --ROBOTS_FLAG (their robots) and --only-NAME."""
    bp.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=True,
                    help=f"also the {rows} ({what}; default: on)")
    bp.add_argument(f"--{robots_flag}", default=",".join(robots),
                    help=f"robots of the {rows} (default: %(default)s"
                         + (f"; known: {', '.join(known)})" if known else ")"))
    bp.add_argument(f"--only-{name}", action="store_true", help=f"the {rows} alone")


def _names(text):
    return [r.strip() for r in text.split(",") if r.strip()]


def cmd_bench(args):
    from sva_linearizer.robots import KNOWN_ROBOTS

    if args.batch < 1:
        raise ValueError("--batch must be >= 1")
    if args.horizon < 0:
        raise ValueError("--horizon must be >= 0")
    only = [flag for flag in ("only_contacts", "only_second_order", "only_horizon", "only_impacts",
                              "only_centroidal") if getattr(args, flag)]
    if len(only) > 1:
        raise ValueError("bench: give at most one of --only-contacts, --only-second-order, --only-horizon, "
                         "--only-impacts, --only-centroidal")
    sections = {"main": not only, "contacts": args.contacts and not only,
                "second_order": args.second_order and not only, "horizon": args.horizon > 0 and not only,
                "impacts": args.impacts and not only, "centroidal": args.centroidal and not only}
    if only:
        sections[only[0][len("only_"):]] = True
    lists = {"main": ("--robots", _names(args.robots)), "contacts": ("--contact-robots", _names(args.contact_robots)),
             "second_order": ("--second-order-robots", _names(args.second_order_robots)),
             "horizon": ("--horizon-robots", _names(args.horizon_robots)),
             "impacts": ("--impact-robots", _names(args.impact_robots)),
             "centroidal": ("--centroidal-robots", _names(args.centroidal_robots))}
    for section, (flag, names) in lists.items():     # every name checked before anything runs
        unknown = [n for n in names if n not in KNOWN_ROBOTS] if sections[section] else []
        if unknown:
            raise ValueError(f"bench {flag}: unknown robot {unknown[0]!r}; known robots: {', '.join(KNOWN_ROBOTS)}")
    if sections["impacts"] and any(n not in CONTACT_FEET for n in lists["impacts"][1]):
        raise ValueError(f"bench --impact-robots: feet are known for {', '.join(CONTACT_FEET)} only")
    hc = _names(args.horizon_contact_robots) if sections["horizon"] else []
    if any(n not in HORIZON_FEET for n in hc):
        raise ValueError(f"bench --horizon-contact-robots: feet are known for {', '.join(HORIZON_FEET)} only")
    rows = []
    if sections["main"]:
        rows += run(lists["main"][1], batch=args.batch, repeat=args.repeat, cold=not args.no_cold)
    if sections["horizon"]:
        if rows:
            print()
        rows += [dict(r, section="horizon") for r in run_horizon(lists["horizon"][1], hc, horizon=args.horizon,
                                                                   repeat=args.repeat)]
        print()
        free = [n for n in lists["horizon"][1] if n not in hc]
        rows += [dict(r, section="horizon_call") for r in run_horizon_call(free, hc, horizon=args.horizon,
                                                                           repeat=args.repeat)]
    if sections["contacts"]:
        if rows:
            print()
        rows += [dict(r, section="contacts") for r in run_contacts(lists["contacts"][1], batch=args.batch,
                                                                   repeat=args.repeat)]
    if sections["second_order"]:
        if rows:
            print()
        rows += [dict(r, section="second_order") for r in run_second_order(lists["second_order"][1],
                                                                           repeat=args.repeat)]
    if sections["impacts"]:
        if rows:
            print()
        rows += [dict(r, section="impacts") for r in run_impacts(lists["impacts"][1], repeat=args.repeat)]
    if sections["centroidal"]:
        if rows:
            print()
        rows += [dict(r, section="centroidal") for r in run_centroidal(lists["centroidal"][1], repeat=args.repeat)]
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    return 0
