// The chunkwise mLSTM's forward on CPU, compiled: one (sequence, head) per task, chunk by chunk.
//
// Same algorithm as chunkwise.py (read its docstring first), in the order the gated delta rule's
// compiled forward found fastest: each thread walks its heads' chunks in order with all of a
// chunk's matrices (a few 10s of KiB) in cache, the matmuls are single-threaded BLAS calls, and
// the inputs are read with their strides and the output written in its (B, T, H, D) layout. The
// state [C, n, m] is carried from chunk to chunk in place, so none is stored per chunk. Per
// chunk of c tokens, four gemms: q k^T (c, c), its weighted scores times v, q C and the state
// update k^T v. n gets no ones column (which would make the gemms' widths Dv + 1, odd sizes BLAS
// runs slower): q . n is a row sum of the scores plus a dot product per token.
//
// The per-token log quantities (cumulative log forget gates, write weights, running maxima) are
// kept in double: their differences decide the weights, and they reach 1e3 under saturated gates.

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../common/native_common.h"

namespace layerzoo_mlstm {
namespace {

using namespace layerzoo_native;

// log(sigmoid(x)) without overflow for either sign; 0 at +inf (a token that forgets nothing).
inline double log_sigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

template <typename T>
class HeadForward {
 public:
  HeadForward(int chunk, int key_dim, int value_dim)
      : L(chunk), K(key_dim), V(value_dim), log_scale(-0.5 * std::log(static_cast<double>(key_dim))), q(chunk * key_dim),
        k(chunk * key_dim), v(chunk * value_dim), scores(chunk * chunk), q_dot_n(chunk), b(chunk), written(chunk),
        running_max(chunk) {}

  // One sequence of `length` tokens of one head. out points at its first output row, rows
  // `out_stride` apart. C (K, V), n (K), m hold the entering state and are left holding the final one.
  void run(Strided<const T> q_in, Strided<const T> k_in, Strided<const T> v_in, Strided<const T> i_in,
           Strided<const T> f_in, int64_t length, T eps, T *out, int64_t out_stride, T *C, T *n, T &m) {
    for (int64_t first = 0; first < length; first += L) {
      const int c = static_cast<int>(std::min<int64_t>(L, length - first));
      q_in.from(first).load(c, K, q.data());
      k_in.from(first).load(c, K, k.data());
      v_in.from(first).load(c, V, v.data());
      step(i_in.from(first), f_in.from(first), c, eps, out + first * out_stride, static_cast<int>(out_stride), C, n, m);
    }
  }

 private:
  // One chunk of c <= L tokens, its q, k, v loaded: writes its c output rows (leading dimension
  // ldo) and moves the state past the chunk.
  void step(Strided<const T> i, Strided<const T> f, int c, T eps, T *out, int ldo, T *C, T *n, T &m) {
    // b_t: summed log forget gates from the chunk start; written_j = i_j - b_j, token j's write
    // measured from there; running_max_t = max(m_in, written_{j <= t}), so m_t = b_t + running_max_t.
    const double m_in = m;
    double sum = 0, top = m_in;
    for (int t = 0; t < c; ++t) {
      b[t] = sum += log_sigmoid(static_cast<double>(f.at(t)));
      written[t] = static_cast<double>(i.at(t)) - sum;
      running_max[t] = top = std::max(top, written[t]);
    }

    // scores_tj = (q_t . k_j) exp(written_j - running_max_t) / sqrt(K) for j <= t, 0 above: each
    // weight <= 1 / sqrt(K), so none overflows. Their row sums are the in-chunk part of q . n.
    gemm<T>(false, true, c, c, K, 1, q.data(), K, k.data(), K, 0, scores.data(), L);
    for (int t = 0; t < c; ++t) {
      T *row = scores.data() + t * L;
      const double shift = log_scale - running_max[t];
      T row_sum = 0;
      for (int j = 0; j <= t; ++j) row_sum += row[j] *= static_cast<T>(std::exp(written[j] + shift));
      std::fill(row + t + 1, row + c, T(0));
      q_dot_n[t] = row_sum;
    }
    gemm<T>(false, false, c, V, c, 1, scores.data(), L, v.data(), V, 0, out, ldo);

    // The entering state's part: q_t exp(m_in - running_max_t) / sqrt(K) times [C, n].
    for (int t = 0; t < c; ++t) {
      const T factor = static_cast<T>(std::exp(m_in - running_max[t] + log_scale));
      T *row = q.data() + t * K;
      T dot = 0;
      for (int d = 0; d < K; ++d) dot += (row[d] *= factor) * n[d];
      q_dot_n[t] += dot;
    }
    gemm<T>(false, false, c, V, K, 1, q.data(), K, C, V, 1, out, ldo);

    // h_t = numerator_t / (max(|q_t . n_t|, exp(-m_t)) + eps)
    for (int t = 0; t < c; ++t) {
      const T floor = static_cast<T>(std::exp(-(b[t] + running_max[t])));
      const T inverse = T(1) / (std::max(std::abs(q_dot_n[t]), floor) + eps);
      T *row = out + static_cast<int64_t>(t) * ldo;
      for (int d = 0; d < V; ++d) row[d] *= inverse;
    }

    // The state leaving the chunk, in the frame of m_out = b_c + running_max_c:
    // C <- exp(m_in - running_max_c) C + (k_j exp(written_j - running_max_c))^T v, n likewise.
    top = running_max[c - 1];
    const T keep = static_cast<T>(std::exp(m_in - top));
    for (int d = 0; d < K; ++d) n[d] *= keep;
    for (int j = 0; j < c; ++j) {
      const T weight = static_cast<T>(std::exp(written[j] - top));
      T *row = k.data() + j * K;
      for (int d = 0; d < K; ++d) n[d] += row[d] *= weight;
    }
    gemm<T>(true, false, K, V, c, 1, k.data(), K, v.data(), V, keep, C, V);
    m = static_cast<T>(b[c - 1] + top);
  }

