#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "runtime/model/chat_template.hpp"
#include "runtime/model/tokenizer.hpp"

namespace tandem::rt {

class Scheduler;

struct ApiServerOptions {
  std::string listen = "127.0.0.1:8000";  // port 0: the system picks one
  std::string served_model = "tandem";    // the id clients name in "model"
  std::string api_key;                    // empty: no authentication
  int threads = 32;                       // HTTP handler threads (each stream holds one)
  std::chrono::seconds io_timeout{60};    // socket read/write timeout
};

// What the API reports about the model once it is loaded.
struct ServedModel {
  std::string model_revision;
  int max_context = 0;
  int max_output_tokens = 0;
  int vocab_size = 0;
  TokenId bos = 0;
};

// The OpenAI-compatible HTTP API (cpp-httplib): /health, /v1/models, /v1/stats,
// /v1/chat/completions and /v1/completions, streaming as server-sent events. It
// listens as soon as it is constructed and answers 503 until Attach() hands it a
// running scheduler, so load balancers and the harness can wait on /health.
class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);  // binds; throws std::runtime_error
  ~ApiServer();

  std::string address() const;  // host:port actually bound
  void Attach(Scheduler* scheduler, const Tokenizer* tokenizer, ChatTemplate chat, ServedModel model);
  void SetDraining();
  void Stop();  // stops listening; handlers in flight finish

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::rt
