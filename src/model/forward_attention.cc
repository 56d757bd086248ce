// The attention half of a layer (model/forward.h): one function per
// attention kind (layer_spec.h), then the output projection.
#include <algorithm>
#include <cmath>

#include "model/forward.h"

namespace tkv::model {

// x += attention(RMSNorm(x)) Wo for layer l, per its attention kind. On
// the last layer, only the rows whose logits are wanted go on past the
// attention itself.
void Forward::attention_layer(int l) {
  switch (c_.layers[size_t(l)].attention.kind) {
    case AttentionKind::Full:
    case AttentionKind::Window:    // the sequence's layer knows its window (kv::KvLayerShape)
    case AttentionKind::SharedKv:  // queries only, over the source layer's K/V
      full_attention(l);
      break;
    case AttentionKind::Recurrent:
      recurrent_layer(l);
      break;
  }
  if (l == c_.n_layers - 1) keep_logit_rows();
  attention_output(l);
}

// Causal attention over the sequence (a window layer's over its window):
// each item's K/V go into its sequence, and its queries attend over that
// sequence's pages.
void Forward::full_attention(int l) {
  qkv_rows(l);
  attend_items(l, ctx_.q_.data(), ctx_.k_.data(), ctx_.v_.data());
  if (c_.layers[size_t(l)].attention.output_gate) gate_output(l);
}

// qwen35: the Q projection holds per head k_dim queries then k_dim gate
// values. The gates go to attn_gate_ and the queries close up in q_ (each
// moves only towards the front, so in place).
void Forward::split_output_gate(int l) {
  const AttentionSpec& at = c_.layers[size_t(l)].attention;
  const size_t D = size_t(at.k_dim), H = size_t(at.n_heads);
  float* q = ctx_.q_.data();
  float* gate = ctx_.attn_gate_.data();
  for (size_t t = 0; t < size_t(n_rows_); ++t) {
    for (size_t h = 0; h < H; ++h) {
      const float* src = q + (t * H + h) * 2 * D;
      std::copy_n(src + D, D, gate + (t * H + h) * D);
      std::copy(src, src + D, q + (t * H + h) * D);
    }
  }
}

// att *= sigmoid(gate), element by element (the gate has the output's shape).
void Forward::gate_output(int l) {
  const AttentionSpec& at = c_.layers[size_t(l)].attention;
  const int64_t n = int64_t(n_rows_) * at.out_width();
  float* att = ctx_.att_.data();
  const float* gate = ctx_.attn_gate_.data();
  for (int64_t i = 0; i < n; ++i) att[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

// k and v of every row from the normed rows in xb_: times Wk and Wv (V is
// K where the layer has no Wv), biases, K heads RMS-normed (qk_norm), V
// heads RMS-normed without a weight (v_norm). RoPE comes after (qkv_rows).
void Forward::kv_rows(int l) {
  const AttentionSpec& at = c_.layers[size_t(l)].attention;
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const int T = n_rows_;
  float* k = ctx_.k_.data();
  float* v = ctx_.v_.data();
  project(L.wk, ctx_.xb_.data(), n_exact_, T, k, pool_);
  if (at.v_from_k) {
    std::copy_n(k, size_t(T) * at.k_width(), v);
  } else {
    project(L.wv, ctx_.xb_.data(), n_exact_, T, v, pool_);
  }
  if (at.qkv_bias) {  // qwen2
    ops::add_bias_rows(k, L.bk.data(), T, at.k_width());
    ops::add_bias_rows(v, L.bv.data(), T, at.v_width());
  }
  if (at.qk_norm)
    ops::rmsnorm_rows(k, L.k_norm.data(), k, int64_t(T) * at.n_kv_heads, at.k_dim, c_.rms_eps,
                      pool_);
  if (at.v_norm)
    ops::rmsnorm_rows(v, nullptr, v, int64_t(T) * at.n_kv_heads, at.v_dim, c_.rms_eps, pool_);
}

// q, k, v of every row: RMSNorm(x) times Wq, Wk, Wv (+ biases), each Q and
// K head RMS-normalized (qk_norm), then RoPE at each row's position. A
// KV-shared layer makes queries only.
void Forward::qkv_rows(int l) {
  const AttentionSpec& at = c_.layers[size_t(l)].attention;
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const int T = n_rows_;
  const bool own_kv = at.kind != AttentionKind::SharedKv;
  float* q = ctx_.q_.data();
  float* k = ctx_.k_.data();
  ops::rmsnorm_rows(ctx_.x_.data(), L.attn_norm.data(), ctx_.xb_.data(), T, c_.n_embd, c_.rms_eps,
                    pool_);
  project(L.wq, ctx_.xb_.data(), n_exact_, T, q, pool_);
  if (at.qkv_bias) ops::add_bias_rows(q, L.bq.data(), T, at.q_width());
  if (own_kv) kv_rows(l);
  if (at.output_gate) split_output_gate(l);
  const int qw = at.query_width();
  if (at.qk_norm)  // qwen3: every head of q (and k) RMS-normalized on its own, before RoPE
    ops::rmsnorm_rows(q, L.q_norm.data(), q, int64_t(T) * at.n_heads, at.k_dim, c_.rms_eps, pool_);
  const int r = m_.layer_rope_[size_t(l)];
  const ops::RopeFrequencies& rope = m_.ropes_[size_t(r)];
  const size_t pairs = size_t(rope.n_rot / 2);
  const size_t table = size_t(batch_rows_) * m_.rope_offsets_[size_t(r)];
  for (int t = 0; t < T; ++t) {
    const float* cos_row = ctx_.rope_cos_.data() + table + t * pairs;
    const float* sin_row = ctx_.rope_sin_.data() + table + t * pairs;
    ops::rope_apply(rope, q + size_t(t) * qw, at.n_heads, at.k_dim, cos_row, sin_row);
    if (own_kv)
      ops::rope_apply(rope, k + size_t(t) * at.k_width(), at.n_kv_heads, at.k_dim, cos_row,
                      sin_row);
  }
  // A set score scale s (gemma) scales the queries, as llama.cpp does, by
  // s sqrt(k_dim): the cache scores q.k / sqrt(k_dim).
  const float default_scale = 1.0f / std::sqrt(float(at.k_dim));
  if (at.scale != 0.0f && at.scale != default_scale) {
    const float f = at.scale * std::sqrt(float(at.k_dim));
    float* end = q + size_t(T) * qw;
    for (float* p = q; p != end; ++p) *p *= f;
  }
}

// Each item's K/V rows go into its sequence (layer l) and its queries
// attend over that sequence; the result lands in att_. A KV-shared layer
// writes nothing and attends over its source layer's K/V; a layer that
// later layers read stays open for them (KvCache::attend).
void Forward::attend_items(int l, const float* q, const float* k, const float* v) {
  const AttentionSpec& at = c_.layers[size_t(l)].attention;
  const float* sinks = at.sink ? m_.weights_.layers[size_t(l)].sinks.data() : nullptr;
  const int kv_layer = m_.cache_index_[size_t(l)];
  const bool own_kv = at.kind != AttentionKind::SharedKv;
  const bool more_readers = m_.last_reader_[size_t(kv_layer)] != l;
  const int qw = at.query_width();
  // Before the codecs see them: a NaN key is the weights' fault, not the cache's.
  if (own_kv) {
    check_finite(k, int64_t(n_rows_) * at.k_width(), l, "keys");
    check_finite(v, int64_t(n_rows_) * at.v_width(), l, "values");
  }
  each_item_with_memory(
      [&](const LiveItem& live) {
        kv::KvCache& seq = *items_[live.index].sequence;
        const size_t r = size_t(live.row0);
        float* out = ctx_.att_.data() + r * at.out_width();
        if (own_kv) seq.write(kv_layer, k + r * at.k_width(), v + r * at.v_width(), &pool_);
        const kv::AttendOptions options{
            .sinks = sinks, .softcap = at.softcap, .more_readers = more_readers};
        if (ctx_.sequence_scratch_) {
          seq.attend(kv_layer, q + r * qw, out, pool_, options);
        } else {
          seq.attend(kv_layer, q + r * qw, out, pool_, ctx_.attention_, options);
        }
      },
      ctx_.att_.data(), at.out_width());
}

void Forward::each_item_with_memory(const std::function<void(const LiveItem&)>& work, float* out,
                                    int width) {
  std::vector<size_t> dropped;  // items (caller's indexes) that failed in this layer
  for (const auto& live : ctx_.live_) {
    try {
      work(live);
      continue;
    } catch (const kv::KvSpillError& e) {
      status_[live.index] = failed_status(ItemStatus::Code::kSpillError, e);
    } catch (const kv::KvBudgetExceeded& e) {
      status_[live.index] = failed_status(ItemStatus::Code::kSpillError, e);
    } catch (const kv::KvOutOfMemory& e) {
      status_[live.index] = failed_status(ItemStatus::Code::kSpillError, e);
    }
    items_[live.index].sequence->abandon_chunk();
    float* rows = out + size_t(live.row0) * size_t(width);
    std::fill(rows, rows + size_t(live.n_rows) * size_t(width), 0.0f);
    dropped.push_back(live.index);
  }
  std::erase_if(ctx_.live_, [&](const LiveItem& li) {
    return std::find(dropped.begin(), dropped.end(), li.index) != dropped.end();
  });
}

// Past the last layer's attention only the rows whose logits are wanted
// matter: every row's K/V are in its sequence by now, and nothing else of
// a row reaches the cache or the logits. So the last layer's output
// projection and FFN, ~1/n_layers of a prefill's work, run only for the last
// row of each kLast item and every row of each kAll item (none of a kNone
// chunk). The kept rows move to the front of x_ and att_ (exact items' first,
// as before) and each item's LiveItem shrinks to them; their kernels are
// their item's (product()), whose per-row results do not depend on how many
// rows a call has, so the logits are the bits the whole rows would give.
void Forward::keep_logit_rows() {
  const size_t E = size_t(c_.n_embd);
  const size_t O = size_t(c_.layers.back().attention.out_width());
  int rows = 0, exact = 0;
  for (auto& live : ctx_.live_) {
    const Logits want = items_[live.index].logits;
    const int first = want == Logits::kAll    ? 0
                      : want == Logits::kLast ? live.n_rows - 1
                                              : live.n_rows;
    const int kept = live.n_rows - first;
    // Rows only move towards the front (std::copy allows a destination
    // before its source); rows already in place stay.
    const size_t from = size_t(live.row0 + first);
    if (from != size_t(rows)) {
      std::copy_n(ctx_.x_.data() + from * E, size_t(kept) * E, ctx_.x_.data() + size_t(rows) * E);
      std::copy_n(ctx_.att_.data() + from * O, size_t(kept) * O,
                  ctx_.att_.data() + size_t(rows) * O);
    }
    live.row0 = rows;
    live.pos0 += first;
    live.tok0 += first;
    live.n_rows = kept;
    rows += kept;
    if (live.exact) exact = rows;
  }
  n_exact_ = exact;
  n_rows_ = rows;
}

// x += att Wo (+ bias) for layer l (att: the attention's output, n_heads x
// v_dim per row), RMS-normed first where the layer has a post norm.
void Forward::attention_output(int l) {
  const AttentionSpec& at = c_.layers[size_t(l)].attention;
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const int E = c_.n_embd;
  float* y = ctx_.xb_.data();
  project(L.wo, ctx_.att_.data(), n_exact_, n_rows_, y, pool_);
  if (at.out_bias) ops::add_bias_rows(y, L.bo.data(), n_rows_, E);
  if (at.post_norm) ops::rmsnorm_rows(y, L.attn_post_norm.data(), y, n_rows_, E, c_.rms_eps, pool_);
  ops::add(ctx_.x_.data(), y, int64_t(n_rows_) * E);
}

}  // namespace tkv::model
