// What the compiled CPU forward (cpu_forward.cpp) and backward (cpu_backward.cpp) share beyond
// ../common/native_common.h: their argument checks and the workspace the forward keeps for the backward.

#pragma once

#include "../common/native_common.h"

namespace layerzoo_gdr {

using namespace layerzoo_native;

// q, k (B, T, H, K); v (B, T, H, V); g, beta (B, T, H); float32 or float64; T >= 1.
inline void check_inputs(const char *op, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                         const at::Tensor &g, const at::Tensor &beta, int64_t chunk) {
  check_qkv(op, q, k, v, chunk);
  check_tensor(op, "g", g, {q.size(0), q.size(1), q.size(2)}, q);
  check_tensor(op, "beta", beta, {q.size(0), q.size(1), q.size(2)}, q);
}

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
