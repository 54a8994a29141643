"""Linear-algebra library calls (``hloscope/cost/custom_call_linalg.py``): LAPACK on CPU from real JAX
compilations, cuSOLVER / XLA GPU solver calls from hand-made HLO in the same typed-FFI syntax.

Independent sources: the LAPACK Working Note 41 operation counts are re-derived here by counting the
operations of the textbook algorithms they describe (Cholesky, LU as LAPACK's ``xGETF2`` does it, triangular
solve, Householder QR); the Golub & Van Loan driver counts are written out by hand.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402

from hloscope.cost import OpCost, module_cost  # noqa: E402
from hloscope.cost.custom_call_linalg import (  # noqa: E402
    geqrf_ops, getrf_ops, potrf_ops, routine, trsm_ops)
from hloscope.parsers import parse_hlo_text  # noqa: E402

OPAQUE = "opaque-custom-call"
EST = "estimated-flops"


def calls(text: str) -> dict[str, OpCost]:
    """target -> cost of the module's custom calls (the last one per target)."""
    mc = module_cost(parse_hlo_text(text))
    return {r.instruction.attributes["custom_call_target"]: r.cost for r in mc.rows
            if r.instruction.opcode == "custom-call"}


def compiled_calls(f, *args) -> dict[str, OpCost]:
    import jax

    return calls(jax.jit(f).lower(*args).compile().as_text())


# ---------------------------------------------------------------------------------------------------------
# LAWN 41 against counted algorithms
# ---------------------------------------------------------------------------------------------------------


def counted_cholesky(n: int) -> tuple[int, int]:
    """(mults, adds) of ``L L^T = A`` column by column: ``l_jj = sqrt(a_jj - sum_k l_jk^2)`` (the square root
    counted as a multiply, as LAWN 41 does), ``l_ij = (a_ij - sum_k l_ik l_jk) / l_jj``."""
    mults = adds = 0
    for j in range(n):
        mults += j + 1
        adds += j
        mults += (n - 1 - j) * (j + 1)
        adds += (n - 1 - j) * j
    return mults, adds


def counted_getf2(m: int, n: int) -> tuple[int, int]:
    """(mults, adds) of LAPACK's unblocked LU ``xGETF2``: per column, one reciprocal of the pivot, the column
    scaled by it, a rank-1 update of the trailing block (pivot search and swaps are no arithmetic)."""
    mults = adds = 0
    for k in range(min(m, n)):
        if k < m - 1 or m == n:
            mults += 1
        mults += (m - k - 1) * (1 + (n - k - 1))
        adds += (m - k - 1) * (n - k - 1)
    return mults, adds


def counted_trsm_left(m: int, n: int) -> tuple[int, int]:
    """(mults, adds) of forward substitution ``L X = B``, ``L`` ``m x m``, ``n`` right-hand sides."""
    return n * sum(i + 1 for i in range(m)), n * sum(i for i in range(m))


def counted_householder_qr(m: int, n: int) -> tuple[int, int]:
    """Leading (mults, adds) of Householder QR: column ``k``'s reflector (length ``m - k``) applied to the
    ``n - k - 1`` columns right of it, ``w = v^T A`` then ``A -= v (tau w)^T``: one multiply and one add per
    element of that block for each of the two."""
    mults = adds = 0
    for k in range(min(m, n)):
        rows, cols = m - k, n - k - 1
        mults += 2 * rows * cols
        adds += 2 * rows * cols
    return mults, adds


@pytest.mark.parametrize("n", [1, 2, 3, 4, 17, 64])
def test_potrf_count_is_the_counted_cholesky(n):
    assert potrf_ops(n) == pytest.approx(counted_cholesky(n), abs=1e-9)


@pytest.mark.parametrize("m,n", [(2, 2), (3, 3), (4, 2), (9, 9), (64, 64), (96, 64)])
def test_getrf_count_is_the_counted_getf2(m, n):
    assert getrf_ops(m, n) == pytest.approx(counted_getf2(m, n), abs=1e-9)


@pytest.mark.parametrize("m,n", [(1, 1), (5, 3), (64, 8)])
def test_trsm_count_is_the_counted_substitution(m, n):
    assert trsm_ops(True, m, n) == pytest.approx(counted_trsm_left(m, n))
    assert trsm_ops(False, n, m) == pytest.approx(counted_trsm_left(m, n))  # X L = B from the right


