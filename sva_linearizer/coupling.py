# SPDX-License-Identifier: BSD-3-Clause
"""Coupled (mimic) joints: a tree Model whose mimic joints follow their parent joints.

URDF's ``<mimic joint="p" multiplier="k" offset="o"/>`` on joint j means s_j = k s_p + o
(Pinocchio's convention; a mimic of a mimic composes). The independent joints are the model's
degrees of freedom; with the coupling matrix G (nv_tree x nv) and the offset s0 (nj_tree),
    s_tree = s0 + G_s s,   nu_tree = G nu,   nu_dot_tree = G nu_dot      (G = I6 (+) G_s: floating)
and the dynamics of the coupled system are those of the tree projected on G (Kim, seeds/003,
Section 3: the constrained system on its independent coordinates):
    M_r = G^T M G,  h_r = G^T h,  M_r nu_dot = S tau - h_r,
    d(G^T ID)/dz = G^T D_q G (z_q columns), G^T D_nu G (nu columns),
D_q, D_nu the tree's EIDAmb derivatives at the tree state (the coupling is linear, so G does not
vary). The algorithms run on the tree (`CoupledModel.tree`); the public functions reduce.
"""
from __future__ import annotations

import numpy as np

from .model import Model
from .state import State, as_vector


class CoupledModel:
    """A Model with mimic joints coupled to their parents: model.joint_names, nj, nv, nq are those
    of the independent joints; `tree` is the full kinematic tree (every joint a DoF), `mimic`
    maps each mimic joint to (independent joint, multiplier, offset) after composing chains."""

    def __init__(self, tree: Model, mimic: dict[str, tuple[str, float, float]]):
        names = tree.joint_names
        resolved = {}
        for j, (p, k, o) in mimic.items():
            if j not in names:
                raise ValueError(f"mimic joint '{j}' is not a moving joint of the tree")
            chain, mult, off, cur = [j], 1.0, 0.0, j
            while cur in mimic:
                par, kk, oo = mimic[cur]
                if par not in names:
                    raise ValueError(f"mimic joint '{cur}' follows '{par}', which is not a moving joint "
                                     f"of the tree (mimic chain {' -> '.join(chain + [par])})")
                if par in chain:
                    raise ValueError(f"mimic joints form a cycle: {' -> '.join(chain + [par])}")
                mult, off = mult * kk, mult * oo + off        # s_j = mult (kk s_par + oo) + off
                chain.append(par)
                cur = par
            resolved[j] = (cur, mult, off)
        self.tree = tree
        self.mimic = resolved
        self.joint_names = [n for n in names if n not in resolved]
        self.bodies = [b for b in tree.bodies if b.name not in resolved]   # (State reads len(bodies))
        nt, nr = len(names), len(self.joint_names)
        col = {n: i for i, n in enumerate(self.joint_names)}
        Gs = np.zeros((nt, nr))
        s0 = np.zeros(nt)
        for i, n in enumerate(names):
            if n in resolved:
                p, k, o = resolved[n]
                Gs[i, col[p]] = k
                s0[i] = o
            else:
                Gs[i, col[n]] = 1.0
        nb = 6 if tree.floating_base else 0
        G = np.zeros((nt + nb, nr + nb))
        G[:nb, :nb] = np.eye(nb)
        G[nb:, nb:] = Gs
        self.Gs, self.s0, self.G = Gs, s0, G
        for a in (Gs, s0, G):
            a.flags.writeable = False

    # the Model's queries, in the independent joints
    floating_base = property(lambda self: self.tree.floating_base)
    gravity = property(lambda self: self.tree.gravity)
    name = property(lambda self: self.tree.name)
    base_name = property(lambda self: self.tree.base_name)
    strict = property(lambda self: self.tree.strict)
    frame_names = property(lambda self: self.tree.frame_names)
    nj = property(lambda self: len(self.joint_names))
    nv = property(lambda self: self.nj + (6 if self.floating_base else 0))
    nq = property(lambda self: self.nj + (7 if self.floating_base else 0))

    def joint_index(self, name: str) -> int:
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ValueError(f"unknown joint name '{name}' (model '{self.name}' has the independent "
                             f"joints: {', '.join(self.joint_names)})") from None

    def __repr__(self):
        kind = "floating" if self.floating_base else "fixed"
        return (f"<sva_linearizer.Model '{self.name}': {kind} base, nj={self.nj}, nv={self.nv}, "
                f"{len(self.mimic)} mimic joints>")

    def arrays(self):
        return self.tree.arrays()

    # the maps between the independent coordinates and the tree's
    def tree_state(self, state: State) -> State:
        """The tree's State of a State of this model: s_tree = s0 + G_s s, r_tree = G_s r."""
        if not isinstance(state, State) or state.nj != self.nj or state.floating_base != self.floating_base:
            raise ValueError(f"state: expected an sl.State of this model (nj={self.nj}, "
                             f"floating_base={self.floating_base})")
        nb = 7 if self.floating_base else 0
        q, v = state.q, state.v
        qt = np.concatenate([q[:nb], self.s0 + self.Gs @ q[nb:]])
        return State.from_vectors(self.tree, qt, self.G @ v)

    def tree_vector(self, x, what: str) -> np.ndarray:
        """G x for a velocity-like vector x (nv,)."""
        return self.G @ as_vector(what, x, self.nv)

    def reduce(self, X: np.ndarray) -> np.ndarray:
        """G^T X G (X nv_tree x nv_tree)."""
        return self.G.T @ X @ self.G

    def reduce_rows(self, x: np.ndarray) -> np.ndarray:
        """G^T x."""
        return self.G.T @ x


def is_coupled(model) -> bool:
    return type(model) is CoupledModel


def coupled_inverse(model: CoupledModel, M: np.ndarray) -> np.ndarray:
    """M_r^-1 of the reduced mass matrix M_r = G^T M G (Cholesky; symmetric); a ValueError when
    M_r is not positive definite (a coupling that leaves a massless degree of freedom)."""
    try:
        L = np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        raise ValueError(f"model '{model.name}': the mass matrix G^T M G of the independent joints "
                         "is not positive definite at this state") from None
    W = np.linalg.solve(L, np.eye(M.shape[0]))
    return W.T @ W
