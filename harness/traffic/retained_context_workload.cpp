// Retained context: decode over a conversation whose earlier turn the server keeps. First
// every case as a fresh conversation (the fresh-launch control); then per context size a
// parent prompt of exactly that many tokens that must end with stop, and every case as a
// child turn on it, whose cache hit must lie between the context and the parent's frontier.
#include <stdexcept>

#include <fmt/format.h>

#include "harness/traffic/context_text.hpp"
#include "harness/traffic/workload_requests.hpp"

namespace tandem::harness {

namespace {

using nlohmann::json;

const CorpusCase kParentCase{.id = "context"};
constexpr std::string_view kLead = "Read this text; questions about it follow.\n\n";
constexpr std::string_view kTail = "\n\nReply with one word: OK.";

std::string Role(const char* role, bool thinking) { return thinking ? fmt::format("{} thinking", role) : role; }

void Think(Planned& p, bool thinking) {
  if (thinking) p.body["thinking"] = {{"type", "enabled"}};
}

}  // namespace

int CountRetainedContextRequests(const WorkloadSpec& w, const Corpus& corpus) {
  const int cases = static_cast<int>(corpus.Select(w.cases).size()) * w.repeats;
  const int modes = static_cast<int>(w.thinking.size());
  int n = modes * cases;  // the fresh-launch control
  bool parents = false;
  for (int size : w.contexts) {
    n += size == 0 ? modes * cases : modes * (1 + cases);
    parents = parents || size > 0;
  }
  return n + (parents ? modes : 0);  // one probe per mode
}

void Runner::FreshConversations(const std::vector<const CorpusCase*>& cases, const std::string& role, bool thinking) {
  for (int r = 0; r < w_.repeats; ++r) {
    for (const CorpusCase* c : cases) {
      Planned p = Make(*c, NextPosition());
      Think(p, thinking);
      p.sample.role = role;
      p.sample.repeat = r;
      p.sample.batch = batch_++;
      SendOne(p);
    }
  }
}

void Runner::RetainedParentAndChildren(const ContextSource& source, const TemplateOverhead& overhead, int size, bool thinking,
                                       const std::vector<const CorpusCase*>& cases) {
  Planned parent = Make(kParentCase, NextPosition());
  const std::string content = source.Fit(parent.sample.nonce + std::string(kLead), size - overhead.first, kTail);
  parent.body["messages"] = json::array({{{"role", "user"}, {"content", content}}});
  parent.body["max_tokens"] = w_.parent_max_tokens;
  parent.check.max_tokens = w_.parent_max_tokens;
  Think(parent, thinking);
  parent.sample.role = Role("parent", thinking);
  parent.sample.context = size;
  parent.sample.batch = batch_++;
  store::SampleRow& s = SendOne(parent);
  const StreamedCompletion answer = last_.back();
  if (answer.complete()) AddCheck(s, "context_exact", s.prompt_tokens == size, false);
  AddCheck(s, "parent_stop", s.finish_reason == "stop", false);
  for (int r = 0; r < w_.repeats; ++r) {
    for (const CorpusCase* c : cases) {
      // The child's own message starts with its nonce: no earlier request shares it, so the
      // cache can hold at most the conversation before it (the parent's prompt and answer,
      // and the template between them and this message).
      Planned child = Make(*c, NextPosition());
      const std::string own = child.sample.nonce + (c->system.empty() ? c->prompt : c->system + "\n\n" + c->prompt);
      json messages = parent.body["messages"];
      messages.push_back({{"role", "assistant"}, {"content", answer.content}});
      messages.push_back({{"role", "user"}, {"content", own}});
      child.body["messages"] = messages;
      child.check.cache_bound = -1;
      Think(child, thinking);
      child.sample.role = Role("child", thinking);
      child.sample.context = size;
      child.sample.repeat = r;
      child.sample.batch = batch_++;
      store::SampleRow& x = SendOne(child);
      const StreamedCompletion& got = last_.back();
      if (!got.complete()) continue;
      if (!got.has_cached_usage) {
        x.valid = false;  // its rate may not be a retained context's: not scored
        AddFlag(x, "retained_unverified", "the server's usage reports no cached tokens");
        continue;
      }
      // At least the parent's own message: its prompt less the template's tokens around the
      // text, which a conversation's next turn may render otherwise (a thinking parent's
      // prompt ends with "<think>", its turn in the history does not).
      const int floor = size - overhead.first;
      const int frontier = x.prompt_tokens - static_cast<int>(ctx_.tokenizer->Encode(own).size());
      const bool sums = got.cache_miss_tokens < 0 || got.cache_miss_tokens + x.cached_tokens == x.prompt_tokens;
      const bool held = floor <= x.cached_tokens && x.cached_tokens <= frontier && sums;
      AddCheck(x, "retained_cache", held, true);
      if (!held) {
        AddFlag(
            x, "retained_cache",
            fmt::format("{} tokens cached; the context's own text ends at {} and the conversation before this message at {}{}",
                        x.cached_tokens, floor, frontier,
                        sums ? "" : fmt::format("; {} missed does not add up to the prompt's {}", got.cache_miss_tokens, x.prompt_tokens)));
      }
    }
  }
}

void Runner::RetainedContext() {
  if (ctx_.tokenizer == nullptr) {
    throw std::runtime_error(
        fmt::format("workload {}: retained contexts are fitted with the model's tokenizer, and the model has none", w_.name));
  }
  const ContextSource source = ContextSource::Load(w_.source, w_.source_sha256, *ctx_.tokenizer);
  const std::vector<const CorpusCase*> cases = ctx_.corpus->Select(w_.cases);
  json rows = json::array();
  for (const std::string& mode : w_.thinking) FreshConversations(cases, Role("control", mode == "on"), mode == "on");
  std::map<std::string, TemplateOverhead> overheads;
  for (int size : w_.contexts) {
    for (const std::string& mode : w_.thinking) {
      const bool thinking = mode == "on";
      if (size == 0) {
        FreshConversations(cases, Role("child", thinking), thinking);
      } else {
        if (!overheads.contains(mode)) overheads[mode] = Probe(thinking, false);
        RetainedParentAndChildren(source, overheads[mode], size, thinking, cases);
      }
      rows.push_back({{"context", size}, {"thinking", mode}});
    }
  }
  out_.result = {{"contexts", rows}};
}

}  // namespace tandem::harness