@pytest.mark.parametrize("m,n", [(2000, 2000), (6000, 2000)])
def test_geqrf_count_leads_like_householder_qr(m, n):
    """Equal up to LAWN 41's lower-order terms (norms and reflector scaling, O(mn))."""
    lawn, counted = geqrf_ops(m, n), counted_householder_qr(m, n)
    assert lawn[0] / counted[0] == pytest.approx(1, rel=0.003)
    assert lawn[1] / counted[1] == pytest.approx(1, rel=0.003)


def test_leading_orders_of_the_square_factorizations():
    n = 2000
    assert sum(potrf_ops(n)) / n ** 3 == pytest.approx(1 / 3, rel=1e-3)
    assert sum(getrf_ops(n, n)) / n ** 3 == pytest.approx(2 / 3, rel=1e-3)
    assert sum(geqrf_ops(n, n)) / n ** 3 == pytest.approx(4 / 3, rel=1e-3)


# ---------------------------------------------------------------------------------------------------------
# LAPACK calls of real CPU compilations
# ---------------------------------------------------------------------------------------------------------

B, N, M = 3, 64, 96  # batch, square size, tall rows


def f32(*dims: int) -> int:
    return 4 * math.prod(dims)


def _costed(c: OpCost) -> None:
    assert EST in c.flags and OPAQUE not in c.flags
    assert c.flops > 0


def test_cholesky_lu_and_triangular_solve():
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    a = jnp.ones((B, N, N), jnp.float32)
    c = compiled_calls(jnp.linalg.cholesky, a)["lapack_spotrf_ffi"]
    _costed(c)
    assert c.flops == B * (N ** 3 / 3 + N ** 2 / 2 + N / 6)  # LAWN 41 potrf, mults + adds
    assert c.bytes_read == f32(B, N, N)
    assert c.bytes_written == f32(B, N, N) + 4 * B  # factor + info

    lu = compiled_calls(jsl.lu_factor, a)["lapack_sgetrf_ffi"]
    _costed(lu)
    assert lu.flops == B * (2 * N ** 3 / 3 - N ** 2 / 2 + 5 * N / 6)
    assert lu.bytes_written == f32(B, N, N) + 4 * B * N + 4 * B  # LU, pivots, info

    tri = compiled_calls(lambda x: jsl.solve_triangular(x, x[..., :8], lower=True), a)["lapack_strsm_ffi"]
    _costed(tri)
    assert tri.flops == B * 8 * N * N  # n m^2: m(m+1)/2 mults + m(m-1)/2 adds per right-hand side
    assert tri.bytes_read == f32(B, N, N) + f32(B, N, 8) and tri.bytes_written == f32(B, N, 8)


def test_complex_cholesky_counts_six_per_multiply_two_per_add():
    import jax.numpy as jnp

    c = compiled_calls(jnp.linalg.cholesky, jnp.ones((B, N, N), jnp.complex64))["lapack_cpotrf_ffi"]
    mults, adds = N ** 3 / 6 + N ** 2 / 2 + N / 3, N ** 3 / 6 - N / 6
    assert c.flops == round(B * (6 * mults + 2 * adds))


def test_qr_geqrf_and_orgqr():
    import jax.numpy as jnp

    calls_ = compiled_calls(jnp.linalg.qr, jnp.ones((B, M, N), jnp.float32))
    m, n, k = M, N, N
    geqrf = (m * n * n - n ** 3 / 3 + m * n + n * n / 2 + 23 * n / 6) + (m * n * n - n ** 3 / 3 + n * n / 2 + 5 * n / 6)
    orgqr = (2 * m * n * k - (m + n) * k * k + 2 * k ** 3 / 3 + 2 * n * k - k * k - 5 * k / 3) \
        + (2 * m * n * k - (m + n) * k * k + 2 * k ** 3 / 3 + n * k - m * k + k / 3)
    assert calls_["lapack_sgeqrf_ffi"].flops == B * round(geqrf)
    assert calls_["lapack_sorgqr_ffi"].flops == B * round(orgqr)
    assert calls_["lapack_sgeqrf_ffi"].bytes_written == f32(B, M, N) + f32(B, N)  # factor + taus


