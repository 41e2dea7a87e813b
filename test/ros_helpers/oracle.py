"""Pinocchio as an independent oracle for A and B (same assembly as test_pinocchio.py; see the
thesis notes, section 2): lower blocks from computeABADerivatives, B from Minv, upper blocks
[[-ad(v) (+) 0, I]]. Joints matched by name."""
import numpy as np

from sva_linearizer.spatial import crm


def pinocchio_A_B(urdf_path, model, q, v, tau):
    """A, B in our ordering for our flat q = [p, quat xyzw, s] / s, v = [v_lin, w, r] / r, tau."""
    import pinocchio as pin

    floating = model.floating_base
    pm = (pin.buildModelFromUrdf(str(urdf_path), pin.JointModelFreeFlyer()) if floating
          else pin.buildModelFromUrdf(str(urdf_path)))
    pd = pm.createData()
    off = 6 if floating else 0
    nv, nj = pm.nv, model.nj
    assert nv == model.nv
    qp, vp, taup = pin.neutral(pm), np.zeros(nv), np.zeros(nv)
    if floating:
        qp[0:7] = q[0:7]
        vp[0:6] = v[0:6]
    vi = []
    for j, name in enumerate(model.joint_names):
        jid = pm.getJointId(name)
        assert jid < pm.njoints and pm.nvs[jid] == 1, name
        iq, iv = pm.idx_qs[jid], pm.idx_vs[jid]
        s = q[(7 if floating else 0) + j]
        if pm.nqs[jid] == 2:                      # continuous joint stored as (cos, sin)
            qp[iq], qp[iq + 1] = np.cos(s), np.sin(s)
        else:
            qp[iq] = s
        vp[iv], taup[iv] = v[off + j], tau[j]
        vi.append(iv)
    vi = np.array(vi)
    pin.computeABADerivatives(pm, pd, qp, vp, taup)
    Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T   # Pinocchio fills the upper triangle
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, nv:] = np.eye(nv)
    if floating:
        A[0:6, 0:6] = -crm(vp[0:6])
    A[nv:, :nv] = pd.ddq_dq
    A[nv:, nv:] = pd.ddq_dv
    B = np.zeros((2 * nv, nj))
    B[nv:, :] = Minv[:, vi]
    perm = np.r_[np.arange(off), vi]                 # our v index -> Pinocchio's
    P = np.r_[perm, nv + perm]
    return A[np.ix_(P, P)], B[P, :]

