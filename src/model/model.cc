#include "model/model.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "tensor/matmul.h"

namespace tkv::model {

namespace {

// Rows of logits computed per output-matrix product when every position's
// logits are wanted: enough tokens to reuse each weight block several times,
// few enough that the buffer stays small (16 x 128K vocab = 8 MiB).
constexpr int kLogitsRows = 16;
// The FFN runs a chunk kFfnRows tokens at a time: its hidden activations
// (2 x rows x n_ff floats) are the largest scratch of a prefill, 32 MiB for
// a 512-token chunk of a 2048 x 8192 model, and 128 rows already reuse each
// weight block enough for the matmul to stay compute bound.
constexpr int kFfnRows = 128;

// out = in W^T for T tokens: matvec for one token (bandwidth bound, streams
// each row once), matmul for a chunk (each weight block reused T times).
void project(const WeightMatrix& w, const float* in, int T, float* out, ThreadPool& pool) {
  if (T == 1) {
    matvec(w, in, out, pool);
  } else {
    matmul(w, in, T, out, pool);
  }
}

}  // namespace

// Activations of one chunk of up to `ubatch` tokens, row-major, token-major.
struct Model::Scratch {
  int ubatch = 0;
  std::vector<float> x;                   // residual stream, ubatch x n_embd
  std::vector<float> xb;                  // normed input / block output, ubatch x n_embd
  std::vector<float> q;                   // ubatch x n_heads x head_dim
  std::vector<float> k, v;                // ubatch x n_kv_heads x head_dim
  std::vector<float> att;                 // attention output, ubatch x n_heads x head_dim
  std::vector<float> gate, up;            // min(ubatch, kFfnRows) x n_ff
  std::vector<float> logits;              // rows x n_vocab, grown on first use
  std::vector<float> rope_cos, rope_sin;  // ubatch x n_rot/2

  uint64_t bytes() const {
    size_t n = 0;
    for (const auto* b : {&x, &xb, &q, &k, &v, &att, &gate, &up, &logits, &rope_cos, &rope_sin}) {
      n += b->size();
    }
    return n * sizeof(float);
  }
};

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = gguf::GgufFile::open(path);
  m->config_ = ModelConfig::from_gguf(m->file_);
  m->weights_ = ModelWeights::bind(m->file_, m->config_);
  m->rope_ = ops::RopeFrequencies::make(m->config_, m->weights_.rope_freq_factors);
  m->fingerprint_ = compute_fingerprint(m->file_);
  return m;
}

kv::KvShape Model::kv_shape(int ctx) const {
  kv::KvShape s;
  s.n_layers = config_.n_layers;
  s.n_heads = config_.n_heads;
  s.n_kv_heads = config_.n_kv_heads;
  s.head_dim = config_.head_dim;
  s.max_tokens = ctx > 0 ? ctx : config_.n_ctx_train;
  return s;
}

uint64_t Model::scratch_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return scratch_ ? scratch_->bytes() : 0;
}

void Model::ensure_scratch(int ubatch) const {
  if (scratch_ && scratch_->ubatch >= ubatch) return;
  const ModelConfig& c = config_;
  auto s = std::make_unique<Scratch>();
  const size_t T = size_t(ubatch);
  s->ubatch = ubatch;
  s->x.resize(T * c.n_embd);
  s->xb.resize(T * std::max(c.n_embd, c.q_dim()));
  s->q.resize(T * c.q_dim());
  s->k.resize(T * c.kv_dim());
  s->v.resize(T * c.kv_dim());
  s->att.resize(T * c.q_dim());
  s->gate.resize(size_t(std::min(ubatch, kFfnRows)) * c.n_ff);
  s->up.resize(size_t(std::min(ubatch, kFfnRows)) * c.n_ff);
  s->rope_cos.resize(T * (c.n_rot / 2));
  s->rope_sin.resize(T * (c.n_rot / 2));
  scratch_ = std::move(s);
}

