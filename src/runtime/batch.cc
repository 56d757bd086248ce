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
  std::vector<bool> active(items.size(), false);
  std::set<const Sequence*> seen;
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
    else if (const std::string why = f.session->no_room_for(int64_t(f.tokens.size())); !why.empty())
      refuse(i, why);
    else
      active[i] = !f.tokens.empty();
  }
  // Each sequence's tokens wait in its queue; a round takes up to ubatch of
  // them from every sequence still feeding.
  for (size_t i = 0; i < items.size(); ++i)
    if (active[i]) {
      TKV_CHECK(items[i].session->queued().empty());
      items[i].session->queue(items[i].tokens);
    }
  std::vector<model::BatchItem> batch;
  std::vector<size_t> index;  // batch position -> item
  while (std::find(active.begin(), active.end(), true) != active.end()) {
    batch.clear();
    index.clear();
    for (size_t i = 0; i < items.size(); ++i) {
      if (!active[i]) continue;
      Sequence& seq = *items[i].session;
      batch.push_back(seq.next_item(std::min<int64_t>(int64_t(seq.queued().size()), ubatch)));
      index.push_back(i);
    }
    const std::vector<model::ItemStatus> round = model.eval_batch(ctx, batch, pool);
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t i = index[b];
      Sequence& seq = *items[i].session;
      const bool last = batch[b].logits == model::Logits::kLast;
      // A failed round changed nothing (a disk-tier failure part-way cleared
      // the sequence); either way what is left of its tokens is not fed.
      if (seq.accept(batch[b], round[b], last ? ctx.logits(b) : std::span<const float>()) ||
          !round[b].ok()) {
        if (!round[b].ok()) status[i] = round[b];
        seq.clear_queue();
        active[i] = false;
      }
    }
  }
  return status;
}

}  // namespace tkv::runtime
