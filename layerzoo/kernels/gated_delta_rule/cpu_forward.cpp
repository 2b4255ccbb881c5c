// The chunkwise gated delta rule's forward on CPU, compiled: one head per task, chunk by chunk.
//
// Same algorithm as chunk_forward.py (read its docstring first); what changes is the order of the
// work. The PyTorch forward runs each step for all heads and chunks of a group at once, as batched
// matmuls across threads: every step waits for the slowest thread, and each chunk's matrices leave
// the cache between the steps that use them. Here each thread takes whole heads and walks their
// chunks in order, so all of a chunk's matrices (a few 10s of KiB) stay in L1/L2 from the input
// rows to the output rows, the matmuls are single-threaded BLAS calls with no synchronisation, and
// the inputs are read (with any strides) and the output written in their (B, T, H, D) layout, with
// no chunk-major copies. No maintained library has a CPU kernel for this (flash-linear-attention's
// are Triton, for GPUs), hence this file. This file also declares both compiled operators.

#include <torch/library.h>

#include <cstring>

#include "cpu_common.h"

namespace layerzoo_gdr {
namespace {

template <typename T>
class HeadForward {
 public:
  HeadForward(int chunk, int key_dim, int value_dim)
      : C(chunk), K(key_dim), V(value_dim), decays(chunk), q(chunk * key_dim), k(chunk * key_dim),
        v(chunk * value_dim), k_beta(chunk * key_dim),
        scaled(chunk * std::max(key_dim, value_dim)), a(chunk * chunk), inverse(chunk * chunk), w(chunk * key_dim),
        v_new(chunk * value_dim) {}

  // One head over all its `length` tokens. out points at its first output row, rows `out_stride`
  // apart. state (K, V) holds the entering state and is left holding the final one.
  void run(Strided<const T> q_in, Strided<const T> k_in, Strided<const T> v_in, Strided<const T> g_in,
           Strided<const T> beta_in, int64_t length,
           T scale, T *out, int64_t out_stride, T *state, const Workspace<T> *keep, int64_t head) {
    for (int64_t first = 0, chunk = 0; first < length; first += C, ++chunk) {
      const int c = static_cast<int>(std::min<int64_t>(C, length - first));
      T *w_out = keep ? keep->w_of(chunk, head) : w.data();
      T *v_new_out = keep ? keep->v_new_of(chunk, head) : v_new.data();
      T *inverse_out = keep ? keep->inverse_of(chunk, head) : inverse.data();
      if (keep) std::memcpy(keep->state(chunk, head), state, sizeof(T) * K * V);
      q_in.from(first).load(c, K, q.data());
      k_in.from(first).load(c, K, k.data());
      v_in.from(first).load(c, V, v.data());
      step(g_in.from(first), beta_in.from(first), c, scale, out + first * out_stride, static_cast<int>(out_stride),
           state, w_out, v_new_out, inverse_out);
      if (keep && c < C) pad(c, w_out, v_new_out, inverse_out);
    }
    if (keep) std::memcpy(keep->state((length + C - 1) / C, head), state, sizeof(T) * K * V);
  }

 private:
  // One chunk of c <= C tokens, its q, k, v loaded: writes its c output rows and w, v_new,
  // (I + A)^-1 (leading dimensions K, V, C), and moves the state past the chunk.
  void step(Strided<const T> g, Strided<const T> beta, int c, T scale, T *out, int ldo, T *state, T *w_out,
            T *v_new_out, T *inverse_out) {
    decays.compute(g, c);
    const T *from_start = decays.from_start.data(), *to_end = decays.to_end.data();
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) k_beta[i * K + d] = beta.at(i) * k[i * K + d];

    // A = strict_tril(beta_i L_ij k_i . k_j), then (I + A)^-1
    gemm<T>(false, true, c, c, K, 1, k_beta.data(), K, k.data(), K, 0, a.data(), C);
    decays.mask(a.data(), c, 1, false);
    unit_lower_inverse(a.data(), C, c, inverse_out, C);

    // w = M (beta k exp(gc)); u = M (beta v); v_new = u - w S
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) k_beta[i * K + d] *= from_start[i];
    gemm<T>(false, false, c, K, c, 1, inverse_out, C, k_beta.data(), K, 0, w_out, K);
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < V; ++d) scaled[i * V + d] = beta.at(i) * v[i * V + d];
    gemm<T>(false, false, c, V, c, 1, inverse_out, C, scaled.data(), V, 0, v_new_out, V);
    gemm<T>(false, false, c, V, K, -1, w_out, K, state, V, 1, v_new_out, V);

