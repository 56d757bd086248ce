// The end of the forward pass (model/forward.h): final RMSNorm and the
// output projection for the rows the items want.
#include <algorithm>
#include <cmath>

#include "common/vec_math.h"
#include "model/forward.h"

namespace tkv::model {

namespace {

// Rows of logits computed per output-matrix product when every position's
// logits are wanted: enough tokens to reuse each weight block several times,
// few enough that the buffer stays small (16 x 128K vocab = 8 MiB).
constexpr int kLogitsRows = 16;

}  // namespace

// The last row of each kLast item and every row of each kAll item, gathered
// (exact rows first) and projected kLogitsRows at a time.
void Forward::emit_logits(const BatchLogitsSink& sink) {
  const int E = c_.n_embd;
  const size_t V = size_t(c_.n_vocab);
  struct Wanted {
    size_t item;
    int row;  // in x
    int64_t position;
    bool exact;
    int slot;  // in last_logits_, or -1
  };
  std::vector<Wanted> wanted;
  int n_last = 0;
  for (int pass = 0; pass < 2; ++pass) {  // exact rows first
    for (const auto& live : ctx_.live_) {
      const Logits want = items_[live.index].logits;
      if (want == Logits::kNone) continue;
      const bool last = want == Logits::kLast;
      const bool exact = last || live.exact;
      if (exact != (pass == 0)) continue;
      const int first = last ? live.n_rows - 1 : 0;
      for (int t = first; t < live.n_rows; ++t) {
        wanted.push_back({live.index, live.row0 + t, live.pos0 + t, exact, last ? n_last++ : -1});
      }
    }
  }
  if (wanted.empty()) return;
  ctx_.n_vocab_ = c_.n_vocab;
  if (ctx_.last_logits_.size() < size_t(n_last) * V) ctx_.last_logits_.resize(size_t(n_last) * V);
  // Sized by the rows actually wanted: a prefill that only needs its last
  // token's logits never holds kLogitsRows x n_vocab floats.
  const size_t want_floats = size_t(std::min<size_t>(wanted.size(), kLogitsRows)) * V;
  if (ctx_.logits_.size() < want_floats) ctx_.logits_.resize(want_floats);

  // Gather the wanted rows' final norms into xb (wanted.size() <= rows).
  const ModelWeights& w = m_.weights_;
  for (size_t i = 0; i < wanted.size(); ++i) {
    ops::rmsnorm(ctx_.x_.data() + size_t(wanted[i].row) * E, w.output_norm.data(),
                 ctx_.xb_.data() + i * E, E, c_.rms_eps);
  }
  for (size_t r0 = 0; r0 < wanted.size();) {
    const bool exact = wanted[r0].exact;
    size_t g = 1;
    while (g < size_t(kLogitsRows) && r0 + g < wanted.size() && wanted[r0 + g].exact == exact) ++g;
    product(w.output, ctx_.xb_.data() + r0 * E, int(g), ctx_.logits_.data(), exact, pool_);
    if (c_.final_softcap > 0.0f)  // gemma 2/3: c tanh(logits / c)
      soft_cap(ctx_.logits_.data(), g * V, c_.final_softcap);
    for (size_t i = 0; i < g; ++i) {
      const Wanted& row = wanted[r0 + i];
      const std::span<const float> logits(ctx_.logits_.data() + i * V, V);
      if (row.slot >= 0) {
        std::copy(logits.begin(), logits.end(), ctx_.last_logits_.begin() + size_t(row.slot) * V);
        ctx_.logits_slot_[row.item] = row.slot;
      }
      if (sink) sink(row.item, row.position, logits);
    }
    r0 += g;
  }
}

}  // namespace tkv::model
