// What the compiled CPU forward (cpu_forward.cpp) and backward (cpu_backward.cpp) share: strided
// reads of the (B, T, H, D) inputs, the in-chunk decays (and ../cpu_gemm.h's BLAS gemm).
//
// Row-major throughout: a matrix is (pointer, rows, columns, row stride).

#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "../cpu_gemm.h"

namespace layerzoo_gdr {

using layerzoo_cpu::gemm;

// Argument checks of both entry points: any misuse raises a Python ValueError naming the argument,
// before anything is read.
inline void check_tensor(const char *op, const char *name, const at::Tensor &t, at::IntArrayRef sizes,
                         const at::Tensor &like) {
  TORCH_CHECK_VALUE(t.sizes() == sizes, op, ": ", name, " must have shape ", sizes, ", got ", t.sizes());
  TORCH_CHECK_VALUE(t.scalar_type() == like.scalar_type(), op, ": ", name, " must be ", like.scalar_type(), " like q, got ",
                    t.scalar_type());
  TORCH_CHECK_VALUE(t.device().is_cpu(), op, ": ", name, " must be on the CPU, got ", t.device());
}

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
