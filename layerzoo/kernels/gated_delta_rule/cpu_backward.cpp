// The chunkwise gated delta rule's backward on CPU, compiled: one head per task, its chunks last
// to first.
//
// Same gradient as chunk_backward.py (read its docstring first), from the same workspace either
// forward keeps. Given the state entering a chunk (kept) and the gradient of the state leaving it
// (carried from the chunk after), every gradient of the chunk is local to it; so, as in
// cpu_forward.cpp, each thread walks its heads' chunks in order (here backwards) with the chunk's
// matrices in cache and single-threaded BLAS calls, reading inputs and output gradients with
// their strides and writing the input gradients in the (B, T, H, D) layout.

#include <torch/library.h>

#include <cstring>

#include "cpu_common.h"

namespace layerzoo_gdr {
namespace {

template <typename T>
class HeadBackward {
 public:
  HeadBackward(int chunk, int key_dim, int value_dim)
      : C(chunk), K(key_dim), V(value_dim), decays(chunk), q(chunk * key_dim), k(chunk * key_dim),
        v(chunk * value_dim), d_out(chunk * value_dim), k_beta(chunk * key_dim), k_to_end(chunk * key_dim),
        q_k(chunk * chunk), scores(chunk * chunk), d_scores(chunk * chunk), d_a(chunk * chunk),
        k_beta_k(chunk * chunk), d_log_inside(chunk * chunk), d_v_new(chunk * value_dim), u(chunk * value_dim),
        d_x_u(chunk * value_dim), d_q_from_start(chunk * key_dim), d_k_to_end(chunk * key_dim),
        d_x_w(chunk * key_dim), d_k_beta(chunk * key_dim), scratch(chunk * key_dim), d_from_start(chunk),
        d_to_end(chunk), d_g_row(chunk), d_beta_row(chunk) {}

  // One head over all its `length` tokens, chunks last to first. d_state (K, V) enters as the
  // final state's gradient and leaves as the initial state's. The gradients are written with
  // their own strides.
  void run(Strided<const T> q_in, Strided<const T> k_in, Strided<const T> v_in, Strided<const T> g_in,
           Strided<const T> beta_in, Strided<const T> d_out_in, int64_t length, T scale, const Workspace<T> &kept,
           int64_t head, T *d_state, Strided<T> dq, Strided<T> dk, Strided<T> dv, Strided<T> dg, Strided<T> d_beta) {
    for (int64_t chunk = (length + C - 1) / C - 1; chunk >= 0; --chunk) {
      const int64_t first = chunk * C;
      const int c = static_cast<int>(std::min<int64_t>(C, length - first));
      q_in.from(first).load(c, K, q.data());
      k_in.from(first).load(c, K, k.data());
      v_in.from(first).load(c, V, v.data());
      d_out_in.from(first).load(c, V, d_out.data());
      step(g_in.from(first), beta_in.from(first), c, scale, kept.state(chunk, head), kept.v_new_of(chunk, head),
           kept.w_of(chunk, head), kept.inverse_of(chunk, head), d_state);
      // dq, dk, dv, dg, dbeta: where step left them
      dq.from(first).store(c, K, k_to_end.data());
      dk.from(first).store(c, K, scratch.data());
      dv.from(first).store(c, V, d_x_u.data());
      dg.from(first).store(c, 1, d_g_row.data());
      d_beta.from(first).store(c, 1, d_beta_row.data());
    }
  }

 private:
  // One chunk of c <= C tokens: S the state entering it, v_new, w, M = (I + A)^-1 as kept (leading
  // dimensions V, K, C). d_state enters as dS' (the leaving state's gradient) and leaves as dS.
  void step(Strided<const T> g, Strided<const T> beta, int c, T scale, const T *S, const T *v_new, const T *w,
            const T *M, T *d_state) {
    decays.compute(g, c);
    const T *from_start = decays.from_start.data(), *to_end = decays.to_end.data();
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) {
        k_beta[i * K + d] = beta.at(i) * k[i * K + d];
        k_to_end[i * K + d] = to_end[i] * k[i * K + d];
      }
    gemm<T>(false, true, c, c, K, 1, q.data(), K, k.data(), K, 0, q_k.data(), C);
    std::copy(q_k.begin(), q_k.end(), scores.begin());
    decays.mask(scores.data(), c, scale, true);  // scale (q k^T * L), the output's scores

    // dv_new = scores^T do + (k exp(gc_last - gc)) dS'
    gemm<T>(true, false, c, V, c, 1, scores.data(), C, d_out.data(), V, 0, d_v_new.data(), V);
    gemm<T>(false, false, c, V, K, 1, k_to_end.data(), K, d_state, V, 1, d_v_new.data(), V);
    // what needs dS' itself, before dS replaces it: the gradients of exp(gc_last) and of k exp(gc_last - gc)
    T d_chunk_decay = 0;
    for (int e = 0; e < K * V; ++e) d_chunk_decay += S[e] * d_state[e];
    gemm<T>(false, true, c, K, V, 1, v_new, V, d_state, V, 0, d_k_to_end.data(), K);
    // dS = exp(gc_last) dS' + scale (q exp(gc))^T do - w^T dv_new
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) scratch[i * K + d] = scale * from_start[i] * q[i * K + d];
    gemm<T>(true, false, K, V, c, 1, scratch.data(), K, d_out.data(), V, from_start[c - 1], d_state, V);
    gemm<T>(true, false, K, V, c, -1, w, K, d_v_new.data(), V, 1, d_state, V);

