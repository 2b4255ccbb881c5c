// BLAS gemm on row-major matrices, for the compiled CPU kernels of every family.
//
// Row-major throughout: a matrix is (pointer, rows, columns, row stride).

#pragma once

// BLAS's Fortran gemm, which libtorch_cpu exports from the BLAS it is built with (MKL on x86).
extern "C" {
void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc);
void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b, const int *ldb,
            const double *beta, double *c, const int *ldc);
}

namespace layerzoo_cpu {

inline void blas_gemm(const char *ta, const char *tb, const int *m, const int *n, const int *k, const float *alpha,
                      const float *a, const int *lda, const float *b, const int *ldb, const float *beta, float *c,
                      const int *ldc) {
  sgemm_(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

inline void blas_gemm(const char *ta, const char *tb, const int *m, const int *n, const int *k, const double *alpha,
                      const double *a, const int *lda, const double *b, const int *ldb, const double *beta,
                      double *c, const int *ldc) {
  dgemm_(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Row-major c (m, n) = alpha * op(a) (m, k) @ op(b) (k, n) + beta * c, where op transposes when asked.
// BLAS is column-major, where a row-major matrix reads as its transpose: so it computes
// c^T = op(b)^T op(a)^T, with the operands swapped.
template <typename T>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha, const T *a, int lda, const T *b,
          int ldb, T beta, T *c, int ldc) {
  const char ta = transpose_a ? 'T' : 'N', tb = transpose_b ? 'T' : 'N';
  blas_gemm(&tb, &ta, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
}

}  // namespace layerzoo_cpu