  const int L, K, V;
  const double log_scale;
  std::vector<T> q, k, v, scores, q_dot_n;
  std::vector<double> b, written, running_max;
};

// q, k (B, T, H, Dk); v (B, T, H, Dv); i, f (B, T, H): one floating dtype, any strides. offsets:
// the sequences of every batch row, [0, ..., T] (S + 1 of them); C (B * S, H, Dk, Dv), n
// (B * S, H, Dk), m (B * S, H): the state entering each sequence. Returns h (B, T, H, Dv) and the
// state leaving each sequence (C, n, m), all new and contiguous.
std::vector<at::Tensor> forward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &i,
                                const at::Tensor &f, const at::Tensor &C, const at::Tensor &n, const at::Tensor &m,
                                at::IntArrayRef offsets, int64_t chunk, double eps) {
  const char *op = "mlstm_forward";
  TORCH_CHECK_VALUE(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble, op,
                    ": inputs must be float32 or float64, got ", q.scalar_type());
  TORCH_CHECK_VALUE(q.dim() == 4 && v.dim() == 4, op, ": q and v must be 4-d (B, T, H, D), got ", q.sizes(), " and ",
                    v.sizes());
  const int64_t batch = q.size(0), length = q.size(1), heads = q.size(2), key_dim = q.size(3), value_dim = v.size(3);
  const int64_t sequences = static_cast<int64_t>(offsets.size()) - 1, rows = batch * sequences;
  check_tensor(op, "k", k, q.sizes(), q);
  check_tensor(op, "v", v, {batch, length, heads, value_dim}, q);
  check_tensor(op, "i", i, {batch, length, heads}, q);
  check_tensor(op, "f", f, {batch, length, heads}, q);
  check_tensor(op, "C", C, {rows, heads, key_dim, value_dim}, q);
  check_tensor(op, "n", n, {rows, heads, key_dim}, q);
  check_tensor(op, "m", m, {rows, heads}, q);
  TORCH_CHECK_VALUE(sequences >= 1 && offsets.front() == 0 && offsets.back() == length &&
                        std::is_sorted(offsets.begin(), offsets.end()),
                    op, ": offsets must rise from 0 to T = ", length, ", got ", offsets);
  const int64_t limit = std::numeric_limits<int>::max();
  TORCH_CHECK_VALUE(key_dim >= 1 && key_dim <= limit && value_dim >= 1 && value_dim <= limit, op,
                    ": head dims must be in [1, ", limit, "], got Dk = ", key_dim, " and Dv = ", value_dim);
  TORCH_CHECK_VALUE(chunk >= 1 && chunk <= limit, op, ": chunk must be in [1, ", limit, "], got ", chunk);

  at::Tensor out = at::empty({batch, length, heads, value_dim}, v.options());
  at::Tensor C_out = C.clone(at::MemoryFormat::Contiguous), n_out = n.clone(at::MemoryFormat::Contiguous),
             m_out = m.clone(at::MemoryFormat::Contiguous);
  const int longest = static_cast<int>(std::min<int64_t>(chunk, std::max<int64_t>(length, 1)));
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "mlstm_forward", [&] {
    scalar_t *C_data = C_out.data_ptr<scalar_t>(), *n_data = n_out.data_ptr<scalar_t>(),
             *m_data = m_out.data_ptr<scalar_t>(), *out_data = out.data_ptr<scalar_t>();
    // (sequence, head) pairs are independent: each task runs its own start to end with its own scratch
    at::parallel_for(0, rows * heads, 1, [&](int64_t begin, int64_t end) {
      HeadForward<scalar_t> runner(longest, static_cast<int>(key_dim), static_cast<int>(value_dim));
      for (int64_t task = begin; task < end; ++task) {
        const int64_t row = task / heads, h = task % heads, b = row / sequences, s = row % sequences;
        const int64_t first = offsets[s];
        auto slice = [&](const at::Tensor &t) { return head_slice<const scalar_t>(t, b, h).from(first); };
        runner.run(slice(q), slice(k), slice(v), slice(i), slice(f), offsets[s + 1] - first, static_cast<scalar_t>(eps),
                   out_data + ((b * length + first) * heads + h) * value_dim, heads * value_dim,
                   C_data + task * key_dim * value_dim, n_data + task * key_dim, m_data[task]);
      }
    });
  });
  return {out, C_out, n_out, m_out};
}

}  // namespace
}  // namespace layerzoo_mlstm

TORCH_LIBRARY_FRAGMENT(layerzoo, m) {
  m.def("mlstm_forward(Tensor q, Tensor k, Tensor v, Tensor i, Tensor f, Tensor C, Tensor n, Tensor m, "
        "int[] offsets, int chunk, float eps) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(layerzoo, CPU, m) { m.impl("mlstm_forward", layerzoo_mlstm::forward); }
