// Pieces of the reference forward (reference_forward.h) that its files
// share: double vectors, dense matrices dequantized with the scalar
// reference, RMSNorm (defined in reference_forward.cc); and the Gated
// DeltaNet layer of the Qwen3.5 hybrids (llama.cpp's qwen35 / qwen35moe),
// written out from the recurrence itself in double, one token at a time
// (reference_recurrent.cc). Test-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tkv::gguf {
class GgufFile;
}

namespace tkv::test::ref {

using Vec = std::vector<double>;

// A dense matrix, row-major: rows x cols.
struct Mat {
  int64_t rows = 0, cols = 0;
  Vec w;
  // > 0: the engine multiplies this matrix on the integer path, with its
  // activations quantized per block of this many values (mul does the same).
  int64_t act_block = 0;
  Vec mul(const Vec& x) const;  // W x
};

// A tensor [cols, rows] (or a vector [cols]: one row) as a matrix.
Mat load_mat(const gguf::GgufFile& f, const std::string& name);
Vec load_vec(const gguf::GgufFile& f, const std::string& name);
// x / sqrt(mean(x^2) + eps) * w
Vec rmsnorm(const Vec& x, const Vec& w, double eps);

inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// One Gated DeltaNet layer (blk.N.attn_qkv, attn_gate, ssm_*), its input
// the attention-normed hidden state, its output ssm_out's (before the
// residual add). It keeps its own state: the conv's last K-1 inputs and one
// S x S matrix per value head, zero at the start.
class DeltaNet {
 public:
  DeltaNet(const gguf::GgufFile& f, const std::string& arch, const std::string& prefix, double eps);
  Vec step(const Vec& h);
  void reset();

 private:
  Vec conv_silu(const Vec& mixed);
  int64_t K = 0, S = 0, G = 0, Hv = 0,
          C = 0;  // conv taps, state size, q/k heads, v heads, channels
  double eps = 0;
  Mat qkv, z, beta, alpha, out;
  Vec conv_w, dt_bias, a, norm;
  std::vector<Vec> inputs;  // the conv's last K-1 inputs, oldest first
  std::vector<Vec> M;       // per v head: M[i * S + c], key dim i, value dim c
};

}  // namespace tkv::test::ref
