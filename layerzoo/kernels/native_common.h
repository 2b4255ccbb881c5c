// What every family's compiled CPU kernel needs: BLAS gemm on row-major matrices, strided reads
// of (B, T, H, D) inputs, argument checks. Each family's own header includes this one; its hash
// goes into every extension's name (native_build.extension_name), so a change here rebuilds all.
//
// Row-major throughout: a matrix is (pointer, rows, columns, row stride).

#pragma once

#include <ATen/ATen.h>

#include <type_traits>

// BLAS's Fortran gemm, which libtorch_cpu exports from the BLAS it is built with (MKL on x86).
extern "C" {
void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc);
void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b, const int *ldb,
            const double *beta, double *c, const int *ldc);
}

namespace layerzoo_native {

// t has `sizes`, like's dtype and lives on the CPU, else a Python ValueError naming the argument.
inline void check_tensor(const char *op, const char *name, const at::Tensor &t, at::IntArrayRef sizes,
                         const at::Tensor &like) {
  TORCH_CHECK_VALUE(t.sizes() == sizes, op, ": ", name, " must have shape ", sizes, ", got ", t.sizes());
  TORCH_CHECK_VALUE(t.scalar_type() == like.scalar_type(), op, ": ", name, " must be ", like.scalar_type(), " like q, got ",
                    t.scalar_type());
  TORCH_CHECK_VALUE(t.device().is_cpu(), op, ": ", name, " must be on the CPU, got ", t.device());
}

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

// A (tokens, features) slice of a (B, T, H, D) tensor for one head, or a (tokens,) one of a
// (B, T, H) tensor: any strides, so views (a convolution's channel-major output) are read as they
// are: copying such a view to a contiguous tensor first costs more than half the forward. E is
// the element type, const for inputs.
template <typename E>
struct Strided {
  E *data;
  int64_t token_stride, feature_stride;

  Strided from(int64_t token) const { return {data + token * token_stride, token_stride, feature_stride}; }
  E &at(int64_t token, int64_t feature = 0) const { return data[token * token_stride + feature * feature_stride]; }

  // Rows [0, c) into a contiguous (c, width) buffer, or from one: walking memory in order,
  // whichever of the two strides is the unit one.
  template <typename T>
  void load(int c, int width, T *buffer) const {
    walk(c, width, [&](int i, int d) { buffer[i * width + d] = at(i, d); });
  }
  template <typename T>
  void store(int c, int width, const T *buffer) const {
    walk(c, width, [&](int i, int d) { at(i, d) = buffer[i * width + d]; });
  }

 private:
  template <typename F>
  void walk(int c, int width, F &&f) const {
    if (feature_stride <= token_stride) {
      for (int i = 0; i < c; ++i)
        for (int d = 0; d < width; ++d) f(i, d);
    } else {
      for (int d = 0; d < width; ++d)
        for (int i = 0; i < c; ++i) f(i, d);
    }
  }
};

// One head's slice of a (B, T, H, D) tensor (or, with a feature stride of 0, of a (B, T, H) one);
// E is const T to read it, T to write it.
template <typename E>
Strided<E> head_slice(const at::Tensor &t, int64_t b, int64_t h) {
  E *data = t.data_ptr<std::remove_const_t<E>>() + b * t.stride(0) + h * t.stride(2);
  return {data, t.stride(1), t.dim() == 4 ? t.stride(3) : 0};
}

}  // namespace layerzoo_native