void Model::eval(kv::KvCache& cache, std::span<const int32_t> tokens, ThreadPool& pool,
                 const LogitsSink& sink, const EvalOptions& opts) const {
  const ModelConfig& c = config_;
  const kv::KvShape& shape = cache.shape();
  if (shape.n_layers != c.n_layers || shape.n_heads != c.n_heads ||
      shape.n_kv_heads != c.n_kv_heads || shape.head_dim != c.head_dim) {
    fail("KV cache shape (", shape.n_layers, " layers, ", shape.n_heads, "/", shape.n_kv_heads,
         " heads x ", shape.head_dim, ") does not match the model (", c.n_layers, " layers, ",
         c.n_heads, "/", c.n_kv_heads, " heads x ", c.head_dim, ")");
  }
  if (opts.ubatch < 1) fail("ubatch must be at least 1 (got ", opts.ubatch, ")");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab) {
      fail("token id ", tokens[i], " at index ", i, " is outside the vocabulary (", c.n_vocab,
           " tokens)");
    }
  }
  const int64_t pos0 = cache.n_tokens();
  const int64_t n = int64_t(tokens.size());
  if (pos0 + n > shape.max_tokens) {
    fail("context too long: ", n, " tokens at position ", pos0, " would need ", pos0 + n,
         " positions, the context holds ", shape.max_tokens, " (raise -c)");
  }
  if (n == 0) return;

  std::lock_guard<std::mutex> lock(mu_);
  const int ubatch = int(std::min<int64_t>(opts.ubatch, n));
  ensure_scratch(ubatch);
  for (int64_t done = 0; done < n; done += ubatch) {
    const int T = int(std::min<int64_t>(ubatch, n - done));
    const bool last_chunk = done + T == n;
    forward_chunk(cache, tokens.data() + done, T, pos0 + done, pool,
                  (opts.all_logits || last_chunk) ? sink : LogitsSink(), opts.all_logits);
    if (opts.on_chunk) opts.on_chunk(done + T, n);
  }
}

std::vector<float> Model::eval_last(kv::KvCache& cache, std::span<const int32_t> tokens,
                                    ThreadPool& pool, int ubatch) const {
  std::vector<float> out;
  EvalOptions opts;
  opts.ubatch = ubatch;
  eval(
      cache, tokens, pool,
      [&](int64_t, std::span<const float> logits) { out.assign(logits.begin(), logits.end()); },
      opts);
  return out;
}

// One chunk of T tokens at positions pos0 .. pos0+T-1 through the whole network.
void Model::forward_chunk(kv::KvCache& cache, const int32_t* tokens, int T, int64_t pos0,
                          ThreadPool& pool, const LogitsSink& sink, bool all_logits) const {
  Scratch& s = *scratch_;
  const int E = config_.n_embd;

  // Embedding lookup: row `token` of token_embd, dequantized.
  const WeightMatrix& emb = weights_.token_embd;
  for (int t = 0; t < T; ++t) {
    dequantize_row(emb.type, emb.row(tokens[t]), s.x.data() + size_t(t) * E, E);
  }
  // RoPE angles depend only on the position: once per chunk, not per layer.
  ops::rope_angles(rope_, pos0, T, s.rope_cos.data(), s.rope_sin.data());

  cache.begin_chunk(T);
  for (int l = 0; l < config_.n_layers; ++l) {
    attention_block(cache, l, T, pool);
    ffn_block(l, T, pool);
    check_finite(s.x.data(), int64_t(T) * E, l, "output");
  }
  cache.end_chunk();

  if (sink) emit_logits(T, pos0, pool, sink, all_logits);
}

// x += Attention(RMSNorm(x)) for layer l; K/V go into the cache, attention
// reads them back from it.
void Model::attention_block(kv::KvCache& cache, int l, int T, ThreadPool& pool) const {
  Scratch& s = *scratch_;
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[size_t(l)];
  const int E = c.n_embd, D = c.head_dim;

  ops::rmsnorm_rows(s.x.data(), L.attn_norm.data(), s.xb.data(), T, E, c.rms_eps, pool);
  project(L.wq, s.xb.data(), T, s.q.data(), pool);
  project(L.wk, s.xb.data(), T, s.k.data(), pool);
  project(L.wv, s.xb.data(), T, s.v.data(), pool);
  if (c.qkv_bias) {  // qwen2
    ops::add_bias_rows(s.q.data(), L.bq.data(), T, c.q_dim());
    ops::add_bias_rows(s.k.data(), L.bk.data(), T, c.kv_dim());
    ops::add_bias_rows(s.v.data(), L.bv.data(), T, c.kv_dim());
  }
  if (c.qk_norm) {  // qwen3: every head of q and k RMS-normalized on its own, before RoPE
    ops::rmsnorm_rows(s.q.data(), L.q_norm.data(), s.q.data(), int64_t(T) * c.n_heads, D, c.rms_eps,
                      pool);
    ops::rmsnorm_rows(s.k.data(), L.k_norm.data(), s.k.data(), int64_t(T) * c.n_kv_heads, D,
                      c.rms_eps, pool);
  }
  const size_t pairs = size_t(c.n_rot / 2);
  for (int t = 0; t < T; ++t) {
    const float* cos_row = s.rope_cos.data() + t * pairs;
    const float* sin_row = s.rope_sin.data() + t * pairs;
    ops::rope_apply(rope_, s.q.data() + size_t(t) * c.q_dim(), c.n_heads, D, cos_row, sin_row);
    ops::rope_apply(rope_, s.k.data() + size_t(t) * c.kv_dim(), c.n_kv_heads, D, cos_row, sin_row);
  }

  // Before the codecs see them: a NaN key is the weights' fault, not the cache's.
  check_finite(s.k.data(), int64_t(T) * c.kv_dim(), l, "keys");
  check_finite(s.v.data(), int64_t(T) * c.kv_dim(), l, "values");
  cache.write(l, s.k.data(), s.v.data(), &pool);
  cache.attend(l, s.q.data(), s.att.data(), pool);

  project(L.wo, s.att.data(), T, s.xb.data(), pool);
  ops::add(s.x.data(), s.xb.data(), int64_t(T) * E);
}

