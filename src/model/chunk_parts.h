// A prefill chunk run in layer parts over several Model::eval_batch calls,
// so that a scheduler can spread one chunk's work over steps while other
// items decode in each (the server's --prefill-step).
//
// The caller owns one per sequence, passes it with the chunk's item
// (BatchItem::parts) and says before each call where the part stops
// (run_until); eval_batch runs layers [layers_done(), stop) and keeps the
// rows' residual stream here between the parts. The first part begins the
// chunk in its sequence; every later part passes the same tokens, before
// anything else touches the sequence (between parts it is mid-chunk: it may
// only be continued or destroyed); only the part through the last layer may
// ask for logits. A chunk run in parts gives the bits it gives run whole: a
// row's kernels depend on its own item's size alone, and each layer of the
// chunk is the same computation whichever call runs it.
#pragma once

#include <vector>

namespace tkv::model {

class ChunkParts {
 public:
  // The next call stops before layer `stop` (0, or the model's layer count:
  // runs through the last layer).
  void run_until(int stop) { stop_ = stop; }
  int stop() const { return stop_; }
  // Layers of the chunk in progress run so far; 0 when none is in progress.
  int layers_done() const { return done_; }
  // Forgets a chunk in progress (its sequence was cleared).
  void reset() {
    done_ = 0;
    stop_ = 0;
    carry_.clear();
  }

 private:
  friend class Forward;
  int done_ = 0;
  int stop_ = 0;
  std::vector<float> carry_;  // tokens x n_embd: the rows' residual stream after layers_done()
};

}  // namespace tkv::model
