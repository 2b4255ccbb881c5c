// What the compiled CPU forward (cpu_forward.cpp) and backward (cpu_backward.cpp) share beyond
// ../native_common.h (gemm, strided reads, checks): their argument checks, the in-chunk decays,
// the workspace.
//
// Row-major throughout: a matrix is (pointer, rows, columns, row stride).

#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../native_common.h"

namespace layerzoo_gdr {

using namespace layerzoo_native;

// q, k (B, T, H, K); v (B, T, H, V); g, beta (B, T, H); float32 or float64; T >= 1. BLAS takes
// int sizes, hence the bound on K, V and the chunk.
inline void check_inputs(const char *op, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                         const at::Tensor &g, const at::Tensor &beta, int64_t chunk) {
  TORCH_CHECK_VALUE(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble, op,
                    ": inputs must be float32 or float64, got ", q.scalar_type());
  TORCH_CHECK_VALUE(q.dim() == 4 && v.dim() == 4, op, ": q and v must be 4-d (B, T, H, D), got ", q.sizes(), " and ",
                    v.sizes());
  const int64_t batch = q.size(0), length = q.size(1), heads = q.size(2);
  check_tensor(op, "q", q, q.sizes(), q);
  check_tensor(op, "k", k, q.sizes(), q);
  check_tensor(op, "v", v, {batch, length, heads, v.size(3)}, q);
  check_tensor(op, "g", g, {batch, length, heads}, q);
  check_tensor(op, "beta", beta, {batch, length, heads}, q);
  TORCH_CHECK_VALUE(length >= 1, op, ": needs at least one token, got T = ", length);
  const int64_t limit = std::numeric_limits<int>::max();
  TORCH_CHECK_VALUE(q.size(3) >= 1 && q.size(3) <= limit && v.size(3) >= 1 && v.size(3) <= limit, op,
                    ": head dims must be in [1, ", limit, "], got K = ", q.size(3), " and V = ", v.size(3));
  TORCH_CHECK_VALUE(chunk >= 1 && chunk <= limit, op, ": chunk must be in [1, ", limit, "], got ", chunk);
}

// The decays of one chunk of c <= C tokens, from its log decays g: gc, the cumulative sum, in
// double (see chunk_parts.decays for why); from_start = exp(gc), to_end = exp(gc_last - gc) and
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

// Where the forward keeps what the backward needs, chunk-major as chunkwise.py's workspace:
// states (N + 1, BH, K, V), v_new (N, BH, C, V), w (N, BH, C, K), inverse (N, BH, C, C).
template <typename T>
struct Workspace {
  T *states, *v_new, *w, *inverse;
  int64_t heads, C, K, V;

  T *state(int64_t chunk, int64_t head) const { return states + (chunk * heads + head) * K * V; }
  T *v_new_of(int64_t chunk, int64_t head) const { return v_new + (chunk * heads + head) * C * V; }
  T *w_of(int64_t chunk, int64_t head) const { return w + (chunk * heads + head) * C * K; }
  T *inverse_of(int64_t chunk, int64_t head) const { return inverse + (chunk * heads + head) * C * C; }
};

template <typename T>
Workspace<T> workspace_of(const at::Tensor &states, const at::Tensor &v_new, const at::Tensor &w,
                          const at::Tensor &inverse) {
  return {states.data_ptr<T>(), v_new.data_ptr<T>(), w.data_ptr<T>(), inverse.data_ptr<T>(),
          states.size(1), inverse.size(2), states.size(2), states.size(3)};
}

}  // namespace layerzoo_gdr
