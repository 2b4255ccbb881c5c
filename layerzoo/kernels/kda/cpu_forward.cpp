// KDA's chunkwise forward on CPU, compiled: one head per task, chunk by chunk.
//
// Same algorithm as chunkwise.py (read its docstring first), in the order of work of the gated
// delta rule's compiled forward (gated_delta_rule/cpu_forward.cpp: a thread per head, each
// chunk's matrices in cache, single-threaded BLAS calls, inputs read with their strides). What
// the decay per key channel changes is the decayed scores P(x)[i, j] = sum_d x_id k_jd
// exp(gc_id - gc_jd), which do not factor into a matmul and a mask. They are built per block of
// SUB rows [r, r + SUB): against the columns before r as one gemm of
// (x_i exp(gc_i - gc_r)) . (k_j exp(gc_r - gc_j)), both factors <= 1 (g <= 0) so nothing
// overflows however strong the decay; inside the block pair by pair, k_j carried down the rows
// by each step's decay. Every decay factor is a product of the steps' exp(g) (one exp per step
// and channel; a product is what the step loop applies too), never exp of a long difference.
// The backward is PyTorch's (chunkwise.py): this op runs where no gradient is needed.

#include <torch/library.h>

#include <tuple>

#include "../common/native_common.h"

namespace layerzoo_kda {
namespace {

using namespace layerzoo_native;

// Rows per block of the decayed scores: large enough for the gemm against earlier columns to
// do most of the work, small enough that the pairwise work inside blocks stays small.
constexpr int SUB = 16;

template <typename T>
class HeadForward {
 public:
  HeadForward(int chunk, int key_dim, int value_dim)
      : C(chunk), K(key_dim), V(value_dim), q(chunk * key_dim), k(chunk * key_dim), v(chunk * value_dim),
        decay(chunk * key_dim), from_start(chunk * key_dim), to_end(chunk * key_dim), lower_q(SUB * key_dim),
        lower_k(SUB * key_dim), upper(chunk * key_dim), carried(key_dim), scores_q(chunk * chunk),
        scores_k(chunk * chunk), scaled(chunk * key_dim), solved(chunk * (key_dim + value_dim)) {}

  // One head over all its `length` tokens. out points at its first output row, rows `out_stride`
  // apart. state (K, V) holds the entering state and is left holding the final one.
  void run(Strided<const T> q_in, Strided<const T> k_in, Strided<const T> v_in, Strided<const T> g_in,
           Strided<const T> beta_in, int64_t length, T scale, T *out, int64_t out_stride, T *state) {
    for (int64_t first = 0; first < length; first += C) {
      const int c = static_cast<int>(std::min<int64_t>(C, length - first));
      q_in.from(first).load(c, K, q.data());
      k_in.from(first).load(c, K, k.data());
      v_in.from(first).load(c, V, v.data());
      g_in.from(first).load(c, K, decay.data());
      step(beta_in.from(first), c, scale, out + first * out_stride, static_cast<int>(out_stride), state);
    }
  }

 private:
  // One chunk of c <= C tokens, its q, k, v and g loaded: writes its c output rows and moves the
  // state past the chunk.
  void step(Strided<const T> beta, int c, T scale, T *out, int ldo, T *state) {
    chunk_decays(c);
    decayed_scores(c);

    // A = strict_tril(beta_i P(k)_ij); [w | u] = (I + A)^-1 [beta k exp(gc) | beta v], one solve
    for (int i = 0; i < c; ++i)
      for (int j = 0; j < i; ++j) scores_k[i * C + j] *= beta.at(i);
    const int W = K + V;
    for (int i = 0; i < c; ++i) {
      for (int d = 0; d < K; ++d) solved[i * W + d] = beta.at(i) * k[i * K + d] * from_start[i * K + d];
      for (int e = 0; e < V; ++e) solved[i * W + K + e] = beta.at(i) * v[i * V + e];
    }
    unit_lower_solve(c, W, scores_k.data(), C, solved.data(), W);
    // v_new = u - w S, in place of u
    T *w = solved.data(), *v_new = solved.data() + K;
    gemm<T>(false, false, c, V, K, -1, w, W, state, V, 1, v_new, W);

    // o = scale ((q exp(gc)) S + P(q) v_new), written into the output rows
    for (int i = 0; i < c * K; ++i) scaled[i] = q[i] * from_start[i];
    gemm<T>(false, false, c, V, K, scale, scaled.data(), K, state, V, 0, out, ldo);
    gemm<T>(false, false, c, V, c, scale, scores_q.data(), C, v_new, W, 1, out, ldo);

    // S <- diag(exp(gc_last)) S + (k exp(gc_last - gc))^T v_new
    const T *last = from_start.data() + (c - 1) * K;
    for (int d = 0; d < K; ++d)
      for (int e = 0; e < V; ++e) state[d * V + e] *= last[d];
    for (int i = 0; i < c * K; ++i) scaled[i] = k[i] * to_end[i];
    gemm<T>(true, false, K, V, c, 1, scaled.data(), K, v_new, W, 1, state, V);
  }

