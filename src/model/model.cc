#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>

#include "common/error.h"
#include "common/mapped_file.h"
#include "common/sys_info.h"
#include "model/forward.h"
#include "tensor/matmul.h"

namespace tkv::model {

namespace {

// fn(matrix) for each weight matrix once: token_embd, output unless tied
// to it (the same bytes), each layer's seven. Weights: ModelWeights, const
// or not.
template <class Weights, class Fn>
void for_each_distinct_matrix(Weights& w, bool tied_output, Fn fn) {
  fn(w.token_embd);
  if (!tied_output) fn(w.output);
  for (auto* m : {&w.per_layer_embd, &w.per_layer_proj})
    if (m->rows > 0) fn(*m);
  for (auto& L : w.layers)
    for (auto* m : L.matrices()) fn(*m);
}

}  // namespace

Model::~Model() = default;

const char* weight_memory_name(WeightMemory memory) {
  switch (memory) {
    case WeightMemory::kMap:
      return "map";
    case WeightMemory::kCopy:
      return "copy";
    case WeightMemory::kAuto:
      break;
  }
  return "auto";
}

std::optional<WeightMemory> parse_weight_memory(std::string_view name) {
  for (WeightMemory m : {WeightMemory::kAuto, WeightMemory::kMap, WeightMemory::kCopy})
    if (name == weight_memory_name(m)) return m;
  return std::nullopt;
}

FileMemory choose_file_memory(WeightMemory want, uint64_t file_bytes, bool thp,
                              uint64_t available) {
  switch (want) {
    case WeightMemory::kMap:
      return FileMemory::kMap;
    case WeightMemory::kCopy:
      return FileMemory::kCopy;
    case WeightMemory::kAuto:
      break;
  }
  constexpr uint64_t kMinCopyBytes = uint64_t(64) << 20;
  const bool fits = available > 0 && file_bytes <= available / 4 * 3;
  return thp && fits && file_bytes >= kMinCopyBytes ? FileMemory::kCopy : FileMemory::kMap;
}

std::unique_ptr<Model> Model::load(const std::string& path, WeightMemory memory) {
  std::unique_ptr<Model> m(new Model());
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  const FileMemory how =
      choose_file_memory(memory, ec ? 0 : uint64_t(bytes), transparent_huge_pages_available(),
                         available_memory_bytes());
  m->file_ = gguf::GgufFile::open(path, how);
  m->config_ = ModelConfig::from_gguf(m->file_);
  m->weights_ = ModelWeights::bind(m->file_, m->config_);
  if (how == FileMemory::kCopy) m->reorder_weights();
  m->make_ropes();
  m->index_memory();
  m->kv_shape_ = m->layer_shapes();
  m->fingerprint_ = compute_fingerprint(m->file_);
  return m;
}

void Model::reorder_weights() {
  MappedFile& copy = *file_.mapping();
  // Every core (the load is a one-off; ~0.5 s for 2.3 GiB on one core).
  ThreadPool pool(int(std::max(1u, std::thread::hardware_concurrency())));
  copy.rewrite([&](uint8_t* bytes) {
    for_each_distinct_matrix(weights_, config_.tied_output, [&](WeightMatrix& w) {
      if (row_blocks_pay_off(w)) w = to_row_blocks(w, bytes + (w.data - copy.data()), pool);
    });
  });
  if (config_.tied_output) weights_.output = weights_.token_embd;
}

int Model::row_block_matrices() const {
  int n = 0;
  for_each_distinct_matrix(weights_, config_.tied_output, [&](const WeightMatrix& w) {
    n += w.layout == RowLayout::kRowBlocks16 ? 1 : 0;
  });
  return n;
}

std::string Model::describe_weights() const {
  std::string s = describe(file_memory());
  if (row_block_matrices() > 0) s += ", F16 matrices as row blocks";
  return s;
}

void Model::fault_in_weights(const std::atomic<bool>* stop) const {
  if (file_memory() == FileMemory::kCopy) return;  // read at load
  // Pieces of 16 MiB: a stop waits at most for one (~20 ms from the page
  // cache on a VM that traps each first touch, ~0.1 s from a fast disk).
  constexpr size_t kPiece = size_t(16) << 20;
  const auto stopped = [&] { return stop != nullptr && stop->load(std::memory_order_relaxed); };
  auto matrix = [&](const WeightMatrix& w) {
    const size_t bytes = w.total_bytes();
    for (size_t at = 0; at < bytes && !stopped(); at += kPiece)
      fault_in(w.data + at, std::min(kPiece, bytes - at));
  };
  for (const LayerWeights& L : weights_.layers)
    for (const WeightMatrix* w : L.matrices()) matrix(*w);
  matrix(weights_.output);
}

// cache_index_ and last_reader_: a layer's index among the attention layers
// with K/V of their own or among the recurrent ones; a KV-shared layer
// takes its source's.
void Model::index_memory() {
  int attention = 0, recurrent = 0;
  for (int l = 0; l < config_.n_layers; ++l) {
    const AttentionSpec& at = config_.layers[size_t(l)].attention;
    if (at.kind == AttentionKind::Recurrent) {
      cache_index_.push_back(recurrent++);
    } else if (at.kind == AttentionKind::SharedKv) {
      cache_index_.push_back(cache_index_[size_t(at.kv_source)]);
      last_reader_[size_t(cache_index_.back())] = l;
    } else {
      cache_index_.push_back(attention++);
      last_reader_.push_back(l);
    }
  }
}

// One table of rotation speeds per distinct RoPE of the layers (today's
// models: one), and which each layer uses.
void Model::make_ropes() {
  std::vector<RopeSpec> specs;
  for (const LayerSpec& s : config_.layers) {
    const RopeSpec& r = s.attention.rope;
    auto it = std::find(specs.begin(), specs.end(), r);
    layer_rope_.push_back(int(it - specs.begin()));
    if (it != specs.end()) continue;
    specs.push_back(r);
    rope_offsets_.push_back(size_t(rope_pairs_));
    rope_pairs_ += r.n_rot / 2;
    ropes_.push_back(ops::RopeFrequencies::make(
        r, r.freq_factors ? std::span<const float>(weights_.rope_freq_factors)
                          : std::span<const float>()));
  }
}

namespace {
// What a sequence holds for a layer of this attention: its geometry and,
// for a window layer, the window its queries see.
kv::KvLayerShape kv_layer_of(const AttentionSpec& a) {
  return {a.n_heads, a.n_kv_heads, a.k_dim, a.v_dim,
          a.kind == AttentionKind::Window ? a.window : 0};
}
}  // namespace

kv::KvShape Model::kv_shape(int ctx) const {
  kv::KvShape shape = kv_shape_;
  shape.max_tokens = ctx > 0 ? ctx : config_.n_ctx_train;
  return shape;
}

kv::KvShape Model::layer_shapes() const {
  std::vector<kv::KvLayerShape> layers;
  std::vector<int64_t> recurrent;
  for (const LayerSpec& s : config_.layers) {
    if (s.attention.kind == AttentionKind::Recurrent) {
      recurrent.push_back(s.attention.state_floats());
    } else if (s.attention.kind != AttentionKind::SharedKv) {
      layers.push_back(kv_layer_of(s.attention));
    }
  }
  kv::KvShape shape = kv::KvShape::of_layers(std::move(layers), config_.n_ctx_train);
  shape.recurrent = std::move(recurrent);
  // Every layer alike: the short form (what session files of such a model hold).
  if (shape.uniform()) shape.layers.clear();
  return shape;
}

uint64_t Model::scratch_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return context_.activation_bytes() + activation_scratch_bytes();
}

