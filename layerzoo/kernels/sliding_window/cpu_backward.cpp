// Sliding-window attention's backward on CPU, compiled: flash attention 2's, block by block.
//
// Each task takes whole query heads and walks their query blocks in order; per block it recomputes
// the weights from the scores and the forward's logsumexp (cheaper than keeping T * window of
// them), then five gemms on the block's band of keys (cpu_common.h):
//   P = exp(scale q k^T - lse), dv += P^T do, dP = do v^T, dS = P * (dP - rowsum(do * o)),
//   dq = scale dS k, dk += scale dS^T q.
// Blocks of one head overlap in keys, so dk and dv accumulate; a head per task keeps that free of
// races. With grouped kv heads each query head gets its own dk and dv, summed by the caller.

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "cpu_common.h"

namespace layerzoo_swa {
namespace {

// q, k, v as the forward took them; out (B, Tq, H, D) and lse (B, H, Tq) as it returned them;
// d_out (B, Tq, H, D) with unit feature stride. Returns dq (B, Tq, H, D) and dk, dv
// (B, Tk, H, D): per query head, zero for keys no query sees.
std::vector<at::Tensor> backward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &out,
                                 const at::Tensor &lse, const at::Tensor &d_out, int64_t window, double scale,
                                 int64_t block) {
  const char *op = "sliding_window_backward";
  check_inputs(op, q, k, v, window, block);
  const int64_t batch = q.size(0), heads = q.size(2), dim = q.size(3), group = heads / k.size(2);
  for (const at::Tensor *t : {&out, &d_out})
    TORCH_CHECK_VALUE(t->sizes() == q.sizes() && t->scalar_type() == q.scalar_type() && t->stride(3) == 1 &&
                          t->stride(1) >= dim, op, ": out and d_out must be like q with unit feature stride");
  TORCH_CHECK_VALUE(lse.sizes() == at::IntArrayRef({batch, heads, q.size(1)}) && lse.is_contiguous() &&
                        lse.scalar_type() == q.scalar_type(), op, ": lse must be the forward's (B, H, Tq)");
  const Bands bands{q.size(1), k.size(1), window, block};
  const int64_t n_blocks = bands.count();
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor dk = at::zeros({batch, k.size(1), heads, dim}, q.options()), dv = at::zeros_like(dk);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "sliding_window_backward", [&] {
    using T = scalar_t;
    const T alpha = static_cast<T>(scale);
    at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
      std::vector<T> weights(block * bands.max_keys()), d_scores(block * bands.max_keys()), delta(block);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / heads, h = task % heads;
        const auto q_rows = head_rows<const T>(q, b, h), k_rows = head_rows<const T>(k, b, h / group),
                   v_rows = head_rows<const T>(v, b, h / group), o_rows = head_rows<const T>(out, b, h),
                   do_rows = head_rows<const T>(d_out, b, h);
        const auto dq_rows = head_rows<T>(dq, b, h), dk_rows = head_rows<T>(dk, b, h), dv_rows = head_rows<T>(dv, b, h);
        const T *lse_head = lse.data_ptr<T>() + task * bands.q_len;
        for (int64_t index = 0; index < n_blocks; ++index) {
          const QueryBlock blk = bands.at(index);
          const int rows = blk.rows, keys = blk.keys;
          const T *q_blk = q_rows.row(blk.first_query), *do_blk = do_rows.row(blk.first_query);
          const T *k_blk = k_rows.row(blk.first_key), *v_blk = v_rows.row(blk.first_key);
          T *p = weights.data(), *ds = d_scores.data();

          gemm<T>(false, true, rows, keys, dim, alpha, q_blk, q_rows.ld(), k_blk, k_rows.ld(), 0, p, keys);
          for (int r = 0; r < rows; ++r) {
            exp_band(p + r * keys, keys, bands.lo(blk, r), bands.hi(blk, r), lse_head[blk.first_query + r]);
            const T *o = o_rows.row(blk.first_query + r), *g = do_blk + r * do_rows.stride;
            T sum = 0;
            for (int64_t d = 0; d < dim; ++d) sum += o[d] * g[d];
            delta[r] = sum;
          }
          gemm<T>(true, false, keys, dim, rows, 1, p, keys, do_blk, do_rows.ld(), 1, dv_rows.row(blk.first_key),
                  dv_rows.ld());
          gemm<T>(false, true, rows, keys, dim, 1, do_blk, do_rows.ld(), v_blk, v_rows.ld(), 0, ds, keys);
          // out of band p is 0, so dS is too
          for (int r = 0; r < rows; ++r)
            for (int j = 0; j < keys; ++j) ds[r * keys + j] = p[r * keys + j] * (ds[r * keys + j] - delta[r]);
          gemm<T>(false, false, rows, dim, keys, alpha, ds, keys, k_blk, k_rows.ld(), 0,
                  dq_rows.row(blk.first_query), dq_rows.ld());
          gemm<T>(true, false, keys, dim, rows, alpha, ds, keys, q_blk, q_rows.ld(), 1, dk_rows.row(blk.first_key),
                  dk_rows.ld());
        }
      }
    });
  });
  return {dq, dk, dv};
}

}  // namespace
}  // namespace layerzoo_swa

TORCH_LIBRARY_IMPL(layerzoo, CPU, m) { m.impl("sliding_window_backward", layerzoo_swa::backward); }
