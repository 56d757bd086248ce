// Helpers of the scheduler and prefix-cache tests: the shared model
// fixtures loaded once, prompts of any length, and a job run to its end.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "model/model.h"
#include "server/scheduler.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace tkv::server::test {

struct LoadedModel {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
};

inline LoadedModel load_model(const std::string& path) {
  LoadedModel m;
  m.model = model::Model::load(path);
  m.tokenizer = std::make_unique<tok::Tokenizer>(tok::Tokenizer::from_gguf(m.model->gguf()));
  return m;
}

// BOS + the first n - 1 tokens of `text` (repeated as needed), shifted by
// `offset` tokens so that prompts of one text differ.
inline std::vector<int32_t> prompt_of(const tok::Tokenizer& t, const std::string& text, size_t n,
                                      size_t offset = 0) {
  const std::vector<int32_t> ids = t.encode(text, false, false);
  std::vector<int32_t> out{t.bos()};
  for (size_t i = 0; out.size() < n; ++i) out.push_back(ids[(offset + i) % ids.size()]);
  return out;
}

inline std::string story_text() {
  return "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
         "park with her dog. One day, she saw a big red ball under a tree. She ran to get it, but "
         "the ball rolled away. Lily was sad, so her mom gave her a hug and they went home to eat "
         "a cake together. The next morning the sun was bright and the birds were singing.";
}

// A fixture over stories260K, loaded once per suite (Base: ::testing::Test,
// or ::testing::TestWithParam<P>); its tests skip (or fail, when fixtures
// are required) without the file.
template <class Base>
class StoriesFixture : public Base {
 protected:
  static void SetUpTestSuite() {
    const std::string path = tkv::test::model_path("stories260K.gguf");
    if (!path.empty()) m_ = new LoadedModel(load_model(path));
  }
  static void TearDownTestSuite() {
    delete m_;
    m_ = nullptr;
  }
  void SetUp() override {
    if (!m_) {
      TKV_MISSING_FIXTURE << "fixture stories260K.gguf not found under " << tkv::test::models_dir();
    }
  }
  std::vector<int32_t> prompt(size_t n, size_t offset = 0) const {
    return prompt_of(*m_->tokenizer, story_text(), n, offset);
  }
  static inline LoadedModel* m_ = nullptr;
};

inline std::string heldout_text() {
  return read_file(tkv::test::models_dir() + "/tkv-test-heldout.txt").substr(0, 60000);
}

inline Job greedy_job(std::vector<int32_t> prompt, int64_t max_tokens) {
  Job job;
  job.prompt = std::move(prompt);
  job.sampling.temperature = 0;
  job.max_tokens = max_tokens;
  return job;
}

// Everything a job streamed.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<GeneratedToken> generated;
  std::string text;
  Event done;
  bool finished = false;
};

inline Outcome collect(JobStream& stream) {
  Outcome o;
  // Waits without a bound on the model's speed: 10 minutes of silence is a hang.
  for (int waited = 0; waited < 6000;) {
    std::optional<Event> e = stream.next(std::chrono::milliseconds(100));
    if (!e) {
      ++waited;
      continue;
    }
    if (e->kind == Event::Kind::kDone) {
      o.done = std::move(*e);
      o.finished = true;
      return o;
    }
    o.text += e->text;
    for (const GeneratedToken& g : e->tokens) {
      o.tokens.push_back(g.token);
      o.generated.push_back(g);
    }
  }
  ADD_FAILURE() << "no final event";
  return o;
}

// Holds the worker in its on_step hook on demand, and records one step:
// the test decides what is queued when the worker next admits (or that a
// drain has begun), and no job moves on by itself while the test looks,
// however the threads are scheduled.
struct StepGate {
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false, held = false, record = false;
  std::vector<StepInfo> recorded;
  void attach(SchedulerOptions& o) {
    o.on_step = [this](const StepInfo& s) {
      std::unique_lock<std::mutex> lock(mu);
      if (record) {  // this step, then wait again
        recorded.push_back(s);
        record = false;
        hold = true;
      }
      held = true;
      cv.notify_all();
      cv.wait(lock, [&] { return !hold; });
      held = false;
    };
  }
  void close() {  // the next step waits in the hook
    const std::lock_guard<std::mutex> lock(mu);
    hold = true;
  }
  void wait_held() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return held; });
  }
  // Lets the worker go until the hook of its next step, which it records
  // and waits in; returns that step.
  StepInfo step_and_record() {
    std::unique_lock<std::mutex> lock(mu);
    record = true;
    hold = false;
    cv.notify_all();
    cv.wait(lock, [&] { return !recorded.empty() && held; });
    return recorded.front();
  }
  void open() {
    {
      const std::lock_guard<std::mutex> lock(mu);
      hold = false;
    }
    cv.notify_all();
  }
};

// Holds the worker the first time it calls a hook (on_admit, on_finish)
// until release(); later calls pass. The test looks at the scheduler at
// exactly that point, however the threads are scheduled.
struct HoldOnce {
  std::mutex mu;
  std::condition_variable cv;
  bool held = false, released = false;
  std::function<void()> hook() {
    return [this] {
      std::unique_lock<std::mutex> lock(mu);
      if (released) return;
      held = true;
      cv.notify_all();
      cv.wait(lock, [&] { return released; });
    };
  }
  void wait_held() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return held; });
  }
  void release() {
    {
      const std::lock_guard<std::mutex> lock(mu);
      released = true;
    }
    cv.notify_all();
  }
};

// The tests' scheduler: a 512-token context, 8 sequences, 32-token chunks
// and pages, 2 threads, no prefix cache, every prompt on the chunk grid;
// `kv` a codec shorthand (f16, k4v2, ...). A warning fails the test.
inline SchedulerOptions small_options(const std::string& kv) {
  SchedulerOptions o;
  o.context = 512;
  o.parallel = 8;
  o.prefill_chunk = 32;
  o.prefill_tokens_per_step = 32;
  o.whole_prompt_tokens = 0;  // every prompt on the grid unless a test says otherwise
  o.kv.page_tokens = 32;
  o.threads = 2;
  o.prefix_cache = false;
  EXPECT_TRUE(kv::parse_kv_shorthand(kv, o.kv.k, o.kv.v)) << kv;
  o.on_warning = [](const std::string& m) { ADD_FAILURE() << "unexpected warning: " << m; };
  return o;
}

inline Outcome run_one(Scheduler& s, Job job) {
  return collect(*s.submit(std::move(job)));
}

// Waits for a stream's first event (its first token, or its end) and
// drops it.
inline void wait_first_event(JobStream& stream) {
  std::optional<Event> first;
  while (!first) first = stream.next(std::chrono::milliseconds(100));
}

// Starts a job decoding (a 10-token prompt, `max_tokens` to generate) and
// returns once its first token is out: the scheduler is decoding it.
inline std::shared_ptr<JobStream> start_decoding_stream(Scheduler& s, const tok::Tokenizer& t,
                                                        int64_t max_tokens) {
  std::shared_ptr<JobStream> a = s.submit(greedy_job(prompt_of(t, story_text(), 10), max_tokens));
  wait_first_event(*a);
  return a;
}

// `job` run to its end while another sequence decodes beside it.
inline Outcome run_beside_a_decoding_stream(Scheduler& s, const tok::Tokenizer& t, Job job) {
  std::shared_ptr<JobStream> a = start_decoding_stream(s, t, 2000);
  Outcome out = collect(*s.submit(std::move(job)));
  a->cancel();
  collect(*a);
  return out;
}

}  // namespace tkv::server::test
