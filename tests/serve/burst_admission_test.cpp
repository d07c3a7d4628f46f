// An idle scheduler gathers requests that arrive together into its first step
// (SchedulerOptions::burst_window, burst_quiet), in process on the tiny preset.
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/draft/draft_policy.hpp"
#include "runtime/draft/drafter.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/serve/scheduler.hpp"
#include "tests/runtime/stream_output.hpp"
#include "tests/runtime/tiny_model.hpp"

namespace tandem::rt {
namespace {

using std::chrono::milliseconds;

class BurstAdmission : public ::testing::Test {
 protected:
  BurstAdmission()
      : ckpt_(Checkpoint::Open(testing::TinyCheckpoint())),
        tokenizer_(Tokenizer::Load(testing::TinyCheckpoint() / "tokenizer.json")),
        engine_(ckpt_, EngineOptions{.threads = 1}) {}

  // A request for one token: it ends in the step that processes its prompt.
  static Submission OneToken(int variant) {
    Submission s;
    for (int i = 0; i < 12; ++i) s.prompt.push_back(static_cast<TokenId>(5 + variant * 13 + i));
    s.max_new_tokens = 1;
    s.ignore_eos = true;
    return s;
  }

  static SchedulerOptions Options(milliseconds window, milliseconds quiet, int concurrency = 16) {
    SchedulerOptions o;
    o.concurrency = concurrency;
    o.burst_window = window;
    o.burst_quiet = quiet;
    o.eos = static_cast<TokenId>(1);
    return o;
  }

  // Milliseconds from Submit to the request's kAdmitted event.
  static double MillisToAdmission(RequestStream& stream, std::chrono::steady_clock::time_point submitted) {
    const auto e = stream.Pop(milliseconds(30000));
    EXPECT_TRUE(e.has_value());
    EXPECT_EQ(e->kind, StreamEvent::Kind::kAdmitted);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - submitted).count();
  }

  // Milliseconds from Submit to admission of a lone request to an idle scheduler.
  double LoneAdmissionMillis(const SchedulerOptions& options) {
    Scheduler scheduler(engine_, tokenizer_, options);
    const auto submitted = std::chrono::steady_clock::now();
    auto stream = scheduler.Submit(OneToken(0));
    const double ms = MillisToAdmission(*stream, submitted);
    testing::ReadToEnd(*stream);
    return ms;
  }

  Checkpoint ckpt_;
  Tokenizer tokenizer_;
  Engine engine_;
};

TEST_F(BurstAdmission, RequestsArrivingTogetherArePrefilledInOneStep) {
  // Gaps of ~5 ms, well inside a 300 ms quiet: one burst. Admitting at once would take
  // the first request's prompt alone as soon as the scheduler thread woke.
  Scheduler scheduler(engine_, tokenizer_, Options(milliseconds(5000), milliseconds(300)));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) std::this_thread::sleep_for(milliseconds(5));
    streams.push_back(scheduler.Submit(OneToken(i)));
  }
  for (auto& s : streams) EXPECT_EQ(testing::ReadToEnd(*s).completion_tokens, 1);
  const nlohmann::json stats = nlohmann::json::parse(scheduler.StatsJson());
  EXPECT_EQ(stats["decode"]["steps"], 1) << stats.dump();
  EXPECT_EQ(stats["decode"]["prefill_rows"], 4 * 12) << stats.dump();
}

TEST_F(BurstAdmission, ALoneRequestWaitsTheQuietGap) {
  EXPECT_GE(LoneAdmissionMillis(Options(milliseconds(5000), milliseconds(300))), 300.0);
}

TEST_F(BurstAdmission, AZeroWindowAdmitsAtOnce) {
  // Admitted at the scheduler thread's next wake-up, far under the quiet gap that is
  // not applied (the bound only guards against a stalled machine).
  EXPECT_LT(LoneAdmissionMillis(Options(milliseconds(0), milliseconds(3000))), 2000.0);
}

TEST_F(BurstAdmission, TheWindowBoundsTheWaitWhileRequestsKeepArriving) {
  // Requests 50 ms apart (under the 2 s quiet gap) for longer than the 300 ms window:
  // the first step starts at the window's end with those that have arrived.
  Scheduler scheduler(engine_, tokenizer_, Options(milliseconds(300), milliseconds(2000)));
  const auto submitted = std::chrono::steady_clock::now();
  const std::shared_ptr<RequestStream> head = scheduler.Submit(OneToken(0));
  std::vector<std::shared_ptr<RequestStream>> streams{head};  // the rest: appended by `more` alone until it is joined
  std::thread more([&] {
    for (int i = 1; i < 12; ++i) {
      std::this_thread::sleep_for(milliseconds(50));
      streams.push_back(scheduler.Submit(OneToken(i)));
    }
  });
  const double first = MillisToAdmission(*head, submitted);
  more.join();
  EXPECT_GE(first, 300.0);
  EXPECT_LT(first, 2000.0);  // the quiet gap never came; the window ended the wait
  for (auto& s : streams) testing::ReadToEnd(*s);
}

TEST_F(BurstAdmission, FullSlotsEndTheWait) {
  // Two slots, both taken: nothing more could join the step, so it starts at once
  // instead of after the minute-long quiet gap.
  Scheduler scheduler(engine_, tokenizer_, Options(milliseconds(60000), milliseconds(60000), 2));
  auto a = scheduler.Submit(OneToken(0));
  auto b = scheduler.Submit(OneToken(1));
  EXPECT_EQ(testing::ReadToEnd(*a, milliseconds(20000)).completion_tokens, 1);
  EXPECT_EQ(testing::ReadToEnd(*b, milliseconds(20000)).completion_tokens, 1);
}

TEST_F(BurstAdmission, ShuttingDownDuringTheWaitEndsTheRequest) {
  std::shared_ptr<RequestStream> stream;
  const auto start = std::chrono::steady_clock::now();
  {
    Scheduler scheduler(engine_, tokenizer_, Options(milliseconds(60000), milliseconds(60000)));
    stream = scheduler.Submit(OneToken(0));
    std::this_thread::sleep_for(milliseconds(50));
  }  // the destructor stops the scheduler while it waits for the burst
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  const auto e = stream->Pop(milliseconds(1000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, StreamEvent::Kind::kFailed);
  EXPECT_EQ(e->status, 503);
}

}  // namespace
}  // namespace tandem::rt
