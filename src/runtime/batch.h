// Several sessions fed in one batched forward (Model::eval_batch): every
// weight matmul runs once over the rows of all of them, attention per
// sequence over its own pages, and each session's results are those it
// would get alone. Long inputs go in rounds of up to ubatch tokens per
// session, so one long prompt does not hold the rows of a whole prompt.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "model/context.h"
#include "model/model.h"
#include "runtime/generation.h"

namespace tkv::runtime {

struct BatchFeed {
  Sequence* session = nullptr;
  std::span<const int32_t> tokens;
};

// Feeds every item's tokens to its session (sessions of `model`, each at
// most once) and keeps each session's last logits, as feed() does. Returns
// one status per item: an item that does not fit its context, or whose
// pages the pool cannot hold, fails with its message and leaves the others
// running; its session keeps the rounds (ubatch chunks) that succeeded
// before, except after a disk-tier failure part-way through a round
// (ItemStatus::Code::kSpillError), which clears the session. `ctx` holds
// the activations (one batch at a time per context).
std::vector<model::ItemStatus> feed_batch(const model::Model& model, model::ExecutionContext& ctx,
                                          std::span<const BatchFeed> items, ThreadPool& pool,
                                          int ubatch);

}  // namespace tkv::runtime
