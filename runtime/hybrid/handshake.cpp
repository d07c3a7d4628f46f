#include "runtime/hybrid/handshake.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/hybrid/frame_channel.hpp"

namespace tandem::rt {

namespace {

using nlohmann::json;

const json& Field(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) throw wire::WireError(fmt::format("handshake: '{}' is missing", key));
  return *it;
}

int Int(const json& j, const char* key, int min, int max) {
  const json& v = Field(j, key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < min || v.get<std::int64_t>() > max) {
    throw wire::WireError(fmt::format("handshake: '{}' must be an integer in [{}, {}], got {}", key, min, max, v.dump()));
  }
  return static_cast<int>(v.get<std::int64_t>());
}

std::string String(const json& j, const char* key) {
  const json& v = Field(j, key);
  if (!v.is_string()) throw wire::WireError(fmt::format("handshake: '{}' must be a string", key));
  return v.get<std::string>();
}

std::pair<int, int> Range(const json& j, const char* key) {
  const json& v = Field(j, key);
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer()) {
    throw wire::WireError(fmt::format("handshake: slice '{}' must be [begin, end]", key));
  }
  const auto b = v[0].get<std::int64_t>(), e = v[1].get<std::int64_t>();
  if (b < 0 || e < b || e > 1'000'000'000) throw wire::WireError(fmt::format("handshake: slice '{}' [{}, {}] is not a range", key, b, e));
  return {static_cast<int>(b), static_cast<int>(e)};
}

const char* DtypeName(wire::Dtype d) {
  switch (d) {
    case wire::Dtype::kF32:
      return "f32";
    case wire::Dtype::kBf16:
      return "bf16";
    case wire::Dtype::kFp8Block32:
      return "fp8";
    case wire::Dtype::kF64:
      return "f64";
  }
  return "?";
}

wire::Dtype ParseDtype(const json& j, const char* key) {
  const std::string name = String(j, key);
  if (name == "f32") return wire::Dtype::kF32;
  if (name == "bf16") return wire::Dtype::kBf16;
  if (name == "fp8") return wire::Dtype::kFp8Block32;
  if (name == "f64") return wire::Dtype::kF64;
  throw wire::WireError(fmt::format("handshake: '{}' is '{}', not f64, f32, bf16 or fp8", key, name));
}

Nonce Hex32(const json& j, const char* key) {
  const auto bytes = FromHex<kNonceBytes>(String(j, key));
  if (!bytes) throw wire::WireError(fmt::format("handshake: '{}' must be {} hex digits", key, 2 * kNonceBytes));
  return *bytes;
}

json Parse(const std::string& text) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) throw wire::WireError("handshake: not a JSON object");
    return j;
  } catch (const json::exception& e) {
    throw wire::WireError(fmt::format("handshake: not valid JSON: {}", e.what()));
  }
}

}  // namespace

std::string ChallengeJson(const Challenge& c) {
  return json{{"protocol", c.protocol}, {"auth", c.token_required ? "hmac-sha256" : "none"}, {"nonce", ToHex(c.nonce)}}.dump();
}

Challenge ParseChallenge(const std::string& text) {
  const json j = Parse(text);
  Challenge c;
  c.protocol = Int(j, "protocol", 0, 65535);
  if (c.protocol != wire::kVersion)
    throw wire::WireError(fmt::format("handshake: protocol {} is not the supported {}", c.protocol, wire::kVersion));
  const std::string auth = String(j, "auth");
  if (auth != "hmac-sha256" && auth != "none") throw wire::WireError(fmt::format("handshake: auth '{}' is not hmac-sha256 or none", auth));
  c.token_required = auth == "hmac-sha256";
  c.nonce = Hex32(j, "nonce");
  return c;
}

std::string HelloJson(const Hello& h) {
  json slices = json::array();
  for (const LayerSlice& s : h.slices) {
    slices.push_back({{"layer", s.layer},
                      {"experts", {s.expert_begin, s.expert_end}},
                      {"intermediate", {s.inter_begin, s.inter_end}},
                      {"shared_intermediate", {s.shared_begin, s.shared_end}}});
  }
  json j{{"protocol", h.protocol},
         {"model_revision", h.model_revision},
         {"rank", h.rank},
         {"world", h.world},
         {"role", h.role},
         {"hidden", h.shape.hidden},
         {"top_k", h.shape.top_k},
         {"n_experts", h.shape.n_experts},
         {"wire_dtype", DtypeName(h.wire_dtype)},
         {"partial_dtype", DtypeName(h.partial_dtype)},
         {"slices", slices}};
  if (h.auth) j["auth"] = {{"nonce", ToHex(h.auth->nonce)}, {"proof", ToHex(h.auth->proof)}};
  return j.dump();
}