    // o = scale ((q exp(gc)) S + (q k^T * L) v_new), written into the output rows
    gemm<T>(false, true, c, c, K, 1, q.data(), K, k.data(), K, 0, a.data(), C);
    decays.mask(a.data(), c, scale, true);
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) scaled[i * K + d] = scale * from_start[i] * q[i * K + d];
    gemm<T>(false, false, c, V, K, 1, scaled.data(), K, state, V, 0, out, ldo);
    gemm<T>(false, false, c, V, c, 1, a.data(), C, v_new_out, V, 1, out, ldo);

    // S <- exp(gc_last) S + (k exp(gc_last - gc))^T v_new
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) k_beta[i * K + d] = to_end[i] * k[i * K + d];
    gemm<T>(true, false, K, V, c, 1, k_beta.data(), K, v_new_out, V, from_start[c - 1], state, V);
  }

  // A last chunk of c < C tokens, kept as the PyTorch forward keeps its zero-padded chunk: padded
  // rows of w and v_new are 0, and (I + A)^-1 is the identity on the padding.
  void pad(int c, T *w_out, T *v_new_out, T *inverse_out) {
    std::fill(w_out + c * K, w_out + C * K, T(0));
    std::fill(v_new_out + c * V, v_new_out + C * V, T(0));
    for (int i = 0; i < C; ++i)
      for (int j = (i < c ? c : 0); j < C; ++j) inverse_out[i * C + j] = (i == j);
  }

  const int C, K, V;
  ChunkDecays<T> decays;
  std::vector<T> q, k, v, k_beta, scaled, a, inverse, w, v_new;
};

// q, k (B, T, H, K); v (B, T, H, V); g, beta (B, T, H): one floating dtype, any strides.
// state (B * H, K, V), contiguous, in that dtype: the entering state, overwritten with the final
// one. Returns the output (B, T, H, V) and, when `keep`, the workspace the backward reads.
std::vector<at::Tensor> forward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &g,
                                const at::Tensor &beta, double scale, at::Tensor state, int64_t chunk, bool keep) {
  const char *op = "gated_delta_rule_forward";
  check_inputs(op, q, k, v, g, beta, chunk);
  const int64_t batch = k.size(0), length = k.size(1), heads = k.size(2), key_dim = k.size(3);
  const int64_t value_dim = v.size(3), n_chunks = (length + chunk - 1) / chunk;
  check_tensor(op, "state", state, {batch * heads, key_dim, value_dim}, q);
  TORCH_CHECK_VALUE(state.is_contiguous(), op, ": state must be contiguous");
  at::Tensor out = at::empty({batch, length, heads, value_dim}, v.options());
  std::vector<at::Tensor> workspace;
  if (keep) {
    const int64_t bh = batch * heads;
    workspace = {at::empty({n_chunks + 1, bh, key_dim, value_dim}, v.options()),
                 at::empty({n_chunks, bh, chunk, value_dim}, v.options()),
                 at::empty({n_chunks, bh, chunk, key_dim}, v.options()),
                 at::empty({n_chunks, bh, chunk, chunk}, v.options())};
  }
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "gated_delta_rule_forward", [&] {
    Workspace<scalar_t> ws{};
    if (keep) ws = workspace_of<scalar_t>(workspace[0], workspace[1], workspace[2], workspace[3]);
    for_each_head<HeadForward<scalar_t>>(batch, heads, [&](auto &runner, int64_t b, int64_t h) {
      runner.run(head_slice<const scalar_t>(q, b, h), head_slice<const scalar_t>(k, b, h),
                 head_slice<const scalar_t>(v, b, h), head_slice<const scalar_t>(g, b, h),
                 head_slice<const scalar_t>(beta, b, h), length,
                 static_cast<scalar_t>(scale), out.data_ptr<scalar_t>() + (b * length * heads + h) * value_dim,
                 heads * value_dim, state.data_ptr<scalar_t>() + (b * heads + h) * key_dim * value_dim,
                 keep ? &ws : nullptr, b * heads + h);
    }, chunk, key_dim, value_dim);
  });
  workspace.insert(workspace.begin(), out);
  return workspace;
}

}  // namespace
}  // namespace layerzoo_gdr

TORCH_LIBRARY_FRAGMENT(layerzoo, m) {
  m.def("gated_delta_rule_forward(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float scale, "
        "Tensor(a!) state, int chunk, bool keep) -> Tensor[]");
  m.def("gated_delta_rule_backward(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float scale, "
        "Tensor states, Tensor v_new, Tensor w, Tensor inverse, Tensor d_out, Tensor d_final_state) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(layerzoo, CPU, m) { m.impl("gated_delta_rule_forward", layerzoo_gdr::forward); }