void Model::check_finite(const float* values, int64_t n, int layer, const char* what) const {
  // NaN and Inf are the values whose exponent bits are all ones. Counting
  // them is an integer sum (vectorizes even on baseline SSE2, no float
  // reduction order to keep): 0.14 us per 1024 values, against the
  // milliseconds of a layer's matrix work.
  uint32_t non_finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, values + i, sizeof b);
    non_finite += (b & 0x7f800000u) == 0x7f800000u;
  }
  if (non_finite == 0) return;
  fail(file_.path(), ": the model file looks corrupt: NaN or Inf in layer ", layer, " ", what,
       " (broken weights; re-download or re-convert the file)");
}

// x += W_down (silu(W_gate h) * W_up h), h = RMSNorm(x), for layer l.
void Model::ffn_block(int l, int T, ThreadPool& pool) const {
  Scratch& s = *scratch_;
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[size_t(l)];
  const int E = c.n_embd;

  ops::rmsnorm_rows(s.x.data(), L.ffn_norm.data(), s.xb.data(), T, E, c.rms_eps, pool);
  for (int t0 = 0; t0 < T; t0 += kFfnRows) {
    const int rows = std::min(kFfnRows, T - t0);
    float* h = s.xb.data() + size_t(t0) * E;  // normed input in, FFN output out
    project(L.w_gate, h, rows, s.gate.data(), pool);
    project(L.w_up, h, rows, s.up.data(), pool);
    const int64_t n_hidden = int64_t(rows) * c.n_ff;
    if (rows == 1) {
      ops::silu_mul(s.gate.data(), s.up.data(), n_hidden);
    } else {
      pool.parallel_for(n_hidden, 4096, [&](int64_t b, int64_t e, int) {
        ops::silu_mul(s.gate.data() + b, s.up.data() + b, e - b);
      });
    }
    project(L.w_down, s.gate.data(), rows, h, pool);
  }
  ops::add(s.x.data(), s.xb.data(), int64_t(T) * E);
}

// Final RMSNorm and output projection for the rows the caller wants: the
// last one, or all of them a few at a time.
void Model::emit_logits(int T, int64_t pos0, ThreadPool& pool, const LogitsSink& sink,
                        bool all_logits) const {
  Scratch& s = *scratch_;
  const ModelConfig& c = config_;
  const int E = c.n_embd;
  const size_t V = size_t(c.n_vocab);
  const int first = all_logits ? 0 : T - 1;
  const int rows = T - first;
  ops::rmsnorm_rows(s.x.data() + size_t(first) * E, weights_.output_norm.data(), s.xb.data(), rows,
                    E, c.rms_eps, pool);
  // Sized by the rows actually wanted: a prefill that only needs its last
  // token's logits never holds kLogitsRows x n_vocab floats.
  const size_t want = size_t(std::min(rows, kLogitsRows)) * V;
  if (s.logits.size() < want) s.logits.resize(want);
  for (int r0 = 0; r0 < rows; r0 += kLogitsRows) {
    const int g = std::min(kLogitsRows, rows - r0);
    project(weights_.output, s.xb.data() + size_t(r0) * E, g, s.logits.data(), pool);
    for (int i = 0; i < g; ++i) {
      sink(pos0 + first + r0 + i, std::span<const float>(s.logits.data() + i * V, V));
    }
  }
}

}  // namespace tkv::model