Hello ParseHello(const std::string& text) {
  const json j = Parse(text);
  Hello h;
  h.protocol = Int(j, "protocol", 0, 65535);
  if (h.protocol != wire::kVersion)
    throw wire::WireError(fmt::format("handshake: protocol {} is not the supported {}", h.protocol, wire::kVersion));
  h.model_revision = String(j, "model_revision");
  h.world = Int(j, "world", 1, 4096);
  h.rank = Int(j, "rank", 1, h.world - 1);
  h.role = String(j, "role");
  if (h.role != "worker" && h.role != "peer") throw wire::WireError(fmt::format("handshake: role '{}' is not worker or peer", h.role));
  h.shape.hidden = Int(j, "hidden", 1, 1 << 20);
  h.shape.top_k = Int(j, "top_k", 1, 255);
  h.shape.n_experts = Int(j, "n_experts", 1, 1 << 20);
  h.wire_dtype = ParseDtype(j, "wire_dtype");
  h.partial_dtype = ParseDtype(j, "partial_dtype");
  const json& slices = Field(j, "slices");
  if (!slices.is_array()) throw wire::WireError("handshake: 'slices' must be a list");
  for (const json& s : slices) {
    if (!s.is_object()) throw wire::WireError("handshake: a slice must be an object");
    LayerSlice slice;
    slice.layer = Int(s, "layer", 0, 1 << 20);
    std::tie(slice.expert_begin, slice.expert_end) = Range(s, "experts");
    std::tie(slice.inter_begin, slice.inter_end) = Range(s, "intermediate");
    std::tie(slice.shared_begin, slice.shared_end) = Range(s, "shared_intermediate");
    h.slices.push_back(slice);
  }
  if (const auto auth = j.find("auth"); auth != j.end()) {
    if (!auth->is_object()) throw wire::WireError("handshake: 'auth' must be an object");
    h.auth = HelloAuth{Hex32(*auth, "nonce"), Hex32(*auth, "proof")};
  }
  return h;
}

std::string HelloAckJson(const HelloAck& a) {
  json j{{"model_revision", a.model_revision}, {"weight_bytes", a.weight_bytes}, {"load_seconds", a.load_seconds}};
  if (a.proof) j["auth"] = {{"proof", ToHex(*a.proof)}};
  return j.dump();
}

HelloAck ParseHelloAck(const std::string& text) {
  const json j = Parse(text);
  HelloAck a;
  a.model_revision = String(j, "model_revision");
  const json& bytes = Field(j, "weight_bytes");
  if (!bytes.is_number_unsigned()) throw wire::WireError("handshake: 'weight_bytes' must be a non-negative integer");
  a.weight_bytes = bytes.get<std::uint64_t>();
  const json& seconds = Field(j, "load_seconds");
  if (!seconds.is_number()) throw wire::WireError("handshake: 'load_seconds' must be a number");
  a.load_seconds = seconds.get<double>();
  if (const auto auth = j.find("auth"); auth != j.end()) {
    if (!auth->is_object()) throw wire::WireError("handshake: 'auth' must be an object");
    a.proof = Hex32(*auth, "proof");
  }
  return a;
}

std::string LoadProgressJson(const LoadProgress& p) {
  return json{{"phase", ToString(p.phase)}, {"bytes_done", p.bytes_done}, {"bytes_total", p.bytes_total}, {"file", p.file}}.dump();
}

LoadProgress ParseLoadProgress(const std::string& text) {
  const json j = Parse(text);
  LoadProgress p;
  const std::string phase = String(j, "phase");
  if (phase == "revision") {
    p.phase = LoadProgress::Phase::kRevision;
  } else if (phase == "experts") {
    p.phase = LoadProgress::Phase::kExperts;
  } else if (phase == "upload") {
    p.phase = LoadProgress::Phase::kUpload;
  } else {
    throw wire::WireError(fmt::format("load progress: phase '{}' is not revision, experts or upload", phase));
  }
  for (auto [key, field] : {std::pair{"bytes_done", &p.bytes_done}, std::pair{"bytes_total", &p.bytes_total}}) {
    const json& v = Field(j, key);
    if (!v.is_number_unsigned()) throw wire::WireError(fmt::format("load progress: '{}' must be a non-negative integer", key));
    *field = v.get<std::uint64_t>();
  }
  if (p.bytes_done > p.bytes_total) {
    throw wire::WireError(fmt::format("load progress: bytes_done {} exceeds bytes_total {}", p.bytes_done, p.bytes_total));
  }
  p.file = String(j, "file");
  if (p.file.size() > 4096) throw wire::WireError("load progress: 'file' is longer than 4096 bytes");
  return p;
}

