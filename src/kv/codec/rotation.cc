// The layer rotation R, a function of (head_dim, seed) only, so pages written
// in one process decode identically in another (persistence).
//
// Power-of-two head_dim: two rounds of randomized Hadamard,
//   R = H D2 H D1 / d,   D1, D2 seeded random sign diagonals,
// H the (unnormalized, Sylvester) Walsh-Hadamard matrix. One round (H D1)
// maps a vector dominated by one channel -- the outlier channels of real
// keys -- to a flat vector of +-1/sqrt(d) entries, which sits between the
// 2- and 3-bit centroids (tq2 MSE 0.18 instead of 0.117); the second round
// turns that into sums of random signs, distributed like a Gaussian
// coordinate. Cost: two O(d log d) transforms.
// Otherwise: a seeded dense random orthogonal matrix (Gram-Schmidt of a
// Gaussian matrix).
#include <cmath>
#include <vector>

#include "common/error.h"
#include "kv/codec/codec.h"
#include "kv/codec/kernels.h"
#include "kv/codec/rng.h"

namespace tkv::kv {

namespace {

bool is_pow2(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

// Rows of a dim x dim Gaussian matrix (Box-Muller on a splitmix64 stream),
// orthonormalized by modified Gram-Schmidt, run twice for orthogonality to
// double precision. Row-major, rows are the rotated coordinates.
std::vector<float> dense_orthogonal(int dim, uint64_t seed) {
  SplitMix64 rng(seed ^ 0x6f7274686f676f6eull);  // "orthogon"
  std::vector<double> m(size_t(dim) * dim);
  for (double& v : m) v = rng.gaussian();
  for (int pass = 0; pass < 2; ++pass) {
    for (int r = 0; r < dim; ++r) {
      double* row = &m[size_t(r) * dim];
      for (int p = 0; p < r; ++p) {
        const double* prev = &m[size_t(p) * dim];
        double dot = 0;
        for (int i = 0; i < dim; ++i) dot += row[i] * prev[i];
        for (int i = 0; i < dim; ++i) row[i] -= dot * prev[i];
      }
      double nrm = 0;
      for (int i = 0; i < dim; ++i) nrm += row[i] * row[i];
      nrm = std::sqrt(nrm);
      TKV_CHECK(nrm > 1e-12);  // a Gaussian matrix is full rank with probability 1
      for (int i = 0; i < dim; ++i) row[i] /= nrm;
    }
  }
  return std::vector<float>(m.begin(), m.end());
}

// Scratch for in-place dense products without allocating in the hot path.
constexpr int kStackDim = 1024;

}  // namespace

Rotation::Rotation(int head_dim, uint64_t seed) : dim_(head_dim), seed_(seed) {
  if (head_dim < 2 || head_dim > 4096)
    fail("kv rotation: head_dim ", head_dim, " is outside the supported range 2..4096");
  if (is_pow2(head_dim)) {
    SplitMix64 rng(seed);
    // signs_ = [D1 | D2], each with one 1/sqrt(d) normalization folded in.
    signs_.resize(2 * size_t(head_dim));
    const float scale = 1.0f / std::sqrt(float(head_dim));
    for (float& s : signs_) s = (rng.next() >> 63) ? -scale : scale;
  } else {
    dense_ = dense_orthogonal(head_dim, seed);
    dense_t_.resize(dense_.size());
    for (int r = 0; r < head_dim; ++r)
      for (int c = 0; c < head_dim; ++c)
        dense_t_[size_t(c) * head_dim + r] = dense_[size_t(r) * head_dim + c];
  }
}

Rotation::~Rotation() = default;

namespace {
// out = sum_i in[i] * (row i of the d x d row-major matrix m); out may alias in.
void sum_of_scaled_rows(const float* m, const float* in, float* out, int d) {
  float stack[kStackDim];
  std::vector<float> heap;
  float* tmp = stack;
  if (d > kStackDim) {
    heap.resize(d);
    tmp = heap.data();
  }
  for (int r = 0; r < d; ++r) tmp[r] = 0;
  for (int i = 0; i < d; ++i) {
    const float* row = m + size_t(i) * d;
    const float xi = in[i];
    for (int r = 0; r < d; ++r) tmp[r] += row[r] * xi;
  }
  for (int r = 0; r < d; ++r) out[r] = tmp[r];
}
}  // namespace

// R = H D2 H D1 / d   (power of two), else the dense rows.
void Rotation::apply(const float* x, float* y) const {
  const int d = dim_;
  if (!signs_.empty()) {
    const float* d1 = signs_.data();
    const float* d2 = d1 + d;
    for (int i = 0; i < d; ++i) y[i] = x[i] * d1[i];
    kernels::fwht(y, d);
    for (int i = 0; i < d; ++i) y[i] *= d2[i];
    kernels::fwht(y, d);
    return;
  }
  // y = sum_i x_i * (column i of R) = sum_i x_i * (row i of R^T).
  sum_of_scaled_rows(dense_t_.data(), x, y, d);
}

// R^T = D1 H D2 H / d   (H is symmetric), else the dense transpose.
void Rotation::apply_transpose(const float* y, float* x) const {
  const int d = dim_;
  if (!signs_.empty()) {
    const float* d1 = signs_.data();
    const float* d2 = d1 + d;
    if (x != y)
      for (int i = 0; i < d; ++i) x[i] = y[i];
    kernels::fwht(x, d);
    for (int i = 0; i < d; ++i) x[i] *= d2[i];
    kernels::fwht(x, d);
    for (int i = 0; i < d; ++i) x[i] *= d1[i];
    return;
  }
  // x = sum_r y_r * (row r of R).
  sum_of_scaled_rows(dense_.data(), y, x, d);
}

}  // namespace tkv::kv
