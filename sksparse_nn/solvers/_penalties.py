r"""The solvers' one penalty module: the group penalty
:math:`\lambda \sum_j \rho_j \|w_j\|^{2/D}` as objects a solver composes with a datafit
(:mod:`._datafits`), and the stopping rule's per-group KKT violations and their scale
(the functions every solver of the package shares).

A penalty answers, for coefficients ``W`` of shape ``(n_rows, n_outputs)`` whose rows
carry the group labels ``labels`` (``-1``: unpenalized, an intercept row included):

``value(W)``
    the penalty;
``prox(Z, step)``
    the proximal operator of ``step`` times the penalty (plus the constraint
    ``W >= 0`` with ``positive``): the minimizer of ``||V - Z||^2 / 2 + step pen(V)``;
``violations(W, G)``
    per group, the distance of ``-G`` (``G`` the datafit's gradient) to the penalty's
    subdifferential (plus the normal cone of ``W >= 0``): zero exactly at stationary
    points; ``kkt_scale(G0)`` turns them relative;
``convex``
    whether the penalty is convex (the solver may accelerate).

* :class:`GroupNorm`: ``D = 2``, the (weighted) group lasso;
* :class:`GatedGroupNorm`: ``D >= 2``, the penalty D-Gating induces through its
  variational form (``variational(W)``: the balanced factors and their smooth penalty
  ``lam / D (||omega||^2 + ||Gamma||^2)``, equal to the penalty at balance).

Group norms and the penalty's value are :mod:`sksparse_nn.groups`' arithmetic
(``norms_by_label``, ``penalty_value``); this module adds what solvers need.
"""

from __future__ import annotations

import functools

import numpy as np

from ..groups import count_groups, norms_by_label, penalty_value
from ._data import extended_groups

__all__ = [
    "GatedGroupNorm",
    "GroupNorm",
    "ext_norms",
    "ext_penalty",
    "group_violations",
    "kkt_scale",
    "kkt_setup",
    "kkt_violation",
    "row_squares",
]

# Newton steps of the scalar proximal problem of the non-convex penalties (quadratic
# convergence from the right of the root: a few suffice, the rest are a margin).
_PROX_NEWTON_STEPS = 60


def row_squares(a):
    """Squared norm of each row of ``a`` (its squares when ``a`` is 1-d): a feature's
    coefficients across outputs count together."""
    return a * a if a.ndim == 1 else np.einsum("ij,ij->i", a, a)


def ext_norms(a, ext, n_ext):
    """The norm of every stopping-rule group's rows of ``a`` (``ext``: one label per
    row, every row in a group: the unpenalized ones alone in groups of weight 0): the
    group norms every solver takes, of coefficients, gradients and steps."""
    out = np.bincount(ext, weights=row_squares(a), minlength=n_ext)
    return np.sqrt(out, out=out)


def ext_penalty(a, ext, lam_rho, n_ext):
    """``sum_j lam rho_j ||a_j||`` over the groups ``ext`` (see :func:`ext_norms`)."""
    return float(lam_rho @ ext_norms(a, ext, n_ext))


def group_violations(w, g, ext, lam_rho, n_ext, positive=False):
    """Distance of ``-g`` to the subdifferential of the penalty (and, with ``positive``,
    plus the normal cone of ``w >= 0``), per group; also returns the live-group mask.

    For a live group ``j`` the distance is the norm of ``g_j + lam rho_j w_j / ||w_j||``,
    where with ``positive`` a coordinate at zero contributes only ``min(g_i, 0)`` (the
    normal cone of ``w_i >= 0`` at ``w_i = 0`` absorbs any ``g_i >= 0``). For a zero
    group it is ``max(0, ||g_j|| - lam rho_j)``, with ``min(g_j, 0)`` in place of ``g_j``
    under ``positive`` (only the positive part of ``-g_j`` pulls the group away from 0).

    ``w`` and ``g`` are ``(p,)``, or ``(p, k)`` with a feature's ``k`` coefficients in its
    group (multi-output); ``positive`` is a bool, or a ``(p,)`` mask of the constrained
    features.
    """
    # (temporaries dropped as soon as they are used: on singleton groups each is a
    # vector of the features' length)
    nw = ext_norms(w, ext, n_ext)
    live = nw > 0
    coef = np.zeros(n_ext)
    np.divide(lam_rho, nw, out=coef, where=live)
    del nw
    if w.ndim == 1:  # for live groups: g_j + lam rho_j w_j / ||w_j||; else g_j
        d = coef[ext]
        d *= w
    else:
        d = coef[ext][:, None] * w
    del coef
    d += g
    if np.any(positive):
        held = ~(w > 0)
        if np.ndim(positive):  # a mask of the constrained features
            held &= positive if w.ndim == 1 else positive[:, None]
        np.copyto(d, np.minimum(d, 0.0), where=held)
        del held
    nd = ext_norms(d, ext, n_ext)
    del d
    viol = nd - lam_rho
    np.maximum(viol, 0.0, out=viol)
    np.copyto(viol, nd, where=live)
    return viol, live


