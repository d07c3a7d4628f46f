#include "tests/support/fixture_store.hpp"

#include <map>
#include <vector>

#include "store/store.hpp"

namespace tandem::testing {

namespace {

using nlohmann::json;

store::SampleRow Sample(const json& j) {
  store::SampleRow s;
  s.case_id = j.value("case_id", "code");
  s.weight = j.value("weight", 1.0);
  s.repeat = j.value("repeat", 0);
  s.level = j.value("level", 1);
  s.batch = j.value("batch", 0);
  s.slot = j.value("slot", 0);
  s.context = j.value("context", 0);
  s.role = j.value("role", "");
  s.nonce = j.value("nonce", "");
  s.request_json = j.value("request", json::object()).dump();
  s.status = j.value("status", 200);
  s.error = j.value("error", "");
  s.t_first_output = j.value("t_first_output", 0.0);
  s.t_start = j.value("t_start", s.t_first_output);
  s.t_first_content = j.value("t_first_content", s.t_first_output);
  s.t_finish = j.value("t_finish", 0.0);
  s.completion_tokens = j.value("completion_tokens", 0);
  s.prompt_tokens = j.value("prompt_tokens", 20);
  s.cached_tokens = j.value("cached_tokens", 1);
  s.chunks = j.value("chunks", s.completion_tokens);
  s.tokenizer_tokens = j.value("tokenizer_tokens", s.completion_tokens);
  s.content = j.value("content", "");
  s.content_sha256 = j.value("content_sha256", "");
  s.finish_reason = j.value("finish_reason", "length");
  s.checks_json = j.value("checks", json::object()).dump();
  s.flags_json = j.value("flags", json::object()).dump();
  s.draft_json = j.value("draft", json::object()).dump();
  s.gaps_json = j.value("gaps", json::array()).dump();
  s.valid = j.value("valid", true);
  bool passed = s.valid;
  const json checks = j.value("checks", json::object());
  for (const auto& [check, ok] : checks.items()) passed = passed && ok.get<bool>();
  s.passed = j.value("passed", passed);
  return s;
}

}  // namespace

std::int64_t WriteFixtureStore(const json& fixture, const std::filesystem::path& file) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file.string() + suffix);
  store::Store store = store::Store::Open(file);
  const json c = fixture.value("campaign", json::object());
  std::int64_t campaign = 0;
  store.Transaction([&] {
    campaign = store.CreateCampaign(c.value("name", "fixture"), c.value("file", "/campaigns/fixture.yaml"), "", c.value("yaml_sha256", ""),
                                    c.value("model_path", "/models/fixture"), c.value("model_revision", ""),
                                    c.value("host", json::object()).dump());
    if (c.contains("gate")) store.SetCampaignGate(campaign, c["gate"].dump());
    store::Statement(store.handle(), "UPDATE campaign SET created_at = ? WHERE id = ?")
        .Bind(1, c.value("created_at", std::string("2026-01-01T00:00:00Z")))
        .Bind(2, campaign)
        .Run();

    std::vector<json> arms = fixture.value("arms", std::vector<json>{});
    std::vector<json> layouts = fixture.value("layouts", std::vector<json>{});
    auto known = [](const std::vector<json>& list, const std::string& key, const std::string& name) {
      for (const json& x : list) {
        if (x.value(key, "") == name) return true;
      }
      return false;
    };
    for (const json& s : fixture["sessions"]) {
      if (!known(arms, "label", s["arm"])) arms.push_back({{"label", s["arm"]}});
      if (!known(layouts, "name", s.value("layout", "tp4"))) layouts.push_back({{"name", s.value("layout", "tp4")}});
    }
    std::map<std::string, std::int64_t> arm_ids, layout_ids;
    for (std::size_t i = 0; i < arms.size(); ++i) {
      const json& a = arms[i];
      const std::int64_t id = store.AddArm(
          campaign, static_cast<int>(i), a["label"], store::ParseArmKind(a.value("kind", "binary"), "fixture"), a.value("revision", "r"),
          a.value("coordinator_image", ""), a.value("worker_image", ""), a.value("launch", json::object()).dump());
      store.SetArmModel(id, a.value("model_id", ""), a.value("model_revision", ""), a.value("config_sha256", ""));
      arm_ids[a["label"]] = id;
    }
    for (std::size_t i = 0; i < layouts.size(); ++i) {
      layout_ids[layouts[i]["name"]] =
          store.AddLayout(campaign, static_cast<int>(i), layouts[i]["name"], layouts[i].value("spec", json::object()).dump());
    }
    for (const json& s : fixture["sessions"]) {
      const std::int64_t session =
          store.AddSession(campaign, s["order_index"], layout_ids.at(s.value("layout", "tp4")), arm_ids.at(s["arm"]));
      const std::string status = s.value("status", "complete");
      if (status == "planned") continue;
      store.StartSession(session, s.value("host", json::object()).dump());
      if (s.contains("startup")) store.SetSessionStartup(session, store::SessionStartup::FromJson(s["startup"].dump(), "fixture"));
      for (const json& w : s.value("workloads", json::array())) {
        json spec = w.value("spec", json::object());
        if (!spec.contains("greedy")) spec["greedy"] = true;
        const std::int64_t run =
            store.StartWorkloadRun(session, w["name"], store::ParseWorkloadKind(w.value("kind", "battery"), "fixture"),
                                   w.value("warmup", false), spec.dump(), w.value("stats_before", json::object()).dump());
        for (const json& x : w.value("samples", json::array())) store.AddSample(run, session, Sample(x));
        store.FinishWorkloadRun(run, w.value("stats_after", json::object()).dump(), "{}");
      }
      if (status != "running") {
        store.FinishSession(session, store::ParseSessionStatus(status, "fixture"), s.value("reason", ""),
                            s.value("served", json::object()).dump(), s.value("processes", json::array()).dump());
      }
      store::Statement(store.handle(), "UPDATE session SET attempts = ?, started_at = ?, finished_at = ? WHERE id = ?")
          .Bind(1, static_cast<std::int64_t>(s.value("attempts", 1)))
          .Bind(2, s.value("started_at", std::string("2026-01-01T00:00:00Z")))
          .Bind(3, s.value("finished_at", std::string("2026-01-01T00:01:00Z")))
          .Bind(4, session)
          .Run();
      if (status == "running")
        store::Statement(store.handle(), "UPDATE session SET finished_at = NULL WHERE id = ?").Bind(1, session).Run();
    }
    store.SetCampaignStatus(campaign, c.value("status", "complete"));
  });
  return campaign;
}

}  // namespace tandem::testing
