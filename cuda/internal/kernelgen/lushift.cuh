// gs_lu_shift, written after the prelude by the sources that use it
// (Source.helper), so that the others stay as they were.
// gs_lu_shift sets f[0:D*D] to W = I + s·(live ≠ 0 ? M : 0) for the D×D
// row-major matrix m (which may be f itself), each entry rounded as
// (s·m) + 1 on the diagonal (ops.OpLUFactorShift; gs_lu_factor then
// factors it). A loop, however large D: the matrix is data, not code.
template <int D>
GS_DEVICE void gs_lu_shift(gs_real* f, const gs_real* m, gs_real s, gs_real live) {
#ifdef GS_LU_ROLLED
#pragma unroll 1
#endif
  for (int c = 0; c < D * D; c++) {
    gs_real x = live != 0 ? m[c] : (gs_real)0;
    gs_real w = s * x;
    f[c] = c / D == c % D ? w + (gs_real)1 : w;
  }
}