def kkt_violation(w, g, ext, lam_rho, n_ext, positive=False):
    """Largest distance of ``-g`` to the subdifferential of the penalty, over groups."""
    viol, _ = group_violations(w, g, ext, lam_rho, n_ext, positive)
    return float(viol.max()) if viol.size else 0.0


def kkt_scale(c, ext, n_ext):
    """KKT scale: largest group norm of ``c = -grad(0)`` (1 if it is zero)."""
    scale = 0.0
    if c.size:
        scale = float(ext_norms(c, ext, n_ext).max())
    return scale if scale > 0 else 1.0


def kkt_setup(c, ext, rho_ext, lam, tol):
    """``(n_ext, lam_rho, scale, abs_tol)``: the number of groups, ``lam rho_j``, the KKT
    scale of ``c = -grad(0)`` and the absolute tolerance ``tol * scale``."""
    n_ext = rho_ext.shape[0]
    scale = kkt_scale(c, ext, n_ext)
    return n_ext, lam * rho_ext, scale, tol * scale


class GroupNorm:
    """``lam sum_j rho_j ||W_j||``: the (weighted) group lasso, ``D = 2``.

    Parameters
    ----------
    labels : ndarray of int of shape (n_rows,)
        Each row's group, ``-1`` for unpenalized rows (free features, intercept rows).
    rho : ndarray of shape (n_groups,)
        Non-negative group weights (``0``: the group is unpenalized).
    lam : float
        The penalty's strength (``>= 0``).
    positive : bool or ndarray of bool of shape (n_rows,), default=False
        Which rows are constrained to ``>= 0``: all of them (True), none (False, the
        default: the plain penalty), or a mask (one that leaves an intercept row free).
    """

    D = 2
    convex = True

    def __init__(self, labels, rho, lam, positive=False):
        self.labels = np.asarray(labels, dtype=np.intp)
        self.rho = np.asarray(rho, dtype=np.float64).reshape(-1)
        n_groups = count_groups(self.labels)
        if self.rho.shape != (n_groups,) or np.any(self.rho < 0):
            raise ValueError(f"rho must be {n_groups} non-negative weights, got {self.rho}.")
        if not (np.isfinite(lam) and lam >= 0):
            raise ValueError(f"lam must be a finite number >= 0, got {lam!r}.")
        self.lam = float(lam)
        self.positive = positive

    # the stopping rule's arrays, made on first use (a fast solver given the penalty
    # reads only labels, rho, lam, positive and D: no vectors made for nothing)
    @functools.cached_property
    def group(self):
        return np.where(self.labels >= 0, self.labels, -1)

    @functools.cached_property
    def _extended(self):
        ext, rho_ext = extended_groups(self.labels, self.rho)
        return ext, self.lam * rho_ext

    @property
    def ext(self):
        """Each row's stopping-rule group (unpenalized rows alone, weight 0)."""
        return self._extended[0]

    @property
    def lam_rho(self):
        """``lam rho_j`` of the stopping-rule groups."""
        return self._extended[1]

    @property
    def n_ext(self):
        return self.lam_rho.size

    def norms(self, W):
        return norms_by_label(W, self.group, self.rho.size)

    def value(self, W):
        return self.lam * penalty_value(self.norms(W), self.rho, self.D)

    def _feasible(self, Z):
        if not np.any(self.positive):
            return Z
        mask = np.broadcast_to(np.reshape(self.positive, (-1, 1)), Z.shape)
        return np.where(mask, np.maximum(Z, 0.0), Z)

    def _shrunk_norms(self, a, c):
        """The prox's group norms: ``argmin_r (r - a)^2 / 2 + c r`` over ``r >= 0``."""
        return np.maximum(a - c, 0.0)

    def prox(self, Z, step):
        """``argmin_V ||V - Z||^2 / 2 + step pen(V)`` (over ``V >= 0`` with
        ``positive``): the projection, then each group's norm shrunk
        (:meth:`_shrunk_norms`) along its direction; unpenalized rows unchanged."""
        Z = self._feasible(np.asarray(Z, dtype=np.float64))
        a = norms_by_label(Z, self.ext, self.n_ext)
        c = step * self.lam_rho
        r = self._shrunk_norms(a, c)
        factor = np.ones_like(a)
        np.divide(r, a, out=factor, where=(a > 0) & (c > 0))
        factor[(a == 0) & (c > 0)] = 0.0
        per_row = factor[self.ext]
        return Z * (per_row if Z.ndim == 1 else per_row[:, None])

    def violations(self, W, G):
        """Distance of ``-G`` to the subdifferential, per group (``_extended`` groups:
        the unpenalized rows count as groups of weight 0)."""
        return group_violations(W, G, self.ext, self.lam_rho, self.n_ext, self.positive)[0]

    def kkt_scale(self, G0):
        """The unit of relative violations: the largest penalized group norm of the
        gradient at zero (``1`` if there is none or it is zero)."""
        norms = self.norms(G0)
        scale = float(norms[self.rho > 0].max(initial=0.0))
        return scale if scale > 0 else 1.0


