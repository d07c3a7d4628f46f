// Fuzzes the whole HTTP request path of `tandem-rt serve` with raw connection bytes:
// httplib's request line and header parsing, the server's limits, the policy run
// before a body is read (CORS, content type, API key), and the body and schema checks
// of a completion — everything but the model, which this server has not loaded. A
// crash, a sanitizer report or an exception that escapes the server fails.
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/serve/api_server.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::unique_ptr<tandem::rt::ApiServer> server = [] {
    tandem::rt::ApiServerOptions options;
    options.listen = "127.0.0.1:0";
    options.api_key = "fuzz-key";  // the seeds carry it, so bodies get parsed
    options.allow_origins = {"http://app.example"};
    return std::make_unique<tandem::rt::ApiServer>(options);
  }();
  const std::string raw(reinterpret_cast<const char*>(data), size);
  (void)server->HandleForTesting(raw);
  return 0;
}
