// What the compiled CPU kernels of the chunkwise linear recurrences (gated_delta_rule/, ssd/, kda/)
// share: BLAS gemm on row-major matrices, strided reads of the (B, T, H, D) inputs, argument
// checks, the in-chunk scalar decays, the inverse of a unit lower triangular matrix and solves with one.
//
// Row-major throughout: a matrix is (pointer, rows, columns, row stride). Each family's extension
// includes this header and hashes it into its cache name (native_build.extension_name).

#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

// BLAS's Fortran gemm, which libtorch_cpu exports from the BLAS it is built with (MKL on x86).
extern "C" {
void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc);
void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b, const int *ldb,
            const double *beta, double *c, const int *ldc);
void strsm_(const char *side, const char *uplo, const char *transa, const char *diag, const int *m, const int *n,
            const float *alpha, const float *a, const int *lda, float *b, const int *ldb);
void dtrsm_(const char *side, const char *uplo, const char *transa, const char *diag, const int *m, const int *n,
            const double *alpha, const double *a, const int *lda, double *b, const int *ldb);
}

namespace layerzoo_native {

// Argument checks of every entry point: any misuse raises a Python ValueError naming the argument,
// before anything is read.
inline void check_tensor(const char *op, const char *name, const at::Tensor &t, at::IntArrayRef sizes,
                         const at::Tensor &like) {
  TORCH_CHECK_VALUE(t.sizes() == sizes, op, ": ", name, " must have shape ", sizes, ", got ", t.sizes());
  TORCH_CHECK_VALUE(t.scalar_type() == like.scalar_type(), op, ": ", name, " must be ", like.scalar_type(), " like q, got ",
                    t.scalar_type());
  TORCH_CHECK_VALUE(t.device().is_cpu(), op, ": ", name, " must be on the CPU, got ", t.device());
}

// q, k (B, T, H, K); v (B, T, H, V); float32 or float64; T >= 1: the checks every family's entry
// points share (each checks its gates with check_tensor after these). BLAS takes int sizes, hence
// the bound on K, V and the chunk.
inline void check_qkv(const char *op, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, int64_t chunk) {
  TORCH_CHECK_VALUE(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble, op,
                    ": inputs must be float32 or float64, got ", q.scalar_type());
  TORCH_CHECK_VALUE(q.dim() == 4 && v.dim() == 4, op, ": q and v must be 4-d (B, T, H, D), got ", q.sizes(), " and ",
                    v.sizes());
  check_tensor(op, "q", q, q.sizes(), q);
  check_tensor(op, "k", k, q.sizes(), q);
  check_tensor(op, "v", v, {q.size(0), q.size(1), q.size(2), v.size(3)}, q);
  TORCH_CHECK_VALUE(q.size(1) >= 1, op, ": needs at least one token, got T = ", q.size(1));
  const int64_t limit = std::numeric_limits<int>::max();
  TORCH_CHECK_VALUE(q.size(3) >= 1 && q.size(3) <= limit && v.size(3) >= 1 && v.size(3) <= limit, op,
                    ": head dims must be in [1, ", limit, "], got K = ", q.size(3), " and V = ", v.size(3));
  TORCH_CHECK_VALUE(chunk >= 1 && chunk <= limit, op, ": chunk must be in [1, ", limit, "], got ", chunk);
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

inline void blas_trsm(const char *side, const char *uplo, const char *ta, const char *diag, const int *m,
                      const int *n, const float *alpha, const float *a, const int *lda, float *b, const int *ldb) {
  strsm_(side, uplo, ta, diag, m, n, alpha, a, lda, b, ldb);
}

inline void blas_trsm(const char *side, const char *uplo, const char *ta, const char *diag, const int *m,
                      const int *n, const double *alpha, const double *a, const int *lda, double *b, const int *ldb) {
  dtrsm_(side, uplo, ta, diag, m, n, alpha, a, lda, b, ldb);
}

// Row-major b (c, n) <- (I + strict_tril(a))^-1 b for a (c, c) with leading dimension lda, whose
// diagonal and upper triangle are not read: a triangular solve, half the work of forming the
// inverse and multiplying by it. Column-major BLAS reads row-major b as b^T and a's lower
// triangle as an upper one, so it solves b^T <- b^T (I + A)^-T from the right.
template <typename T>
void unit_lower_solve(int c, int n, const T *a, int lda, T *b, int ldb) {
  const char side = 'R', uplo = 'U', ta = 'N', diag = 'U';
  const T one = 1;
  blas_trsm(&side, &uplo, &ta, &diag, &n, &c, &one, a, &lda, b, &ldb);
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

// The decays of one chunk of c <= C tokens, from its log decays g: gc, the cumulative sum, in
// double (see chunks.py's decays for why); from_start = exp(gc), to_end = exp(gc_last - gc) and
// L[i, j] = exp(gc_i - gc_j) for j < i.
template <typename T>
struct ChunkDecays {
  explicit ChunkDecays(int chunk) : C(chunk), gc(chunk), from_start(chunk), to_end(chunk), L(chunk * chunk) {}

  void compute(Strided<const T> g, int c) {
    double sum = 0;
    for (int i = 0; i < c; ++i) gc[i] = sum += static_cast<double>(g.at(i));
    for (int i = 0; i < c; ++i) {
      from_start[i] = static_cast<T>(std::exp(gc[i]));
      to_end[i] = static_cast<T>(std::exp(gc[c - 1] - gc[i]));
      for (int j = 0; j < i; ++j) L[i * C + j] = std::exp(static_cast<T>(gc[i] - gc[j]));
    }
  }

  // a (c, c), leading dimension C: a[i, j] *= factor * L[i, j] below the diagonal (and factor on
  // it, with the diagonal), 0 above.
  void mask(T *a, int c, T factor, bool diagonal) const {
    for (int i = 0; i < c; ++i) {
      T *row = a + i * C;
      const T *decay_row = L.data() + i * C;
      for (int j = 0; j < i; ++j) row[j] *= factor * decay_row[j];
      if (diagonal) row[i] *= factor;
      for (int j = diagonal ? i + 1 : i; j < c; ++j) row[j] = 0;
    }
  }

  const int C;
  std::vector<double> gc;
  std::vector<T> from_start, to_end, L;
};

// (I + A)^-1 of the strictly lower part of a (c, c), leading dimension lda, into m (c, c), leading
// dimension ldm, by forward substitution, row i from the rows above: M_i = e_i - sum_{l < i} A_il M_l.
// Unit lower triangular; its upper triangle is written as 0.
template <typename T>
void unit_lower_inverse(const T *a, int lda, int c, T *m, int ldm) {
  for (int i = 0; i < c; ++i) {
    T *row = m + i * ldm;
    std::fill(row, row + c, T(0));
    row[i] = 1;
    for (int l = 0; l < i; ++l) {
      const T coefficient = a[i * lda + l];
      const T *above = m + l * ldm;
      for (int j = 0; j <= l; ++j) row[j] -= coefficient * above[j];
    }
  }
}

// body(runner, b, h) for every head of a batch, heads spread over threads: they are independent,
// so each task runs its heads start to end with a Runner of its own (its scratch), built from
// runner_args.
template <typename Runner, typename Body, typename... Args>
void for_each_head(int64_t batch, int64_t heads, Body &&body, Args... runner_args) {
  at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
    Runner runner(runner_args...);
    for (int64_t bh = begin; bh < end; ++bh) body(runner, bh / heads, bh % heads);
  });
}

}  // namespace layerzoo_native