void Model::check_item(const kv::KvCache& cache, std::span<const int32_t> tokens) const {
  const ModelConfig& c = config_;
  const kv::KvShape& shape = cache.shape();
  if (!shape.same_layers(kv_shape_)) {
    fail("KV cache shape (", shape.n_layers, " layers, ", shape.n_heads, "/", shape.n_kv_heads,
         " heads x ", shape.head_dim, ") does not match the model (", c.n_layers, " layers, ",
         c.n_heads, "/", c.n_kv_heads, " heads x ", c.head_dim, ")");
  }
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
         " positions, the context holds ", shape.max_tokens);
  }
}

void Model::eval(kv::KvCache& cache, std::span<const int32_t> tokens, ThreadPool& pool,
                 const LogitsSink& sink, const EvalOptions& opts) const {
  check_item(cache, tokens);
  if (opts.ubatch < 1) fail("ubatch must be at least 1 (got ", opts.ubatch, ")");
  const int64_t n = int64_t(tokens.size());
  if (n == 0) return;

  std::lock_guard<std::mutex> lock(mu_);
  context_.sequence_scratch_ = true;
  BatchLogitsSink batch_sink;
  if (sink) batch_sink = [&](size_t, int64_t pos, std::span<const float> l) { sink(pos, l); };
  for (int64_t done = 0; done < n; done += opts.ubatch) {
    const int64_t T = std::min<int64_t>(opts.ubatch, n - done);
    BatchItem item;
    item.sequence = &cache;
    item.tokens = tokens.subspan(size_t(done), size_t(T));
    item.logits = opts.all_logits           ? Logits::kAll
                  : (sink && done + T == n) ? Logits::kLast
                                            : Logits::kNone;
    const auto status =
        eval_batch(context_, std::span<const BatchItem>(&item, 1), pool, batch_sink);
    if (!status[0].ok()) std::rethrow_exception(status[0].error);
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

std::vector<ItemStatus> Model::eval_batch(ExecutionContext& ctx, std::span<const BatchItem> items,
                                          ThreadPool& pool, const BatchLogitsSink& sink) const {
  return Forward(*this, ctx, items, pool).run(sink);
}

}  // namespace tkv::model
