// SSD's chunkwise forward on CPU, compiled: one head per task, chunk by chunk.
//
// Same algorithm as chunkwise.py (read its docstring first), in the order of work of the gated
// delta rule's compiled forward (gated_delta_rule/cpu_forward.cpp): each thread takes whole heads
// and walks their chunks in order, so a chunk's matrices stay in cache from its input rows to its
// output rows; the matmuls are single-threaded BLAS calls; inputs are read with their strides and
// the output written in its (B, T, H, V) layout. The backward is PyTorch's (chunkwise.py): this
// op runs where no gradient is needed.

#include <torch/library.h>

#include <tuple>

#include "../common/native_common.h"

namespace layerzoo_ssd {
namespace {

using namespace layerzoo_native;

template <typename T>
class HeadForward {
 public:
  HeadForward(int chunk, int key_dim, int value_dim)
      : C(chunk), K(key_dim), V(value_dim), decays(chunk), q(chunk * key_dim), k(chunk * key_dim),
        v(chunk * value_dim), scores(chunk * chunk) {}

  // One head over all its `length` tokens. out points at its first output row, rows `out_stride`
  // apart. state (K, V) holds the entering state and is left holding the final one.
  void run(Strided<const T> q_in, Strided<const T> k_in, Strided<const T> v_in, Strided<const T> g_in,
           int64_t length, T scale, T *out, int64_t out_stride, T *state) {
    for (int64_t first = 0; first < length; first += C) {
      const int c = static_cast<int>(std::min<int64_t>(C, length - first));
      q_in.from(first).load(c, K, q.data());
      k_in.from(first).load(c, K, k.data());
      v_in.from(first).load(c, V, v.data());
      step(g_in.from(first), c, scale, out + first * out_stride, static_cast<int>(out_stride), state);
    }
  }

 private:
  // One chunk of c <= C tokens, its q, k, v loaded: writes its c output rows and moves the state
  // past the chunk.
  void step(Strided<const T> g, int c, T scale, T *out, int ldo, T *state) {
    decays.compute(g, c);
    const T *from_start = decays.from_start.data(), *to_end = decays.to_end.data();

    // o = scale ((q exp(gc)) S + (q k^T * L) v), written into the output rows
    gemm<T>(false, true, c, c, K, 1, q.data(), K, k.data(), K, 0, scores.data(), C);
    decays.mask(scores.data(), c, scale, true);
    gemm<T>(false, false, c, V, c, 1, scores.data(), C, v.data(), V, 0, out, ldo);
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) q[i * K + d] *= scale * from_start[i];
    gemm<T>(false, false, c, V, K, 1, q.data(), K, state, V, 1, out, ldo);

    // S <- exp(gc_last) S + (k exp(gc_last - gc))^T v
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) k[i * K + d] *= to_end[i];
    gemm<T>(true, false, K, V, c, 1, k.data(), K, v.data(), V, from_start[c - 1], state, V);
  }

  const int C, K, V;
  ChunkDecays<T> decays;
  std::vector<T> q, k, v, scores;
};

// q, k (B, T, H, K); v (B, T, H, V); g (B, T, H): one floating dtype, any strides. initial_state
// (B * H, K, V), contiguous, in that dtype. Returns the output (B, T, H, V) and the final state
// (B * H, K, V), both new.
std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                                           const at::Tensor &g, double scale, const at::Tensor &initial_state,
                                           int64_t chunk) {
  const char *op = "ssd_forward";
  check_qkv(op, q, k, v, chunk);
  const int64_t batch = k.size(0), length = k.size(1), heads = k.size(2), key_dim = k.size(3);
  const int64_t value_dim = v.size(3);
  check_tensor(op, "g", g, {batch, length, heads}, q);
  check_tensor(op, "initial_state", initial_state, {batch * heads, key_dim, value_dim}, q);
  TORCH_CHECK_VALUE(initial_state.is_contiguous(), op, ": initial_state must be contiguous");
  at::Tensor out = at::empty({batch, length, heads, value_dim}, v.options());
  at::Tensor state = initial_state.clone();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ssd_forward", [&] {
    for_each_head<HeadForward<scalar_t>>(batch, heads, [&](auto &runner, int64_t b, int64_t h) {
      runner.run(head_slice<const scalar_t>(q, b, h), head_slice<const scalar_t>(k, b, h),
                 head_slice<const scalar_t>(v, b, h), head_slice<const scalar_t>(g, b, h), length,
                 static_cast<scalar_t>(scale), out.data_ptr<scalar_t>() + (b * length * heads + h) * value_dim,
                 heads * value_dim, state.data_ptr<scalar_t>() + (b * heads + h) * key_dim * value_dim);
    }, chunk, key_dim, value_dim);
  });
  return {out, state};
}

}  // namespace
}  // namespace layerzoo_ssd

TORCH_LIBRARY_FRAGMENT(layerzoo, m) {
  m.def("ssd_forward(Tensor q, Tensor k, Tensor v, Tensor g, float scale, Tensor initial_state, int chunk) "
        "-> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(layerzoo, CPU, m) { m.impl("ssd_forward", layerzoo_ssd::forward); }