    // the output's other terms: d(q exp(gc)) = do S^T; d(scores) = scale do v_new^T
    gemm<T>(false, true, c, K, V, 1, d_out.data(), V, S, V, 0, d_q_from_start.data(), K);
    gemm<T>(false, true, c, c, V, scale, d_out.data(), V, v_new, V, 0, d_scores.data(), C);

    // through v_new = M u - (M beta k exp(gc)) S, with u = v_new + w S re-formed:
    // dX_u = M^T dv_new; dX_w = -M^T (dv_new S^T); dA = -strict_tril(dX_w w^T + dX_u u^T)
    std::memcpy(u.data(), v_new, sizeof(T) * c * V);
    gemm<T>(false, false, c, V, K, 1, w, K, S, V, 1, u.data(), V);
    gemm<T>(true, false, c, V, c, 1, M, C, d_v_new.data(), V, 0, d_x_u.data(), V);
    gemm<T>(false, true, c, K, V, 1, d_v_new.data(), V, S, V, 0, scratch.data(), K);
    gemm<T>(true, false, c, K, c, -1, M, C, scratch.data(), K, 0, d_x_w.data(), K);
    gemm<T>(false, true, c, c, K, -1, d_x_w.data(), K, w, K, 0, d_a.data(), C);
    gemm<T>(false, true, c, c, V, -1, d_x_u.data(), V, u.data(), V, 1, d_a.data(), C);

    // d(log L_ij) below the diagonal, before dA and d(scores) are multiplied by L in place
    gemm<T>(false, true, c, c, K, 1, k_beta.data(), K, k.data(), K, 0, k_beta_k.data(), C);
    for (int i = 0; i < c; ++i)
      for (int j = 0; j < i; ++j) {
        const int e = i * C + j;
        d_log_inside[e] = (d_a[e] * k_beta_k[e] + d_scores[e] * q_k[e]) * decays.L[e];
      }
    decays.mask(d_a.data(), c, 1, false);
    decays.mask(d_scores.data(), c, 1, true);

    // d(beta k) = (dA * L) k + exp(gc) dX_w; per row, the gradients of beta and of the decays
    gemm<T>(false, false, c, K, c, 1, d_a.data(), C, k.data(), K, 0, d_k_beta.data(), K);
    for (int i = 0; i < c; ++i) {
      T from_q = 0, from_k_beta = 0, from_v = 0, from_k = 0, to_k = 0;
      for (int d = 0; d < K; ++d) {
        from_q += q[i * K + d] * d_q_from_start[i * K + d];
        from_k_beta += k_beta[i * K + d] * d_x_w[i * K + d];
        to_k += k_to_end[i * K + d] * d_k_to_end[i * K + d];
        d_k_beta[i * K + d] += from_start[i] * d_x_w[i * K + d];
        from_k += k[i * K + d] * d_k_beta[i * K + d];
      }
      for (int d = 0; d < V; ++d) from_v += v[i * V + d] * d_x_u[i * V + d];
      d_from_start[i] = (scale * from_q + from_k_beta) * from_start[i];
      d_to_end[i] = to_k;
      d_beta_row[i] = from_v + from_k;
    }
    gate_gradient(c, d_chunk_decay * from_start[c - 1]);

    // dk = (dA * L)^T (beta k) + (dscores * L)^T q + beta d(beta k) + exp(gc_last - gc) d(k exp(..))
    gemm<T>(true, false, c, K, c, 1, d_a.data(), C, k_beta.data(), K, 0, scratch.data(), K);
    gemm<T>(true, false, c, K, c, 1, d_scores.data(), C, q.data(), K, 1, scratch.data(), K);
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d)
        scratch[i * K + d] += beta.at(i) * d_k_beta[i * K + d] + to_end[i] * d_k_to_end[i * K + d];
    // dq = (dscores * L) k + scale exp(gc) d(q exp(gc)), into k_to_end's buffer (read for the last time above)
    gemm<T>(false, false, c, K, c, 1, d_scores.data(), C, k.data(), K, 0, k_to_end.data(), K);
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) k_to_end[i * K + d] += scale * from_start[i] * d_q_from_start[i * K + d];
    // dv = beta dX_u
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < V; ++d) d_x_u[i * V + d] *= beta.at(i);
  }

  // dg[l] = sum over the log decays that g_l is a term of, each decay's gradient summed over
  // exactly the steps it spans: gc_i (i >= l), gc_last - gc_i (i < l), gc_last (every l) and
  // gc_i - gc_j (j < l <= i). Written into d_g_row.
  void gate_gradient(int c, T d_last) {
    T from_start_sum = 0;
    for (int l = c - 1; l >= 0; --l) d_g_row[l] = from_start_sum += d_from_start[l];
    T to_end_sum = 0;
    for (int l = 0; l < c; ++l) {
      d_g_row[l] += to_end_sum + d_last;
      to_end_sum += d_to_end[l];
    }
    // row i's prefix sums over j < l, then summed over rows i >= l
    for (int i = 0; i < c; ++i) {
      T *row = d_log_inside.data() + i * C;
      T sum = 0;
      for (int j = 0; j < i; ++j) {
        const T here = row[j];
        row[j] = sum;  // sum over j' < j
        sum += here;
      }
      row[i] = sum;
    }
    for (int l = 1; l < c; ++l) {
      T sum = 0;
      for (int i = l; i < c; ++i) sum += d_log_inside[i * C + l];
      d_g_row[l] += sum;
    }
  }

  const int C, K, V;
  ChunkDecays<T> decays;
  std::vector<T> q, k, v, d_out, k_beta, k_to_end, q_k, scores, d_scores, d_a, k_beta_k, d_log_inside, d_v_new, u,
      d_x_u, d_q_from_start, d_k_to_end, d_x_w, d_k_beta, scratch, d_from_start, d_to_end, d_g_row, d_beta_row;
};