  // decay (c, K) from g to exp(g); from_start = exp(gc) and to_end = exp(gc_last - gc) as running
  // products of it, from the chunk's start and from its end.
  void chunk_decays(int c) {
    for (int i = 0; i < c * K; ++i) decay[i] = std::exp(decay[i]);
    for (int d = 0; d < K; ++d) from_start[d] = decay[d];
    for (int i = 1; i < c; ++i)
      for (int d = 0; d < K; ++d) from_start[i * K + d] = from_start[(i - 1) * K + d] * decay[i * K + d];
    std::fill(to_end.begin() + (c - 1) * K, to_end.begin() + c * K, T(1));
    for (int i = c - 2; i >= 0; --i)
      for (int d = 0; d < K; ++d) to_end[i * K + d] = to_end[(i + 1) * K + d] * decay[(i + 1) * K + d];
  }

  // scores_q = P(q) (its diagonal q_i . k_i included) and scores_k = P(k) below the diagonal,
  // (c, c) with leading dimension C; scores_q is 0 above the diagonal, scores_k is not read there.
  void decayed_scores(int c) {
    for (int r = 0; r < c; r += SUB) {
      const int rows = std::min(SUB, c - r);
      // the block's rows decayed to r: x_i exp(gc_i - gc_r)
      std::fill(carried.begin(), carried.end(), T(1));
      for (int i = 0; i < rows; ++i) {
        const T *step_decay = decay.data() + (r + i) * K;
        for (int d = 0; d < K; ++d) {
          if (i > 0) carried[d] *= step_decay[d];
          lower_q[i * K + d] = q[(r + i) * K + d] * carried[d];
          lower_k[i * K + d] = k[(r + i) * K + d] * carried[d];
        }
      }
      if (r > 0) {  // the earlier columns decayed up to r: k_j exp(gc_r - gc_j), j < r
        std::fill(carried.begin(), carried.end(), T(1));
        for (int j = r - 1; j >= 0; --j) {
          const T *step_decay = decay.data() + (j + 1) * K;
          for (int d = 0; d < K; ++d) {
            carried[d] *= step_decay[d];
            upper[j * K + d] = k[j * K + d] * carried[d];
          }
        }
        gemm<T>(false, true, rows, r, K, 1, lower_q.data(), K, upper.data(), K, 0, scores_q.data() + r * C, C);
        gemm<T>(false, true, rows, r, K, 1, lower_k.data(), K, upper.data(), K, 0, scores_k.data() + r * C, C);
      }
      // inside the block: k_j carried down to row i by the decays of steps j + 1 .. i
      for (int j = r; j < r + rows; ++j) {
        const T *key = k.data() + j * K;
        std::copy(key, key + K, carried.begin());
        scores_q[j * C + j] = dot(q.data() + j * K, carried.data());
        std::fill(scores_q.begin() + j * C + j + 1, scores_q.begin() + j * C + c, T(0));
        for (int i = j + 1; i < r + rows; ++i) {
          const T *step_decay = decay.data() + i * K;
          for (int d = 0; d < K; ++d) carried[d] *= step_decay[d];
          scores_q[i * C + j] = dot(q.data() + i * K, carried.data());
          scores_k[i * C + j] = dot(k.data() + i * K, carried.data());
        }
      }
    }
  }

  T dot(const T *a, const T *b) const {
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int d = 0; d < K; ++d) sum += a[d] * b[d];
    return sum;
  }

  const int C, K, V;
  std::vector<T> q, k, v, decay, from_start, to_end, lower_q, lower_k, upper, carried, scores_q, scores_k, scaled,
      solved;
};

// q, k, g (B, T, H, K); v (B, T, H, V); beta (B, T, H): one floating dtype, any strides.
// initial_state (B * H, K, V), contiguous, in that dtype. Returns the output (B, T, H, V) and the
// final state (B * H, K, V), both new.
std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                                           const at::Tensor &g, const at::Tensor &beta, double scale,
                                           const at::Tensor &initial_state, int64_t chunk) {
  const char *op = "kda_forward";
  check_qkv(op, q, k, v, chunk);
  const int64_t batch = k.size(0), length = k.size(1), heads = k.size(2), key_dim = k.size(3);
  const int64_t value_dim = v.size(3);
  check_tensor(op, "g", g, k.sizes(), q);
  check_tensor(op, "beta", beta, {batch, length, heads}, q);
  check_tensor(op, "initial_state", initial_state, {batch * heads, key_dim, value_dim}, q);
  TORCH_CHECK_VALUE(initial_state.is_contiguous(), op, ": initial_state must be contiguous");
  at::Tensor out = at::empty({batch, length, heads, value_dim}, v.options());
  at::Tensor state = initial_state.clone();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "kda_forward", [&] {
    for_each_head<HeadForward<scalar_t>>(batch, heads, [&](auto &runner, int64_t b, int64_t h) {
      runner.run(head_slice<const scalar_t>(q, b, h), head_slice<const scalar_t>(k, b, h),
                 head_slice<const scalar_t>(v, b, h), head_slice<const scalar_t>(g, b, h),
                 head_slice<const scalar_t>(beta, b, h), length, static_cast<scalar_t>(scale),
                 out.data_ptr<scalar_t>() + (b * length * heads + h) * value_dim, heads * value_dim,
                 state.data_ptr<scalar_t>() + (b * heads + h) * key_dim * value_dim);
    }, chunk, key_dim, value_dim);
  });
  return {out, state};
}

}  // namespace
}  // namespace layerzoo_kda

TORCH_LIBRARY_FRAGMENT(layerzoo, m) {
  m.def("kda_forward(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float scale, Tensor initial_state, "
        "int chunk) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(layerzoo, CPU, m) { m.impl("kda_forward", layerzoo_kda::forward); }