def test_symmetric_eigen_and_svd_drivers():
    """Golub & Van Loan: symmetric QR 9n^3 with vectors; SVD the cheaper of Golub-Kahan and R-SVD."""
    import jax.numpy as jnp

    eigh = compiled_calls(jnp.linalg.eigh, jnp.ones((B, N, N), jnp.float32))["lapack_ssyevd_ffi"]
    _costed(eigh)
    assert eigh.flops == B * 9 * N ** 3

    x = jnp.ones((B, M, N), jnp.float32)
    m, n = M, N
    full = compiled_calls(jnp.linalg.svd, x)["lapack_sgesdd_ffi"]
    thin = compiled_calls(lambda y: jnp.linalg.svd(y, full_matrices=False), x)["lapack_sgesdd_ffi"]
    vals = compiled_calls(lambda y: jnp.linalg.svd(y, compute_uv=False), x)["lapack_sgesdd_ffi"]
    assert full.flops == B * min(4 * m * m * n + 8 * m * n * n + 9 * n ** 3, 4 * m * m * n + 22 * n ** 3)
    assert thin.flops == B * min(14 * m * n * n + 8 * n ** 3, 6 * m * n * n + 20 * n ** 3)
    assert vals.flops == B * round(min(4 * m * n * n - 4 * n ** 3 / 3, 2 * m * n * n + 2 * n ** 3))
    # bytes: the input read; A (overwritten), s, U, V^T and info written
    assert full.bytes_read == f32(B, M, N)
    assert full.bytes_written == f32(B, M, N) + f32(B, N) + f32(B, M, M) + f32(B, N, N) + 4 * B


def test_nonsymmetric_eigen_schur_hessenberg_tridiagonal():
    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    a = jnp.ones((B, N, N), jnp.float32)
    assert compiled_calls(jnp.linalg.eig, a)["lapack_sgeev_ffi"].flops == B * 25 * N ** 3  # right vectors
    assert compiled_calls(lambda x: jsl.schur(x[0]), a)["lapack_sgees_ffi"].flops == 25 * N ** 3
    hess = compiled_calls(lambda x: jsl.hessenberg(x[0]), a)["lapack_sgehrd_ffi"]
    assert hess.flops == round((5 / 3 * N ** 3 + N * N / 2 - 7 / 6 * N) + (5 / 3 * N ** 3 - N * N - 2 / 3 * N))
    trd = compiled_calls(jax.lax.linalg.tridiagonal, a)["lapack_ssytrd_ffi"]
    assert trd.flops == B * round((2 / 3 * N ** 3 + 2.5 * N * N - N / 6) + (2 / 3 * N ** 3 + N * N - 8 / 3 * N))


# ---------------------------------------------------------------------------------------------------------
# GPU solver calls (hand-made, in the typed-FFI syntax of the CPU calls above)
# ---------------------------------------------------------------------------------------------------------


def gpu_call(target: str, operands: list[str], result: str, attrs: str) -> str:
    params = "\n".join(f"  p{i} = {s} parameter({i})" for i, s in enumerate(operands))
    args = ", ".join(f"p{i}" for i in range(len(operands)))
    return f"""HloModule gpu_solver
ENTRY e {{
{params}
  ROOT c = {result} custom-call({args}), custom_call_target="{target}", operand_layout_constraints={{{", ".join(operands)}}}, output_to_operand_aliasing={{{{0}}: (0, {{}})}}, api_version=API_VERSION_TYPED_FFI, backend_config={{{attrs}}}
}}"""


A = "f32[8,128,128]{1,2,0}"


