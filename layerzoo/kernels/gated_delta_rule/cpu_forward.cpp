// The chunkwise gated delta rule's forward on CPU, compiled: one head per task, chunk by chunk.
//
// Same algorithm as chunk_forward.py (read its docstring first); what changes is the order of the
// work. The PyTorch forward runs each step for all heads and chunks of a group at once, as batched
// matmuls across both cores: every step waits for the slower core, and each chunk's matrices leave
// the cache between the steps that use them. Here each thread takes whole heads and walks their
// chunks in order, so all of a chunk's matrices (a few 10s of KiB) stay in L1/L2 from the input
// rows to the output rows, the matmuls are single-threaded BLAS calls with no synchronisation, and
// the inputs are read (with any strides) and the output written in their (B, T, H, D) layout, with
// no chunk-major copies. No maintained library has a CPU kernel for this (flash-linear-attention's are Triton,
// for GPUs), hence this file.
//
// Row-major throughout: a matrix is (pointer, rows, columns, row stride).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

// BLAS's Fortran gemm, which libtorch_cpu exports from the BLAS it is built with (MKL on x86).
extern "C" {
void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc);
void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b, const int *ldb,
            const double *beta, double *c, const int *ldc);
}

namespace {

void blas_gemm(const char *ta, const char *tb, const int *m, const int *n, const int *k, const float *alpha,
               const float *a, const int *lda, const float *b, const int *ldb, const float *beta, float *c,
               const int *ldc) {
  sgemm_(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void blas_gemm(const char *ta, const char *tb, const int *m, const int *n, const int *k, const double *alpha,
               const double *a, const int *lda, const double *b, const int *ldb, const double *beta, double *c,
               const int *ldc) {
  dgemm_(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Row-major c (m, n) = alpha * op(a) (m, k) @ op(b) (k, n) + beta * c, where op transposes when asked.
// BLAS is column-major, where a row-major matrix reads as its transpose: so it computes
// c^T = op(b)^T op(a)^T, with the operands swapped.
template <typename T>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha, const T *a, int lda, const T *b,
          int ldb, T beta, T *c, int ldc) {
  const char ta = transpose_a ? 'T' : 'N', tb = transpose_b ? 'T' : 'N';
  blas_gemm(&tb, &ta, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
}

// A (tokens, features) slice of a (B, T, H, D) tensor for one head, or a (tokens,) one of a
// (B, T, H) tensor: any strides, so views (a convolution's channel-major output) are read as they
// are: copying such a view to a contiguous tensor first costs more than half the forward.
template <typename T>
struct Strided {
  const T *data;
  int64_t token_stride, feature_stride;

  Strided from(int64_t token) const { return {data + token * token_stride, token_stride, feature_stride}; }
  T at(int64_t token, int64_t feature = 0) const { return data[token * token_stride + feature * feature_stride]; }
};

// Where the forward keeps what the backward needs, chunk-major as chunkwise.py's workspace:
// states (N + 1, BH, K, V), v_new (N, BH, C, V), w (N, BH, C, K), inverse (N, BH, C, C).
template <typename T>
struct Workspace {
  T *states, *v_new, *w, *inverse;
  int64_t heads;
};

template <typename T>
class HeadForward {
 public:
  HeadForward(int chunk, int key_dim, int value_dim)
      : C(chunk), K(key_dim), V(value_dim), gc(chunk), from_start(chunk), to_end(chunk), decay(chunk * chunk),
        q(chunk * key_dim), k(chunk * key_dim), v(chunk * value_dim), k_beta(chunk * key_dim),
        scaled(chunk * std::max(key_dim, value_dim)), a(chunk * chunk), inverse(chunk * chunk), w(chunk * key_dim),
        v_new(chunk * value_dim) {}

  // One head over all its `length` tokens. out points at its first output row, rows `out_stride`
  // apart. state (K, V) holds the entering state and is left holding the final one.
  void run(Strided<T> q_in, Strided<T> k_in, Strided<T> v_in, Strided<T> g_in, Strided<T> beta_in, int64_t length,
           T scale, T *out, int64_t out_stride, T *state, const Workspace<T> *keep, int64_t head) {
    for (int64_t first = 0, chunk = 0; first < length; first += C, ++chunk) {
      const int c = static_cast<int>(std::min<int64_t>(C, length - first));
      T *w_out = keep ? keep->w + (chunk * keep->heads + head) * C * K : w.data();
      T *v_new_out = keep ? keep->v_new + (chunk * keep->heads + head) * C * V : v_new.data();
      T *inverse_out = keep ? keep->inverse + (chunk * keep->heads + head) * C * C : inverse.data();
      if (keep) std::memcpy(keep->states + (chunk * keep->heads + head) * K * V, state, sizeof(T) * K * V);
      load(q_in.from(first), c, K, q.data());
      load(k_in.from(first), c, K, k.data());
      load(v_in.from(first), c, V, v.data());
      step(g_in.from(first), beta_in.from(first), c, scale, out + first * out_stride, static_cast<int>(out_stride),
           state, w_out, v_new_out, inverse_out);
      if (keep && c < C) pad(c, w_out, v_new_out, inverse_out);
    }
    if (keep) {
      const int64_t n_chunks = (length + C - 1) / C;
      std::memcpy(keep->states + (n_chunks * keep->heads + head) * K * V, state, sizeof(T) * K * V);
    }
  }

 private:
  // The chunk's c rows of a (tokens, features) input into a contiguous (c, width) buffer, walking
  // memory in order whichever of the two strides is the unit one.
  static void load(Strided<T> in, int c, int width, T *buffer) {
    if (in.feature_stride <= in.token_stride) {
      for (int i = 0; i < c; ++i)
        for (int d = 0; d < width; ++d) buffer[i * width + d] = in.at(i, d);
    } else {
      for (int d = 0; d < width; ++d)
        for (int i = 0; i < c; ++i) buffer[i * width + d] = in.at(i, d);
    }
  }

  // One chunk of c <= C tokens, its q, k, v loaded: writes its c output rows and w, v_new,
  // (I + A)^-1 (leading dimensions K, V, C), and moves the state past the chunk.
  void step(Strided<T> g, Strided<T> beta, int c, T scale, T *out, int ldo, T *state, T *w_out, T *v_new_out,
            T *inverse_out) {
    decays(g, c);
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) k_beta[i * K + d] = beta.at(i) * k[i * K + d];

    // A = strict_tril(beta_i L_ij k_i . k_j), then (I + A)^-1
    gemm<T>(false, true, c, c, K, 1, k_beta.data(), K, k.data(), K, 0, a.data(), C);
    mask(c, 1, false);
    unit_lower_inverse(c, inverse_out);

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
    mask(c, scale, true);
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) scaled[i * K + d] = scale * from_start[i] * q[i * K + d];
    gemm<T>(false, false, c, V, K, 1, scaled.data(), K, state, V, 0, out, ldo);
    gemm<T>(false, false, c, V, c, 1, a.data(), C, v_new_out, V, 1, out, ldo);

    // S <- exp(gc_last) S + (k exp(gc_last - gc))^T v_new
    for (int i = 0; i < c; ++i)
      for (int d = 0; d < K; ++d) k_beta[i * K + d] = to_end[i] * k[i * K + d];
    gemm<T>(true, false, K, V, c, 1, k_beta.data(), K, v_new_out, V, from_start[c - 1], state, V);
  }

  // The cumulative log decay gc, summed in double (see chunk_parts.decays for why), and from it
  // exp(gc), exp(gc_last - gc) and L[i, j] = exp(gc_i - gc_j) for j < i.
  void decays(Strided<T> g, int c) {
    double sum = 0;
    for (int i = 0; i < c; ++i) gc[i] = sum += static_cast<double>(g.at(i));
    for (int i = 0; i < c; ++i) {
      from_start[i] = static_cast<T>(std::exp(gc[i]));
      to_end[i] = static_cast<T>(std::exp(gc[c - 1] - gc[i]));
      for (int j = 0; j < i; ++j) decay[i * C + j] = std::exp(static_cast<T>(gc[i] - gc[j]));
    }
  }

  // a[i, j] *= factor * L[i, j] below the diagonal (and factor on it, with the diagonal), 0 above.
  void mask(int c, T factor, bool diagonal) {
    for (int i = 0; i < c; ++i) {
      T *row = a.data() + i * C;
      const T *decay_row = decay.data() + i * C;
      for (int j = 0; j < i; ++j) row[j] *= factor * decay_row[j];
      if (diagonal) row[i] *= factor;
      for (int j = diagonal ? i + 1 : i; j < c; ++j) row[j] = 0;
    }
  }

  // (I + A)^-1 of the strictly lower a (c, c) by forward substitution, row i from the rows above:
  // M_i = e_i - sum_{l < i} A_il M_l. Unit lower triangular; the upper triangle is written as 0.
  void unit_lower_inverse(int c, T *m) {
    for (int i = 0; i < c; ++i) {
      T *row = m + i * C;
      std::fill(row, row + c, T(0));
      row[i] = 1;
      for (int l = 0; l < i; ++l) {
        const T coefficient = a[i * C + l];
        const T *above = m + l * C;
        for (int j = 0; j <= l; ++j) row[j] -= coefficient * above[j];
      }
    }
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
  std::vector<double> gc;
  std::vector<T> from_start, to_end, decay, q, k, v, k_beta, scaled, a, inverse, w, v_new;
};

// One head's slice of a (B, T, H, D) tensor (or, with a feature stride of 0, of a (B, T, H) one).
template <typename T>
Strided<T> head_slice(const at::Tensor &t, int64_t b, int64_t h) {
  const T *data = t.data_ptr<T>() + b * t.stride(0) + h * t.stride(2);
  return {data, t.stride(1), t.dim() == 4 ? t.stride(3) : 0};
}

// q, k (B, T, H, K); v (B, T, H, V); g, beta (B, T, H): one floating dtype, any strides.
// state (B * H, K, V), contiguous, in that dtype: the entering state, overwritten with the final
// one. Returns the output (B, T, H, V) and, when `keep`, the workspace the backward reads.
std::vector<at::Tensor> forward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &g,
                                const at::Tensor &beta, double scale, at::Tensor state, int64_t chunk, bool keep) {
  for (const at::Tensor *t : std::initializer_list<const at::Tensor *>{&k, &v, &g, &beta, &state})
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "gated_delta_rule_forward: inputs must share one dtype");
  TORCH_CHECK(state.is_contiguous(), "gated_delta_rule_forward: state must be contiguous");
  const int64_t batch = k.size(0), length = k.size(1), heads = k.size(2), key_dim = k.size(3);
  const int64_t value_dim = v.size(3), n_chunks = (length + chunk - 1) / chunk;
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
    if (keep)
      ws = {workspace[0].data_ptr<scalar_t>(), workspace[1].data_ptr<scalar_t>(),
            workspace[2].data_ptr<scalar_t>(), workspace[3].data_ptr<scalar_t>(), batch * heads};
    // heads are independent: each task runs its heads start to end with its own scratch
    at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
      HeadForward<scalar_t> runner(chunk, key_dim, value_dim);
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / heads, h = bh % heads;
        runner.run(head_slice<scalar_t>(q, b, h), head_slice<scalar_t>(k, b, h), head_slice<scalar_t>(v, b, h),
                   head_slice<scalar_t>(g, b, h), head_slice<scalar_t>(beta, b, h), length,
                   static_cast<scalar_t>(scale), out.data_ptr<scalar_t>() + (b * length * heads + h) * value_dim,
                   heads * value_dim, state.data_ptr<scalar_t>() + bh * key_dim * value_dim, keep ? &ws : nullptr,
                   bh);
      }
    });
  });
  workspace.insert(workspace.begin(), out);
  return workspace;
}

}  // namespace

TORCH_LIBRARY(layerzoo, m) {
  m.def("gated_delta_rule_forward(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float scale, "
        "Tensor(a!) state, int chunk, bool keep) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(layerzoo, CPU, m) { m.impl("gated_delta_rule_forward", forward); }