namespace {

// One rank's handshake as it goes.
struct Handshake {
  std::unique_ptr<FrameChannel> channel;
  Challenge challenge;
  Hello hello;  // as sent, signed when there is a token
  std::optional<LoadProgress> last;
  Clock::time_point deadline;
  bool done = false;
};

// Whether `next` is progress after `last`; throws wire::WireError for a report that
// goes back or changes its total within a phase.
bool Advances(const std::optional<LoadProgress>& last, const LoadProgress& next) {
  if (!last) return true;
  if (next.phase < last->phase) {
    throw wire::WireError(fmt::format("load progress went back from phase {} to {}", ToString(last->phase), ToString(next.phase)));
  }
  if (next.phase > last->phase) return true;
  if (next.bytes_total != last->bytes_total) {
    throw wire::WireError(fmt::format("load progress changed its total within phase {}: {} then {}", ToString(next.phase),
                                      last->bytes_total, next.bytes_total));
  }
  if (next.bytes_done < last->bytes_done) {
    throw wire::WireError(fmt::format("load progress went back from {} to {} bytes", last->bytes_done, next.bytes_done));
  }
  return next.bytes_done > last->bytes_done;
}

}  // namespace

std::vector<std::unique_ptr<FrameChannel>> HandshakeAll(boost::asio::io_context& io, const std::vector<HandshakeTarget>& targets,
                                                        const HandshakeOptions& options, std::vector<HelloAck>* acks) {
  const auto timeout = options.timeout;
  std::vector<Handshake> ranks(targets.size());
  // Whatever ends the handshakes early, no operation may be left pending on a channel
  // about to be destroyed.
  struct CloseOnExit {
    boost::asio::io_context& io;
    std::vector<Handshake>& ranks;
    bool keep = false;
    ~CloseOnExit() {
      if (keep) return;
      for (Handshake& r : ranks) {
        if (r.channel) r.channel->Close();
      }
      io.restart();
      io.poll();
    }
  } guard{io, ranks};
  for (std::size_t i = 0; i < targets.size(); ++i) {
    try {
      ranks[i].channel = FrameChannel::Connect(io, targets[i].address, timeout);
    } catch (const std::exception& e) {
      throw HandshakeError(i, e.what());
    }
    // Until the worker has proved the token, nothing big is read from it.
    ranks[i].channel->set_max_payload(wire::kMaxHandshakePayload, "during the handshake");
  }
  std::vector<FrameChannel*> all;
  for (Handshake& r : ranks) all.push_back(r.channel.get());

  // The worker speaks first: its Challenge says whether it holds a token.
  for (FrameChannel* c : all) c->StartReceive();
  RunUntilIdle(io, all, Clock::now() + timeout, fmt::format("no handshake challenge within {} ms (--connect-timeout-ms)", timeout.count()));
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    Handshake& r = ranks[i];
    FrameChannel& channel = *r.channel;
    if (channel.error()) throw HandshakeError(i, *channel.error());
    if (channel.header().type == wire::FrameType::kError) {
      throw HandshakeError(i, fmt::format("refused the connection: {}", wire::PayloadText(channel.payload())));
    }
    if (channel.header().type != wire::FrameType::kChallenge) {
      throw HandshakeError(
          i, fmt::format("opened the handshake with frame type {} instead of a Challenge", static_cast<int>(channel.header().type)));
    }
    try {
      r.challenge = ParseChallenge(wire::PayloadText(channel.payload()));
    } catch (const wire::WireError& e) {
      throw HandshakeError(i, e.what());
    }
    if (r.challenge.token_required && !options.token) {
      throw HandshakeError(i,
                           "worker requires a token: this coordinator has none (set TANDEM_WORKER_TOKEN or --worker-token-file to the "
                           "workers' token)");
    }
    if (!r.challenge.token_required && options.token) {
      throw HandshakeError(i,
                           "worker token mismatch: this coordinator has a token, the worker has none (start it with "
                           "TANDEM_WORKER_TOKEN or --worker-token-file)");
    }
    r.hello = targets[i].hello;
    if (options.token) {
      r.hello.auth = HelloAuth{NewNonce(), {}};
      r.hello.auth->proof = CoordinatorProof(*options.token, r.challenge.nonce, r.hello.auth->nonce);
    }
    const std::string hello_json = HelloJson(r.hello);
    if (hello_json.size() > wire::kMaxHandshakePayload) {
      throw HandshakeError(i, fmt::format("the Hello for this rank is {} bytes, more than the {} a worker accepts", hello_json.size(),
                                          wire::kMaxHandshakePayload));
    }
    channel.StartSend(std::make_shared<const std::vector<std::byte>>(wire::EncodeTextFrame(wire::FrameType::kHello, hello_json)));
    channel.StartReceive();
    r.deadline = Clock::now() + timeout;
  }

  // Every worker loads now; each frame it sends is a progress report or its answer.
  if (acks != nullptr) acks->assign(ranks.size(), HelloAck{});
  std::size_t remaining = ranks.size();
  while (remaining > 0) {
    Clock::time_point next = Clock::time_point::max();
    for (const Handshake& r : ranks) {
      if (!r.done) next = std::min(next, r.deadline);
    }
    io.restart();
    io.run_one_until(next);
    const auto now = Clock::now();
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      Handshake& r = ranks[i];
      FrameChannel& channel = *r.channel;
      if (r.done) continue;
      if (channel.busy()) {
        if (now < r.deadline) continue;
        throw HandshakeError(
            i, r.last ? fmt::format("no loading progress for {} ms (--connect-timeout-ms); its last report: {}", timeout.count(),
                                    Describe(*r.last))
                      : fmt::format("no handshake answer within {} ms (--connect-timeout-ms), and no loading progress reported",
                                    timeout.count()));
      }
      if (channel.error()) throw HandshakeError(i, *channel.error());
      const wire::FrameType type = channel.header().type;
      try {
        if (type == wire::FrameType::kError) {
          throw HandshakeError(i, fmt::format("refused the handshake: {}", wire::PayloadText(channel.payload())));
        }
        if (type == wire::FrameType::kLoadProgress) {
          const LoadProgress report = ParseLoadProgress(wire::PayloadText(channel.payload()));
          if (Advances(r.last, report)) {
            r.deadline = now + timeout;
            if (options.on_progress) options.on_progress(i, report);
          }
          r.last = report;
          channel.StartReceive();
          continue;
        }
        if (type != wire::FrameType::kHelloAck) {
          throw HandshakeError(i, fmt::format("answered the handshake with frame type {}", static_cast<int>(type)));
        }
        HelloAck parsed = ParseHelloAck(wire::PayloadText(channel.payload()));
        // The worker proves the token too: partials from a process that merely answers on
        // the address would otherwise be trusted.
        if (options.token &&
            (!parsed.proof || !SameMac(*parsed.proof, WorkerProof(*options.token, r.challenge.nonce, r.hello.auth->nonce)))) {
          throw HandshakeError(i, "worker token mismatch: the worker's HelloAck does not prove it holds this coordinator's token");
        }
        if (acks != nullptr) (*acks)[i] = std::move(parsed);
      } catch (const wire::WireError& e) {
        throw HandshakeError(i, e.what());
      }
      channel.set_max_payload(wire::kMaxPayload);  // layer responses may be large
      r.done = true;
      --remaining;
    }
  }
  guard.keep = true;
  std::vector<std::unique_ptr<FrameChannel>> channels;
  for (Handshake& r : ranks) channels.push_back(std::move(r.channel));
  return channels;
}

std::unique_ptr<FrameChannel> ConnectAndHandshake(boost::asio::io_context& io, const std::string& address, const Hello& hello,
                                                  std::chrono::milliseconds timeout, HelloAck* ack,
                                                  const std::optional<std::string>& token) {
  HandshakeOptions options;
  options.timeout = timeout;
  options.token = token;
  std::vector<HelloAck> acks;
  auto channels = HandshakeAll(io, {HandshakeTarget{address, hello}}, options, &acks);
  if (ack != nullptr) *ack = acks.front();
  return std::move(channels.front());
}

}  // namespace tandem::rt
