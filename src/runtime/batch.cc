#include "runtime/batch.h"

#include <algorithm>
#include <set>

#include "common/error.h"

namespace tkv::runtime {

std::vector<model::ItemStatus> feed_batch(const model::Model& model, model::ExecutionContext& ctx,
                                          std::span<const BatchFeed> items, ThreadPool& pool,
                                          int ubatch) {
  TKV_CHECK(ubatch >= 1);
  std::vector<model::ItemStatus> status(items.size());
  std::vector<size_t> done(items.size(), 0);
  std::vector<bool> active(items.size(), false);
  std::set<const InferenceSession*> seen;
  auto refuse = [&](size_t i, const std::string& why) {
    status[i].code = model::ItemStatus::Code::kInvalid;
    status[i].message = why;
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchFeed& f = items[i];
    if (!f.session)
      refuse(i, "no sequence");
    else if (&f.session->model() != &model)
      refuse(i, "a sequence of another model");
    else if (!seen.insert(f.session).second)
      refuse(i, "a sequence appears twice in the batch");
    else if (int64_t(f.tokens.size()) > f.session->room())
      refuse(i, str("context full: ", f.session->cache().n_tokens(), " + ", f.tokens.size(),
                    " tokens > ", f.session->context_size()));
    else
      active[i] = !f.tokens.empty();
  }
  std::vector<model::BatchItem> batch;
  std::vector<size_t> index;  // batch position -> item
  while (std::find(active.begin(), active.end(), true) != active.end()) {
    batch.clear();
    index.clear();
    for (size_t i = 0; i < items.size(); ++i) {
      if (!active[i]) continue;
      const std::span<const int32_t> rest = items[i].tokens.subspan(done[i]);
      const size_t n = std::min(rest.size(), size_t(ubatch));
      batch.push_back({.sequence = &items[i].session->cache(),
                       .tokens = rest.first(n),
                       .logits = n == rest.size() ? model::Logits::kLast : model::Logits::kNone});
      index.push_back(i);
    }
    const std::vector<model::ItemStatus> round = model.eval_batch(ctx, batch, pool);
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t i = index[b];
      if (!round[b].ok()) {
        status[i] = round[b];
        active[i] = false;
        // The disk tier failed the step part-way: eval_batch cleared the
        // sequence, and the session forgets its history with it.
        if (round[b].code == model::ItemStatus::Code::kSpillError) items[i].session->clear();
        continue;
      }
      const bool last = batch[b].logits == model::Logits::kLast;
      items[i].session->record_fed(batch[b].tokens,
                                   last ? ctx.logits(b) : std::span<const float>());
      done[i] += batch[b].tokens.size();
      if (last) active[i] = false;
    }
  }
  return status;
}

}  // namespace tkv::runtime
