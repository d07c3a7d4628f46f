#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/chat_template.hpp"
#include "runtime/model/tokenizer.hpp"
#include "runtime/serve/http_limits.hpp"

namespace tandem::rt {

class Scheduler;

struct ApiServerOptions {
  std::string listen = "127.0.0.1:8000";  // HOST:PORT; port 0: the system picks one
  std::string served_model = "tandem";    // the id clients name in "model"
  std::string api_key;                    // empty: no authentication
  // Origins (scheme://host[:port], or "*") whose browser pages may call the API; none by
  // default, so a web page cannot drive a server on the user's machine.
  std::vector<std::string> allow_origins;
  // Host names clients may address a loopback-bound server by, beyond localhost and the
  // loopback addresses (DNS rebinding: a page whose name resolves to 127.0.0.1 is not a
  // cross-origin page to the browser, so only the Host header tells it apart).
  std::vector<std::string> allow_hosts;
  HttpLimits http;
};

// What the API reports about the model once it is loaded.
struct ServedModel {
  std::string model_revision;
  int max_context = 0;
  int max_output_tokens = 0;
  int vocab_size = 0;
  TokenId bos = 0;
  std::string startup_json;  // StartupTimeline::Json(): /v1/stats reports it as "startup"
};

// The OpenAI-compatible HTTP API (cpp-httplib): /health, /v1/models, /v1/stats,
// /v1/chat/completions and /v1/completions, streaming as server-sent events. It
// listens as soon as it is constructed and answers 503 until Attach() hands it a
// running scheduler, so load balancers and the harness can wait on /health.
class ApiServer {
 public:
  // Binds. Throws std::invalid_argument for a malformed `listen`, std::runtime_error when
  // the address cannot be bound.
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();

  std::string address() const;  // host:port actually bound
  void Attach(Scheduler* scheduler, const Tokenizer* tokenizer, ChatTemplate chat, ServedModel model);
  void SetDraining();
  // Serves one connection's raw request bytes without a socket and returns the raw
  // response: the whole request path (httplib's parsing, the policy, the body and schema
  // checks) for the fuzz target.
  std::string HandleForTesting(const std::string& raw);
  // Stops listening once every open stream has ended (Scheduler::Drain ends them) or
  // `grace` has passed; handlers in flight finish.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tandem::rt
