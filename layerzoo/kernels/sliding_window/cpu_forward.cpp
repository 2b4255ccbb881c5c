// Sliding-window attention's forward on CPU, compiled: a block of queries per task, two BLAS gemms
// on only its band of keys (cpu_common.h), the softmax in between in cache.
//
// The PyTorch backend (chunkwise.py) gathers every chunk's keys into a copy, builds a mask and calls
// SDPA on the batch of chunks, whose CPU kernel takes the masked path; this reads q, k, v in place
// and writes each output row once. Also keeps the logsumexp of each row for the backward
// (cpu_backward.cpp), and declares both operators.

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "cpu_common.h"

namespace layerzoo_swa {
namespace {

// q (B, Tq, H, D); k, v (B, Tk, Hkv, D) as check_inputs says. Returns out (B, Tq, H, D) and the
// logsumexp of each row's scaled scores, lse (B, H, Tq), both contiguous in q's dtype.
std::vector<at::Tensor> forward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, int64_t window,
                                double scale, int64_t block) {
  check_inputs("sliding_window_forward", q, k, v, window, block);
  const int64_t batch = q.size(0), heads = q.size(2), dim = q.size(3), group = heads / k.size(2);
  const Bands bands{q.size(1), k.size(1), window, block};
  const int64_t n_blocks = bands.count();
  at::Tensor out = at::empty(q.sizes(), q.options()), lse = at::empty({batch, heads, q.size(1)}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "sliding_window_forward", [&] {
    using T = scalar_t;
    // blocks of one head are neighbours in the task order, so the keys they share stay in cache
    at::parallel_for(0, batch * heads * n_blocks, 1, [&](int64_t begin, int64_t end) {
      std::vector<T> scores(block * bands.max_keys()), inverse_sum(block);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / (heads * n_blocks), h = task / n_blocks % heads;
        const QueryBlock blk = bands.at(task % n_blocks);
        const auto q_rows = head_rows<const T>(q, b, h), k_rows = head_rows<const T>(k, b, h / group),
                   v_rows = head_rows<const T>(v, b, h / group);
        const auto out_rows = head_rows<T>(out, b, h);
        T *lse_row = lse.data_ptr<T>() + (b * heads + h) * bands.q_len + blk.first_query;
        T *s = scores.data();

        gemm<T>(false, true, blk.rows, blk.keys, dim, static_cast<T>(scale), q_rows.row(blk.first_query),
                q_rows.ld(), k_rows.row(blk.first_key), k_rows.ld(), 0, s, blk.keys);
        for (int r = 0; r < blk.rows; ++r) {
          T *row = s + r * blk.keys;
          const int lo = bands.lo(blk, r), hi = bands.hi(blk, r);
          const T top = *std::max_element(row + lo, row + hi + 1);
          exp_band(row, blk.keys, lo, hi, top);
          T sum = 0;
          for (int j = lo; j <= hi; ++j) sum += row[j];
          inverse_sum[r] = 1 / sum;
          lse_row[r] = top + std::log(sum);
        }
        // normalise the (rows, D) output rather than the (rows, keys) weights: fewer products
        T *o = out_rows.row(blk.first_query);
        gemm<T>(false, false, blk.rows, dim, blk.keys, 1, s, blk.keys, v_rows.row(blk.first_key), v_rows.ld(), 0, o,
                out_rows.ld());
        for (int r = 0; r < blk.rows; ++r)
          for (int64_t d = 0; d < dim; ++d) o[r * out_rows.stride + d] *= inverse_sum[r];
      }
    });
  });
  return {out, lse};
}

}  // namespace
}  // namespace layerzoo_swa

TORCH_LIBRARY_FRAGMENT(layerzoo, m) {
  m.def("sliding_window_forward(Tensor q, Tensor k, Tensor v, int window, float scale, int block) -> Tensor[]");
  m.def("sliding_window_backward(Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor d_out, int window, "
        "float scale, int block) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(layerzoo, CPU, m) { m.impl("sliding_window_forward", layerzoo_swa::forward); }
