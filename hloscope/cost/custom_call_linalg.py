"""Dense linear algebra library calls: LAPACK (CPU), cuSOLVER / hipSOLVER (GPU) and XLA's own GPU solver calls.

Targets (typed-FFI names jaxlib registers; ``jax/_src/lax/linalg.py`` picks them):

- CPU: ``lapack_<t><routine>_ffi`` with ``t`` in ``s d c z`` (``jaxlib/cpu/cpu_kernels.cc``), e.g.
  ``lapack_spotrf_ffi``, ``lapack_sgetrf_ffi``, ``lapack_sgeqrf_ffi``, ``lapack_ssyevd_ffi``,
  ``lapack_sgesdd_ffi``, ``lapack_strsm_ffi``;
- GPU: ``cusolver_<routine>_ffi`` / ``hipsolver_<routine>_ffi`` (element type from the operand), e.g.
  ``cusolver_getrf_ffi``, ``cusolver_potrf_ffi``, ``cusolver_syevd_ffi``, ``cusolver_gesvdj_ffi``;
- XLA GPU: ``__cusolver$cholesky`` (potrf; ``xla/service/gpu/ir_emission_utils.cc``) and
  ``__cublas$triangularSolve`` (trsm; ``xla/service/gpu/cublas_cudnn.cc``).

Routines: getrf (LU), potrf (Cholesky), geqrf and geqp3 (QR, geqp3 counted as geqrf), orgqr/ungqr (form Q),
ormqr/unmqr (apply Q), trsm (triangular solve), syrk, sytrd/hetrd (tridiagonal reduction), gehrd (Hessenberg
reduction), syevd/heevd (symmetric eigen), gesdd/gesvd/gesvdj/gesvdp (SVD), geev (eigen), gees (Schur).
Other routines (and the pre-FFI targets, whose first operands are scalar sizes) stay unknown.

**FLOPs** (per matrix, times the batch = product of the matrix operand's leading dims):

- getrf, potrf, geqrf, orgqr, ormqr, gehrd, sytrd, trsm, syrk: the operation counts of LAPACK Working Note 41
  (Blackford & Dongarra, *Installation Guide for LAPACK*, appendix "Floating point operation counts"), in the
  form LAPACK++ and MAGMA publish them (``include/lapack/flops.hh``: ``fmuls_*``/``fadds_*``; ``blas/flops.hh``
  for trsm = trmm and syrk), lower-order terms included. Real: ``mults + adds``; complex: ``6 mults + 2 adds``
  (a complex multiply is 6 real FLOPs, an add 2; LAWN 41 / LAPACK++ ``Gflop<complex>``). Leading terms for an
  ``n x n`` matrix: getrf ``2n^3/3``, potrf ``n^3/3``, geqrf ``4n^3/3`` (``2mn^2 - 2n^3/3`` for ``m >= n``),
  gehrd ``10n^3/3``, sytrd ``4n^3/3``; trsm ``m^2 n`` (left side).
- syevd/heevd, gesdd/gesvd/gesvdj/gesvdp, geev, gees (LAWN 41 has no count for the drivers): the work tables
  of Golub & Van Loan, *Matrix Computations* (3rd ed.): symmetric QR algorithm (§8.3) ``4n^3/3`` for
  eigenvalues only, ``9n^3`` with eigenvectors; Golub-Kahan / R-SVD (§5.4.5; ``m >= n``, the cheaper of the two
  as LAPACK switches to QR first for tall matrices): values only ``min(4mn^2 - 4n^3/3, 2mn^2 + 2n^3)``, thin
  U and V ``min(14mn^2 + 8n^3, 6mn^2 + 20n^3)``, full U and V ``min(4m^2n + 8mn^2 + 9n^3, 4m^2n + 22n^3)``;
  Hessenberg QR (§7.5.6) ``10n^3`` for eigenvalues only, ``25n^3`` with Schur vectors or eigenvectors.
  Complex: 4x (about as many multiplies as adds, ``(6 + 2) / 2``). Divide-and-conquer (syevd, gesdd), Jacobi
  (gesvdj) and polar (gesvdp) variants do different amounts of work in their iterative phase; the counts
  above are the textbook ones.

All are flagged ``estimated-flops``: they are operation counts of the algorithm, not of the library's code.

**Bytes**: operands read plus results written (results include the factor written over the input, pivots,
``info``); the factorizations run in place and re-read panels from cache, so this is the HBM lower bound.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from hloscope._regex import LazyPattern
from hloscope.cost._bytes import boundary
from hloscope.cost.custom_call_common import without_workspace

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext, OpCost
    from hloscope.hlo import HloInstruction

ESTIMATED_FLAG = "estimated-flops"
_FFI_TARGET = LazyPattern(r"(?:lapack_[sdcz]|(?:cu|hip)solver_)([a-z0-9]+)_ffi")
#: XLA's own GPU library calls, by target.
XLA_SOLVER_TARGETS = {"__cusolver$cholesky": "potrf", "__cublas$triangularSolve": "trsm"}
_COMPLEX = frozenset({"c64", "c128"})
#: Routine aliases: complex names and variants counted alike.
_ALIASES = {"ungqr": "orgqr", "unmqr": "ormqr", "hetrd": "sytrd", "heevd": "syevd", "syevj": "syevd",
            "geqp3": "geqrf", "gesvd": "gesdd", "gesvdj": "gesdd", "gesvdp": "gesdd"}
#: LAPACK character arguments as jaxlib passes them (``ord(c)`` in a ``ui8`` attribute).
_V, _N, _A, _S, _O, _L, _R = (ord(c) for c in "VNASOLR")


def routine(target: str) -> str | None:
    """The LAPACK routine a linear-algebra target runs (``lapack_spotrf_ffi`` -> ``potrf``), or None."""
    if target in XLA_SOLVER_TARGETS:
        return XLA_SOLVER_TARGETS[target]
    match = _FFI_TARGET.fullmatch(target)
    if match is None:
        return None
    name = match.group(1)
    name = _ALIASES.get(name, name)
    return name if name in _COUNTS else None


# ---------------------------------------------------------------------------------------------------------
# LAWN 41 operation counts: (multiplies, adds) for one matrix
# ---------------------------------------------------------------------------------------------------------


def getrf_ops(m: float, n: float) -> tuple[float, float]:
    """LU with partial pivoting of an ``m x n`` matrix (LAWN 41; LAPACK++ ``fmuls_getrf``/``fadds_getrf``)."""
    if m < n:
        m, n = n, m
    return (0.5 * m * n * n - n ** 3 / 6 + 0.5 * m * n - 0.5 * n * n + 2 / 3 * n,
            0.5 * m * n * n - n ** 3 / 6 - 0.5 * m * n + n / 6)


def potrf_ops(n: float) -> tuple[float, float]:
    """Cholesky of an ``n x n`` matrix (LAWN 41)."""
    return n ** 3 / 6 + 0.5 * n * n + n / 3, n ** 3 / 6 - n / 6


def geqrf_ops(m: float, n: float) -> tuple[float, float]:
    """Householder QR of an ``m x n`` matrix (LAWN 41)."""
    if m > n:
        return (m * n * n - n ** 3 / 3 + m * n + 0.5 * n * n + 23 / 6 * n,
                m * n * n - n ** 3 / 3 + 0.5 * n * n + 5 / 6 * n)
    return (n * m * m - m ** 3 / 3 + 2 * n * m - 0.5 * m * m + 23 / 6 * m,
            n * m * m - m ** 3 / 3 + n * m - 0.5 * m * m + 5 / 6 * m)


def orgqr_ops(m: float, n: float, k: float) -> tuple[float, float]:
    """Forming the ``m x n`` Q of ``k`` Householder reflectors (LAWN 41 ORGQR/UNGQR)."""
    return (2 * m * n * k - (m + n) * k * k + 2 / 3 * k ** 3 + 2 * n * k - k * k - 5 / 3 * k,
            2 * m * n * k - (m + n) * k * k + 2 / 3 * k ** 3 + n * k - m * k + k / 3)


def ormqr_ops(left: bool, m: float, n: float, k: float) -> tuple[float, float]:
    """Applying Q of ``k`` reflectors to an ``m x n`` matrix, from the left or the right (LAWN 41 ORMQR)."""
    if left:
        return 2 * n * m * k - n * k * k + 2 * n * k, 2 * n * m * k - n * k * k + n * k
    return (2 * n * m * k - m * k * k + m * k + n * k - 0.5 * k * k + 0.5 * k,
            2 * n * m * k - m * k * k + m * k)


def gehrd_ops(n: float) -> tuple[float, float]:
    """Hessenberg reduction of an ``n x n`` matrix (LAWN 41)."""
    return 5 / 3 * n ** 3 + 0.5 * n * n - 7 / 6 * n, 5 / 3 * n ** 3 - n * n - 2 / 3 * n


def sytrd_ops(n: float) -> tuple[float, float]:
    """Tridiagonal reduction of a symmetric/Hermitian ``n x n`` matrix (LAWN 41)."""
    return 2 / 3 * n ** 3 + 2.5 * n * n - n / 6, 2 / 3 * n ** 3 + n * n - 8 / 3 * n


def trsm_ops(left: bool, m: float, n: float) -> tuple[float, float]:
    """Triangular solve with an ``m x n`` right-hand side (LAWN 41 TRSM = TRMM): the triangle is ``m x m``
    from the left, ``n x n`` from the right."""
    if left:
        return 0.5 * n * m * (m + 1), 0.5 * n * m * (m - 1)
    return 0.5 * m * n * (n + 1), 0.5 * m * n * (n - 1)


def syrk_ops(n: float, k: float) -> tuple[float, float]:
    """``C = A A^T`` with ``A`` ``n x k``, one triangle (LAWN 41 SYRK)."""
    return 0.5 * k * n * (n + 1), 0.5 * k * n * (n + 1)


def lawn41_flops(ops: tuple[float, float], is_complex: bool) -> float:
    """Real: mults + adds; complex: 6 mults + 2 adds (LAWN 41)."""
    mults, adds = ops
    return 6 * mults + 2 * adds if is_complex else mults + adds


# ---------------------------------------------------------------------------------------------------------
# Golub & Van Loan counts (real FLOPs, leading order) for the eigen/SVD drivers
# ---------------------------------------------------------------------------------------------------------


def syevd_flops(n: float, vectors: bool) -> float:
    """Symmetric eigendecomposition: ``9n^3`` with eigenvectors, ``4n^3/3`` without (GVL §8.3)."""
    return 9 * n ** 3 if vectors else 4 / 3 * n ** 3


def svd_flops(m: float, n: float, vectors: str) -> float:
    """SVD of an ``m x n`` matrix, ``vectors`` ``"none"``, ``"thin"`` or ``"full"``: the cheaper of
    Golub-Kahan and R-SVD (GVL §5.4.5), with ``m >= n`` (a wide matrix is counted as its transpose)."""
    if m < n:
        m, n = n, m
    if vectors == "none":
        return min(4 * m * n * n - 4 / 3 * n ** 3, 2 * m * n * n + 2 * n ** 3)
    if vectors == "thin":
        return min(14 * m * n * n + 8 * n ** 3, 6 * m * n * n + 20 * n ** 3)
    return min(4 * m * m * n + 8 * m * n * n + 9 * n ** 3, 4 * m * m * n + 22 * n ** 3)


def hessenberg_qr_flops(n: float, vectors: bool) -> float:
    """Nonsymmetric eigenvalues (geev) or Schur form (gees): ``10n^3``, ``25n^3`` with vectors (GVL §7.5.6)."""
    return 25 * n ** 3 if vectors else 10 * n ** 3


# ---------------------------------------------------------------------------------------------------------
# Attributes
# ---------------------------------------------------------------------------------------------------------


def _flag(cfg: dict[str, Any], key: str, true_chars: tuple[int, ...], default: bool) -> bool:
    """A yes/no attribute: a bool (GPU FFI) or a LAPACK character code (CPU FFI: ``ord('V')``...)."""
    value = cfg.get(key)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value in true_chars
    return default


def _svd_vectors(cfg: dict[str, Any]) -> str:
    mode = cfg.get("mode")
    if isinstance(mode, int) and not isinstance(mode, bool):  # CPU gesdd/gesvd ``jobz``
        return {_N: "none", _A: "full"}.get(mode, "thin")
    if not _flag(cfg, "compute_uv", (), True):
        return "none"
    return "full" if _flag(cfg, "full_matrices", (), True) else "thin"


# ---------------------------------------------------------------------------------------------------------
# The rule
# ---------------------------------------------------------------------------------------------------------


def _per_matrix(name: str, inst: HloInstruction, ctx: CostContext, cfg: dict[str, Any],
                is_complex: bool) -> float | None:
    a = ctx.operand_shape(inst, 0)
    if len(a.dims) < 2:
        return None
    m, n = a.dims[-2], a.dims[-1]
    gvl = 4 if is_complex else 1
    if name == "getrf":
        return lawn41_flops(getrf_ops(m, n), is_complex)
    if name == "potrf":
        return lawn41_flops(potrf_ops(n), is_complex)
    if name == "geqrf":
        return lawn41_flops(geqrf_ops(m, n), is_complex)
    if name == "orgqr":
        taus = ctx.operand_shape(inst, 1)
        k = taus.dims[-1] if taus.dims else min(m, n)
        return lawn41_flops(orgqr_ops(m, n, k), is_complex)
    if name == "ormqr":
        taus, c = ctx.operand_shape(inst, 1), ctx.operand_shape(inst, 2)
        if len(c.dims) < 2:
            return None
        k = taus.dims[-1] if taus.dims else min(m, n)
        return lawn41_flops(ormqr_ops(_flag(cfg, "left", (_L,), True), c.dims[-2], c.dims[-1], k), is_complex)
    if name == "trsm":
        b = ctx.operand_shape(inst, 1)
        if len(b.dims) < 2:
            return None
        if "side" in cfg or "left_side" in cfg:
            left = _flag(cfg, "side", (_L,), True) if "side" in cfg else _flag(cfg, "left_side", (), True)
        else:
            left = n == b.dims[-2]
        return lawn41_flops(trsm_ops(left, b.dims[-2], b.dims[-1]), is_complex)
    if name == "syrk":
        transposed = _flag(cfg, "transpose", (), False)
        return lawn41_flops(syrk_ops(n if transposed else m, m if transposed else n), is_complex)
    if name == "gehrd":
        low, high = cfg.get("low"), cfg.get("high")
        span = high - low + 1 if isinstance(low, int) and isinstance(high, int) and 0 < low <= high <= n else n
        return lawn41_flops(gehrd_ops(span), is_complex)
    if name == "sytrd":
        return lawn41_flops(sytrd_ops(n), is_complex)
    if name == "syevd":
        return gvl * syevd_flops(n, _flag(cfg, "mode", (_V,), True))
    if name == "gesdd":
        return gvl * svd_flops(m, n, _svd_vectors(cfg))
    if name == "geev":
        vectors = _flag(cfg, "compute_left", (_V,), False) or _flag(cfg, "compute_right", (_V,), False) \
            or _flag(cfg, "left", (), False) or _flag(cfg, "right", (), False)
        return gvl * hessenberg_qr_flops(n, vectors)
    if name == "gees":
        return gvl * hessenberg_qr_flops(n, _flag(cfg, "mode", (_V,), True))
    return None


_COUNTS = frozenset({"getrf", "potrf", "geqrf", "orgqr", "ormqr", "trsm", "syrk", "gehrd", "sytrd", "syevd",
                     "gesdd", "geev", "gees"})


def linalg(inst: HloInstruction, ctx: CostContext, target: str, cfg: dict[str, Any]) -> OpCost | None:
    """The module docstring's count for a linear-algebra call, or None when ``target`` is not one or its
    operands do not fit the routine."""
    name = routine(target)
    if name is None or not inst.operands:
        return None
    a = ctx.operand_shape(inst, 0)
    if not a.is_array or len(a.dims) < 2:
        return None
    is_complex = a.element_type in _COMPLEX
    try:
        per_matrix = _per_matrix(name, inst, ctx, cfg, is_complex)
    except IndexError:  # an operand the routine needs is missing
        return None
    if per_matrix is None:
        return None
    batch = math.prod(a.dims[:-2])
    flops = float(round(max(per_matrix, 0.0))) * batch  # (the counts are whole numbers; float error aside)
    return without_workspace(inst, boundary(inst, ctx, flops=flops, flags=frozenset({ESTIMATED_FLAG})))