@pytest.mark.parametrize("prefix", ["cusolver", "hipsolver"])
def test_gpu_solver_calls_count_like_lapack(prefix):
    n, b = 128, 8
    potrf = calls(gpu_call(f"{prefix}_potrf_ffi", [A], f"({A}, s32[8]{{0}})", "lower = true"))
    assert potrf[f"{prefix}_potrf_ffi"].flops == b * sum(potrf_ops(n))
    getrf = calls(gpu_call(f"{prefix}_getrf_ffi", [A], f"({A}, s32[8,128]{{1,0}}, s32[8]{{0}})", ""))
    assert getrf[f"{prefix}_getrf_ffi"].flops == b * round(sum(getrf_ops(n, n)))
    syevd = calls(gpu_call(f"{prefix}_syevd_ffi", [A], f"({A}, f32[8,128]{{1,0}}, s32[8]{{0}})",
                           "algorithm = 0 : ui8, lower = true"))
    assert syevd[f"{prefix}_syevd_ffi"].flops == b * 9 * n ** 3
    svd_result = f"({A}, f32[8,128]{{1,0}}, {A}, {A}, s32[8]{{0}})"
    thin = calls(gpu_call(f"{prefix}_gesvdj_ffi", [A], svd_result, "compute_uv = true, full_matrices = false"))
    vals = calls(gpu_call(f"{prefix}_gesvd_ffi", [A], svd_result,
                          "compute_uv = false, full_matrices = false, transposed = false"))
    assert thin[f"{prefix}_gesvdj_ffi"].flops == b * min(14 * n ** 3 + 8 * n ** 3, 6 * n ** 3 + 20 * n ** 3)
    assert vals[f"{prefix}_gesvd_ffi"].flops == b * round(min(4 * n ** 3 - 4 * n ** 3 / 3, 4 * n ** 3))
    for got in (potrf, getrf, syevd, thin, vals):
        (c,) = got.values()
        assert EST in c.flags and OPAQUE not in c.flags


def test_xla_gpu_cholesky_and_triangular_solve():
    n, b = 128, 8
    chol = f"""HloModule c
ENTRY e {{
  a = {A} parameter(0)
  ROOT c = ({A}, u8[4096]{{0}}, s32[8]{{0}}) custom-call(a), custom_call_target="__cusolver$cholesky", backend_config={{"lower":true}}
}}"""
    got = calls(chol)["__cusolver$cholesky"]
    assert got.flops == b * sum(potrf_ops(n))
    rhs = "f32[8,16,128]{2,1,0}"
    trsm = f"""HloModule t
ENTRY e {{
  a = {A} parameter(0)
  x = {rhs} parameter(1)
  ROOT c = {rhs} custom-call(a, x), custom_call_target="__cublas$triangularSolve", backend_config={{"left_side":false,"lower":true,"unit_diagonal":false,"transpose_a":"NO_TRANSPOSE"}}
}}"""
    got = calls(trsm)["__cublas$triangularSolve"]
    assert got.flops == b * 16 * n * n  # X A = B from the right: m n^2
    assert got.bytes_read == f32(8, 128, 128) + f32(8, 16, 128) and got.bytes_written == f32(8, 16, 128)


def test_routines_and_unknown_targets():
    assert routine("lapack_zheevd_ffi") == "syevd"
    assert routine("lapack_cungqr_ffi") == "orgqr"
    assert routine("cusolver_gesvdp_ffi") == "gesdd"
    assert routine("lapack_sgtsv_ffi") is None  # tridiagonal solve: no count
    assert routine("lapack_spotrf") is None  # pre-FFI target: sizes as scalar operands
    text = gpu_call("lapack_sgtsv_ffi", [A], A, "")
    (c,) = calls(text).values()
    assert OPAQUE in c.flags and math.isnan(c.flops)


def test_gpu_syrk():
    """``cusolver_syrk_ffi`` (``jax.lax.linalg.symmetric_product``): ``C = A A^T``, A ``n x k``, one triangle:
    ``k n (n + 1) / 2`` multiplies and as many adds (LAWN 41 SYRK)."""
    n, k = 128, 32
    a, c = "f32[128,32]{1,0}", "f32[128,128]{1,0}"
    text = f"""HloModule s
ENTRY e {{
  a = {a} parameter(0)
  c = {c} parameter(1)
  alpha = f32[] parameter(2)
  beta = f32[] parameter(3)
  ROOT r = {c} custom-call(a, c, alpha, beta), custom_call_target="cusolver_syrk_ffi", output_to_operand_aliasing={{{{}}: (1, {{}})}}, api_version=API_VERSION_TYPED_FFI, backend_config={{transpose = false}}
}}"""
    got = calls(text)["cusolver_syrk_ffi"]
    assert got.flops == k * n * (n + 1)
