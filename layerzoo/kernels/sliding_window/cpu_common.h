// What the compiled CPU forward (cpu_forward.cpp) and backward (cpu_backward.cpp) share: argument
// checks, which keys each block of queries reads, a vectorisable exp, and one head's rows of a
// (B, T, H, D) tensor.
//
// Both work on blocks of `block` queries. A block's queries see a band of keys: its first query's
// oldest visible key up to its last query's own key, at most block + window - 1 keys. One gemm
// scores the block against all of them (the out-of-band corners, about block / window of the
// work, are computed and dropped: cheaper than many small gemms), and since the band is short,
// the softmax runs over whole rows at once: no online rescaling as in flash attention.

#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../common/native_common.h"

namespace layerzoo_swa {

using layerzoo_native::gemm;

// q (B, Tq, H, D); k, v (B, Tk, Hkv, D) with H % Hkv == 0 and Tk >= Tq >= 1; float32 or float64,
// unit feature stride (rows are read in place as BLAS matrices). Raises a Python ValueError.
inline void check_inputs(const char *op, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                         int64_t window, int64_t block) {
  TORCH_CHECK_VALUE(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble, op,
                    ": inputs must be float32 or float64, got ", q.scalar_type());
  TORCH_CHECK_VALUE(q.dim() == 4 && k.dim() == 4 && k.sizes() == v.sizes(), op,
                    ": q must be (B, Tq, H, D) and k, v (B, Tk, Hkv, D), got ", q.sizes(), ", ", k.sizes(), ", ",
                    v.sizes());
  TORCH_CHECK_VALUE(k.size(0) == q.size(0) && k.size(3) == q.size(3) && k.size(2) >= 1 && q.size(2) % k.size(2) == 0,
                    op, ": k and v must share q's batch and head dim, with heads dividing q's, got q ", q.sizes(),
                    " and k ", k.sizes());
  TORCH_CHECK_VALUE(q.size(1) >= 1 && k.size(1) >= q.size(1), op, ": needs 1 <= Tq <= Tk, got Tq = ", q.size(1),
                    ", Tk = ", k.size(1));
  for (const at::Tensor *t : {&q, &k, &v}) {
    TORCH_CHECK_VALUE(t->scalar_type() == q.scalar_type() && t->device().is_cpu(), op,
                      ": q, k and v must be CPU tensors of one dtype");
    TORCH_CHECK_VALUE(t->stride(3) == 1 && t->stride(1) >= t->size(3), op,
                      ": rows must be contiguous (feature stride 1), got strides ", t->strides());
  }
  const int64_t limit = std::numeric_limits<int>::max();
  TORCH_CHECK_VALUE(window >= 1 && block >= 1 && block <= limit && q.size(3) <= limit && k.size(1) <= limit, op,
                    ": window and block must be >= 1 and sizes fit BLAS's int, got window ", window, ", block ",
                    block);
}

// The queries of one block and the band of keys they read.
struct QueryBlock {
  int64_t first_query, first_key;
  int rows, keys;
};

// Queries end-aligned to keys: query i sits at key position Tk - Tq + i and sees keys
// (position - window, position].
struct Bands {
  int64_t q_len, k_len, window, block;

  int64_t count() const { return (q_len + block - 1) / block; }
  int64_t position(int64_t query) const { return k_len - q_len + query; }
  int64_t oldest(int64_t position) const { return std::max<int64_t>(0, position - window + 1); }
  // The most keys one block reads: the scratch width.
  int max_keys() const { return static_cast<int>(std::min(k_len, block + window - 1)); }

  QueryBlock at(int64_t index) const {
    const int64_t first = index * block, rows = std::min(block, q_len - first);
    const int64_t first_key = oldest(position(first));
    return {first, first_key, static_cast<int>(rows), static_cast<int>(position(first + rows - 1) + 1 - first_key)};
  }
  // Row r of block b sees columns [lo, hi] of the block's band.
  int lo(const QueryBlock &b, int r) const { return static_cast<int>(oldest(position(b.first_query + r)) - b.first_key); }
  int hi(const QueryBlock &b, int r) const { return static_cast<int>(position(b.first_query + r) - b.first_key); }
};

// exp for fp32 as Cephes' expf: 2^n e^r with |r| <= ln 2 / 2, in plain float arithmetic so that
// GCC vectorises the loops calling it (std::exp is a scalar libm call per element, which would
// cost as much as both gemms). Relative error ~1e-7; arguments are clamped to [-87, 88].
inline float exp_of(float x) {
  x = x < -87.0f ? -87.0f : x;  // selects, which GCC vectorises (std::min/max it does not)
  x = x > 88.0f ? 88.0f : x;
  const float round = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + round) - round;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_to_n;
  std::memcpy(&two_to_n, &bits, sizeof two_to_n);
  return p * two_to_n;
}

// fp64 is the accuracy yardstick: libm's exp.
inline double exp_of(double x) { return std::exp(x); }

// row[j] = exp(row[j] - shift) for j in [lo, hi], 0 elsewhere in [0, keys).
template <typename T>
void exp_band(T *row, int keys, int lo, int hi, T shift) {
  std::fill(row, row + lo, T(0));
  for (int j = lo; j <= hi; ++j) row[j] = exp_of(row[j] - shift);
  std::fill(row + hi + 1, row + keys, T(0));
}

// One head's rows of a (B, T, H, D) tensor with unit feature stride: E is const T to read.
template <typename E>
struct HeadRows {
  E *data;
  int64_t stride;

  E *row(int64_t token) const { return data + token * stride; }
  int ld() const { return static_cast<int>(stride); }
};

template <typename E>
HeadRows<E> head_rows(const at::Tensor &t, int64_t b, int64_t h) {
  return {t.data_ptr<std::remove_const_t<E>>() + b * t.stride(0) + h * t.stride(2), t.stride(1)};
}

}  // namespace layerzoo_swa