class GatedGroupNorm(GroupNorm):
    r"""``lam sum_j rho_j ||W_j||^(2/D)``, ``D >= 2``: the penalty D-Gating induces.

    Its variational form: with ``W_j = omega_j gamma_{j,1} ... gamma_{j,D-1}``,
    ``min lam / D (||omega_j||^2 + sum_d gamma_{j,d}^2) = lam ||W_j||^(2/D)``, reached at
    the balanced factors (:meth:`variational`). Non-convex for ``D > 2``: its
    subdifferential at a zero group is the whole space (a zero group is always
    stationary), and its proximal operator (:meth:`prox`) picks per group the better of
    zero and the largest root of a scalar equation.

    Parameters
    ----------
    labels, rho, lam, positive
        As :class:`GroupNorm`.
    D : int, default=3
        The depth of the factorization (``2``: :class:`GroupNorm`'s penalty).
    """

    def __init__(self, labels, rho, lam, D=3, positive=False):
        super().__init__(labels, rho, lam, positive)
        if int(D) != D or D < 2:
            raise ValueError(f"D must be an integer >= 2, got {D!r}.")
        self.D = int(D)
        self.convex = self.D == 2

    def variational(self, W):
        """``(omega, gates, smooth)``: the balanced factors of ``W`` (``gates`` of shape
        ``(D - 1, n_groups)``, each ``||W_j||^(1/D)``; ``omega_j = W_j / prod gates``)
        and their smooth penalty ``lam / D sum_j rho_j (||omega_j||^2 + ||gamma_j||^2)``
        (equal to :meth:`value`)."""
        norms = self.norms(W)
        gate = norms ** (1.0 / self.D)
        gates = np.tile(gate, (self.D - 1, 1))
        scale = np.zeros_like(norms)
        np.divide(1.0, gate ** (self.D - 1), out=scale, where=gate > 0)
        per_row = np.where(self.group >= 0, scale[np.maximum(self.group, 0)], 1.0)
        omega = W * (per_row if W.ndim == 1 else per_row[:, None])
        omega_sq = norms_by_label(omega, self.group, self.rho.size) ** 2
        smooth = self.lam / self.D * float(self.rho @ (omega_sq + (gates**2).sum(axis=0)))
        return omega, gates, smooth

    def _shrunk_norms(self, a, c):
        """``argmin_r phi(r) = (r - a)^2 / 2 + c r^q`` over ``r >= 0``, ``q = 2 / D``.

        For ``q < 1``, ``phi'`` is convex and increasing beyond its minimum at ``r_0``
        (``r_0^(2 - q) = c q (1 - q)``); a nonzero minimizer is the root of ``phi'``
        in ``(r_0, a]``, which Newton's method from ``a`` reaches monotonically. It is
        kept when ``phi`` there is below ``phi(0) = a^2 / 2`` (a tie goes to zero)."""
        q = 2.0 / self.D
        if q == 1.0:
            return super()._shrunk_norms(a, c)
        out = np.zeros_like(a)
        pen = c > 0
        out[~pen] = a[~pen]
        a, c = a[pen], c[pen]
        r0 = (c * q * (1.0 - q)) ** (1.0 / (2.0 - q))
        slope0 = r0 - a + c * q * r0 ** (q - 1.0)
        root = (a > 0) & (slope0 < 0)
        r = a.copy()
        for _ in range(_PROX_NEWTON_STEPS):
            rr = r[root]
            d1 = rr - a[root] + c[root] * q * rr ** (q - 1.0)
            d2 = 1.0 + c[root] * q * (q - 1.0) * rr ** (q - 2.0)
            r[root] = np.maximum(rr - d1 / d2, r0[root])
        keep = root & (0.5 * (r - a) ** 2 + c * r**q < 0.5 * a**2)
        out[pen] = np.where(keep, r, 0.0)
        return out

    def violations(self, W, G):
        """Distance of ``-G`` to the (limiting) subdifferential, per group: live groups
        ``||G_j + lam rho_j q ||W_j||^(q - 2) W_j||`` (``q = 2 / D``; under ``positive``
        a coordinate at zero counts only ``min(., 0)``); zero groups ``0`` for ``D > 2``
        (the subdifferential of ``||w||^q`` at zero is the whole space)."""
        if self.D == 2:
            return super().violations(W, G)
        q = 2.0 / self.D
        nw = norms_by_label(W, self.ext, self.n_ext)
        live = nw > 0
        coef = np.zeros(self.n_ext)
        coef[live] = self.lam_rho[live] * q * nw[live] ** (q - 2.0)
        viol, _ = group_violations(W, G, self.ext, coef * nw, self.n_ext, self.positive)
        free = self.lam_rho == 0
        return np.where(live | free, viol, 0.0)