// The gradients (dq, dk, dv, dg, dbeta, d_initial_state) of chunkwise.py's Function, from its
// inputs q, k (B, T, H, K), v (B, T, H, V), g, beta (B, T, H), the kept workspace (see
// Workspace), d_out (B, T, H, V) and d_final_state (B * H, K, V, contiguous): one floating dtype;
// inputs and d_out with any strides. The gradients come back in that dtype, laid out as the inputs.
std::vector<at::Tensor> backward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &g,
                                 const at::Tensor &beta, double scale, const at::Tensor &states,
                                 const at::Tensor &v_new, const at::Tensor &w, const at::Tensor &inverse,
                                 const at::Tensor &d_out, const at::Tensor &d_final_state) {
  const char *op = "gated_delta_rule_backward";
  TORCH_CHECK_VALUE(inverse.dim() == 4, op, ": inverse must be (N, B * H, C, C), got ", inverse.sizes());
  const int64_t chunk = inverse.size(2);
  check_inputs(op, q, k, v, g, beta, chunk);
  const int64_t batch = k.size(0), length = k.size(1), heads = k.size(2), key_dim = k.size(3);
  const int64_t value_dim = v.size(3), n_chunks = (length + chunk - 1) / chunk, bh = batch * heads;
  check_tensor(op, "states", states, {n_chunks + 1, bh, key_dim, value_dim}, q);
  check_tensor(op, "v_new", v_new, {n_chunks, bh, chunk, value_dim}, q);
  check_tensor(op, "w", w, {n_chunks, bh, chunk, key_dim}, q);
  check_tensor(op, "inverse", inverse, {n_chunks, bh, chunk, chunk}, q);
  check_tensor(op, "d_out", d_out, {batch, length, heads, value_dim}, q);
  check_tensor(op, "d_final_state", d_final_state, {bh, key_dim, value_dim}, q);
  for (const at::Tensor *t : std::initializer_list<const at::Tensor *>{&states, &v_new, &w, &inverse, &d_final_state})
    TORCH_CHECK_VALUE(t->is_contiguous(), op, ": the workspace and d_final_state must be contiguous");
  // each gradient in its input's layout where that is dense: a view's gradient needs no copy
  at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v), dg = at::empty_like(g);
  at::Tensor d_beta = at::empty_like(beta), d_state = d_final_state.clone();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "gated_delta_rule_backward", [&] {
    const Workspace<scalar_t> kept = workspace_of<scalar_t>(states, v_new, w, inverse);
    for_each_head<HeadBackward<scalar_t>>(batch, heads, [&](auto &runner, int64_t b, int64_t h) {
      runner.run(head_slice<const scalar_t>(q, b, h), head_slice<const scalar_t>(k, b, h),
                 head_slice<const scalar_t>(v, b, h), head_slice<const scalar_t>(g, b, h),
                 head_slice<const scalar_t>(beta, b, h),
                 head_slice<const scalar_t>(d_out, b, h), length, static_cast<scalar_t>(scale), kept, b * heads + h,
                 d_state.data_ptr<scalar_t>() + (b * heads + h) * key_dim * value_dim, head_slice<scalar_t>(dq, b, h),
                 head_slice<scalar_t>(dk, b, h), head_slice<scalar_t>(dv, b, h),
                 head_slice<scalar_t>(dg, b, h), head_slice<scalar_t>(d_beta, b, h));
    }, chunk, key_dim, value_dim);
  });
  return {dq, dk, dv, dg, d_beta, d_state};
}

}  // namespace
}  // namespace layerzoo_gdr

TORCH_LIBRARY_IMPL(layerzoo, CPU, m) { m.impl("gated_delta_rule_backward", layerzoo_gdr::backward); }
