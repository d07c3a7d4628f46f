// Campaign YAML validation (every error names file:line:column and the key), the
// session order, and arm resolution failures (unknown git ref, a failing build).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/input_error.hpp"
#include "harness/campaign/campaign.hpp"
#include "harness/campaign/campaign_secrets.hpp"
#include "harness/campaign/session_plan.hpp"
#include "harness/campaign/spec_json.hpp"
#include "harness/launch/arm.hpp"
#include "store/record_fields.hpp"
#include "store/workload_description.hpp"
#include "tests/support/run_command.hpp"

namespace tandem::harness {
namespace {

const std::string kFile = std::string(TANDEM_SOURCE_DIR) + "/campaigns/test.yaml";

// A valid campaign; tests replace one line to break it.
std::string Valid() {
  const std::string bin = TANDEM_RT_BIN;
  return "name: t\n"                         // 1
         "model: {preset: tiny, seed: 3}\n"  // 2
         "arms:\n"                           // 3
         "  - label: a\n"                    // 4
         "    source: {kind: binary, coordinator: " +
         bin + ", worker: " + bin +
         "}\n"             // 5
         "  - label: b\n"  // 6
         "    source: {kind: binary, coordinator: " +
         bin + ", worker: " + bin +
         "}\n"                                       // 7
         "    options: [--threads, '2']\n"           // 8
         "layouts:\n"                                // 9
         "  - name: l\n"                             // 10
         "    workers: 2\n"                          // 11
         "sessions: {per_layout: 4, order: ABBA}\n"  // 12
         "workloads:\n"                              // 13
         "  - name: w\n"                             // 14
         "    kind: battery\n"                       // 15
         "    cases: [hello, code]\n";               // 16
}

std::string ReplaceLine(std::string text, int line, const std::string& with) {
  std::size_t start = 0;
  for (int i = 1; i < line; ++i) start = text.find('\n', start) + 1;
  const std::size_t end = text.find('\n', start);
  return text.replace(start, end - start, with);
}

std::string ErrorOf(const std::string& yaml) {
  try {
    ParseCampaign(yaml, kFile);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CampaignYaml, TheValidOneParses) {
  const Campaign c = ParseCampaign(Valid(), kFile);
  EXPECT_EQ(c.name, "t");
  ASSERT_EQ(c.arms.size(), 2u);
  EXPECT_EQ(c.arms[1].options, (std::vector<std::string>{"--threads", "2"}));
  EXPECT_EQ(c.layouts[0].workers, 2);
  EXPECT_EQ(c.layouts[0].emulated_rtt_us, 0);
  EXPECT_EQ(ParseCampaign(ReplaceLine(Valid(), 11, "    workers: 2\n    emulated_rtt_us: 2500"), kFile).layouts[0].emulated_rtt_us, 2500);
  EXPECT_EQ(c.workloads[0].cases, (std::vector<std::string>{"hello", "code"}));
  EXPECT_EQ(c.store, std::filesystem::path(TANDEM_SOURCE_DIR) / "campaigns/results/t.db");
  EXPECT_EQ(c.yaml_sha256.size(), 64u);
}

// The stored spec keeps what a battery sends, so the report and the dry run describe it
// truly: a battery without the counting diagnostic must not claim it.
TEST(CampaignYaml, TheStoredWorkloadSpecSaysWhetherABatteryCounts) {
  const std::string all_cases = ReplaceLine(Valid(), 16, "    repeats: 2");
  const Campaign counting = ParseCampaign(all_cases, kFile);
  const Campaign silent = ParseCampaign(ReplaceLine(all_cases, 16, "    repeats: 2\n    counting: false"), kFile);
  const nlohmann::json with = WorkloadSpecJson(counting.workloads[0]), without = WorkloadSpecJson(silent.workloads[0]);
  EXPECT_EQ(with["counting"], true);
  EXPECT_EQ(without["counting"], false);
  const std::string said_with = store::DescribeWorkload("w", store::WorkloadKind::kBattery, store::ReadWorkloadSettings(with, "w"));
  const std::string said_without = store::DescribeWorkload("w", store::WorkloadKind::kBattery, store::ReadWorkloadSettings(without, "w"));
  EXPECT_NE(said_with.find("plus the counting diagnostic"), std::string::npos) << said_with;
  EXPECT_EQ(said_without.find("counting"), std::string::npos) << said_without;
  EXPECT_NE(said_without.find("every weighted case; 2 repeats; greedy"), std::string::npos) << said_without;
}

// gate.families names a family by its label or by its id; a malformed id names its key.
TEST(CampaignYaml, GatedFamiliesAreLabelsOrIds) {
  const Campaign c = ParseCampaign(Valid() +
                                       "gate:\n"
                                       "  families: ['w: weighted decode', {workload: w, metric: case, case: code, sampling: greedy}]\n",
                                   kFile);
  ASSERT_EQ(c.gate.families.size(), 2u);
  EXPECT_EQ(c.gate.families[0].label, "w: weighted decode");
  EXPECT_FALSE(c.gate.families[0].id);
  ASSERT_TRUE(c.gate.families[1].id);
  EXPECT_EQ(*c.gate.families[1].id,
            (store::FamilyId{.workload = "w", .metric = store::FamilyMetric::kCase, .case_id = "code", .greedy = true}));
  EXPECT_NE(ErrorOf(Valid() + "gate:\n  families: [{workload: w, metric: speed}]\n")
                .find("test.yaml:18:36: gate.families[0].metric: 'speed' is not one of weighted, case, aggregate"),
            std::string::npos)
      << ErrorOf(Valid() + "gate:\n  families: [{workload: w, metric: speed}]\n");
  EXPECT_NE(ErrorOf(Valid() + "gate:\n  families: [{workload: w, metric: case, colour: red}]\n").find("unknown key 'colour'"),
            std::string::npos);
}

// A measured battery scores every latency family unless `latency:` lists fewer; the stored
// spec says which, and the dry run says so; a latency family is gated by its id with a percentile.
TEST(CampaignYaml, LatencyFamiliesAreEveryOneUnlessListed) {
  using store::FamilyMetric;
  const Campaign every = ParseCampaign(Valid(), kFile);
  EXPECT_EQ(every.workloads[0].latency,
            (std::vector<FamilyMetric>{FamilyMetric::kTtft, FamilyMetric::kItl, FamilyMetric::kTpot, FamilyMetric::kE2e}));
  const nlohmann::json spec = WorkloadSpecJson(every.workloads[0]);
  EXPECT_EQ(spec["latency"], nlohmann::json({"ttft", "itl", "tpot", "e2e"}));
  const std::string said = store::DescribeWorkload("w", store::WorkloadKind::kBattery, store::ReadWorkloadSettings(spec, "w"));
  EXPECT_NE(said.find("latency families: p50, p90, p99 of TTFT, ITL, TPOT, E2E"), std::string::npos) << said;
  const Campaign two = ParseCampaign(ReplaceLine(Valid(), 16, "    cases: [hello, code]\n    latency: [ttft, e2e]"), kFile);
  EXPECT_EQ(two.workloads[0].latency, (std::vector<FamilyMetric>{FamilyMetric::kTtft, FamilyMetric::kE2e}));
  EXPECT_TRUE(ParseCampaign(ReplaceLine(Valid(), 16, "    latency: []"), kFile).workloads[0].latency.empty());
  EXPECT_NE(
      ErrorOf(ReplaceLine(Valid(), 16, "    latency: [ttft, ttfb]")).find("test.yaml:16:21: workloads[0].latency[1]: 'ttfb' is not one of"),
      std::string::npos)
      << ErrorOf(ReplaceLine(Valid(), 16, "    latency: [ttft, ttfb]"));
  EXPECT_NE(ErrorOf(ReplaceLine(Valid(), 16, "    latency: [ttft, ttft]")).find("workloads[0].latency[1]: is listed twice"),
            std::string::npos)
      << ErrorOf(ReplaceLine(Valid(), 16, "    latency: [ttft, ttft]"));
  const Campaign gated = ParseCampaign(Valid() + "gate:\n  families: [{workload: w, metric: ttft, percentile: 99}]\n", kFile);
  ASSERT_TRUE(gated.gate.families[0].id);
  EXPECT_EQ(*gated.gate.families[0].id, (store::FamilyId{.workload = "w", .metric = FamilyMetric::kTtft, .percentile = 99}));
  EXPECT_NE(ErrorOf(Valid() + "gate:\n  families: [{workload: w, metric: ttft}]\n").find("a ttft family needs 'percentile' (50, 90 or 99)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Valid() + "gate:\n  families: [{workload: w, metric: ttft, percentile: 95}]\n").find("'95' is not one of 50, 90, 99"),
            std::string::npos)
      << ErrorOf(Valid() + "gate:\n  families: [{workload: w, metric: ttft, percentile: 95}]\n");
  EXPECT_NE(ErrorOf(Valid() + "gate:\n  families: [{workload: w, metric: case, percentile: 99}]\n").find("is only for a latency family"),
            std::string::npos);
}

// The prefill matrix and exact retained context: their keys, defaults, the prompt source
// (found beside the campaign, its sha256 kept in the stored spec) and what they refuse.
TEST(CampaignYaml, PrefillCellsAndRetainedContextsAreTokenCountsFromAHashedSource) {
  const std::string head = Valid().substr(0, Valid().find("workloads:")) + "workloads:\n";
  const Campaign c = ParseCampaign(head +
                                       "  - {name: p, kind: prefill, bases: [0, 512], new_tokens: [64, 128, 256], tries: 2}\n"
                                       "  - {name: r, kind: retained_context, contexts: [0, 1024], thinking: [off, on], cases: [hello]}\n",
                                   kFile);
  const WorkloadSpec& p = c.workloads[0];
  EXPECT_EQ(p.kind, store::WorkloadKind::kPrefill);
  EXPECT_EQ(p.bases, (std::vector<int>{0, 512}));
  EXPECT_EQ(p.new_tokens, (std::vector<int>{64, 128, 256}));
  EXPECT_EQ(p.tries, 2);
  EXPECT_EQ(p.source, std::filesystem::path(TANDEM_SOURCE_DIR) / "campaigns" / "context-source.txt");
  EXPECT_EQ(p.source_sha256.size(), 64u);
  EXPECT_TRUE(p.latency.empty());
  const WorkloadSpec& r = c.workloads[1];
  EXPECT_EQ(r.contexts, (std::vector<int>{0, 1024}));
  EXPECT_EQ(r.thinking, (std::vector<std::string>{"off", "on"}));
  EXPECT_EQ(r.parent_max_tokens, 256);
  const nlohmann::json spec = WorkloadSpecJson(p);
  EXPECT_EQ(spec["source_sha256"], p.source_sha256);
  const std::string said = store::DescribeWorkload("p", p.kind, store::ReadWorkloadSettings(spec, "p"));
  EXPECT_NE(said.find("retained base 0 / 512 × new tokens 64 / 128 / 256"), std::string::npos) << said;
  EXPECT_NE(said.find(p.source_sha256.substr(0, 16)), std::string::npos) << said;
  const std::string retained = store::DescribeWorkload("r", r.kind, store::ReadWorkloadSettings(WorkloadSpecJson(r), "r"));
  EXPECT_NE(retained.find("fresh-launch control"), std::string::npos) << retained;
  EXPECT_NE(retained.find("thinking off / on"), std::string::npos) << retained;
  // A prefill cell is gated by base and new tokens.
  const Campaign gated = ParseCampaign(
      head + "  - {name: p, kind: prefill}\ngate:\n  families: [{workload: p, metric: prefill, base: 1024, new_tokens: 512}]\n", kFile);
  ASSERT_TRUE(gated.gate.families[0].id);
  EXPECT_EQ(gated.gate.families[0].id->context, 1024);
  EXPECT_EQ(gated.gate.families[0].id->new_tokens, 512);
  const std::map<std::string, std::string> refused = {
      {"  - {name: r, kind: retained_context, children: 2}", "workloads[0].children: is no longer used"},
      {"  - {name: p, kind: prefill, max_tokens: 8}", "workloads[0].max_tokens: is not used by a prefill workload"},
      {"  - {name: p, kind: prefill, cases: [hello]}", "workloads[0].cases: is not used by a prefill workload"},
      {"  - {name: p, kind: prefill, contexts: [8]}", "workloads[0].contexts: is not used by a prefill workload"},
      {"  - {name: p, kind: prefill, new_tokens: [8]}",
       "workloads[0].new_tokens[0]: 8 tokens cannot hold the prompt's own text and the chat template: use at least 32"},
      {"  - {name: p, kind: prefill, bases: [0, 16]}",
       "workloads[0].bases[1]: 16 tokens cannot hold the prompt's own text and the chat "
       "template: use 0 or at least 64"},
      {"  - {name: r, kind: retained_context, contexts: [-1]}", "workloads[0].contexts[0]: -1 is outside"},
      {"  - {name: p, kind: prefill, bases: []}", "workloads[0].bases: must be a non-empty list of numbers"},
      {"  - {name: p, kind: prefill, source: no-such-text.txt}",
       "the prompt source " + std::string(TANDEM_SOURCE_DIR) + "/campaigns/no-such-text.txt is not a file"},
      {"  - {name: b, kind: battery, bases: [0]}", "workloads[0].bases: is not used by a battery workload"},
      {"  - {name: r, kind: retained_context, thinking: [on, on]}", "workloads[0].thinking[1]: is listed twice"},
      {"  - {name: r, kind: retained_context, latency: [ttft]}", "workloads[0].latency: is not used by a retained_context workload"},
  };
  for (const auto& [line, want] : refused) {
    EXPECT_NE(ErrorOf(head + line + "\n").find(want), std::string::npos) << line << "\n  got  " << ErrorOf(head + line + "\n");
  }
  EXPECT_NE(ErrorOf(head + "  - {name: p, kind: prefill}\ngate:\n  families: [{workload: p, metric: prefill, base: 1024}]\n")
                .find("a prefill cell needs 'base' and 'new_tokens'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Valid() + "warmup:\n  - {name: p, kind: prefill}\n").find("a prefill workload cannot be a warmup"), std::string::npos)
      << ErrorOf(Valid() + "warmup:\n  - {name: p, kind: prefill}\n");
}

// `startup.discard` sets how many launches per arm and layout are not scored; a campaign
// that measures only launches lists no workloads (and no warmup).
TEST(CampaignYaml, StartupDiscardAndALaunchOnlyCampaign) {
  EXPECT_EQ(ParseCampaign(Valid(), kFile).startup.discard, 1);
  EXPECT_EQ(ParseCampaign(Valid() + "startup: {discard: 0}\n", kFile).startup.discard, 0);
  EXPECT_NE(ErrorOf(Valid() + "startup: {discard: -1}\n").find("test.yaml:17:20: startup.discard: -1 is outside [0, 1000]"),
            std::string::npos)
      << ErrorOf(Valid() + "startup: {discard: -1}\n");
  EXPECT_NE(ErrorOf(Valid() + "startup: {drop: 1}\n").find("unknown key 'drop'"), std::string::npos);
  const std::string launches_only = Valid().substr(0, Valid().find("workloads:")) + "workloads: []\n";
  EXPECT_TRUE(ParseCampaign(launches_only, kFile).workloads.empty());
  EXPECT_NE(ErrorOf(launches_only + "warmup: [{name: w, kind: battery}]\n").find("is empty while warmup is not"), std::string::npos)
      << ErrorOf(launches_only + "warmup: [{name: w, kind: battery}]\n");
}

// `conditions:` declares the GPUs' controls; a wrong key or value is named.
TEST(CampaignYaml, GpuConditionsAreDeclaredControls) {
  const Campaign c =
      ParseCampaign(Valid() + "conditions: {power_limit_w: 700, max_memory_clock_mhz: 2619, gpus: [GPU-a, GPU-b], sample_s: 1}\n", kFile);
  EXPECT_EQ(c.conditions.controls.power_limit_w, 700);
  EXPECT_EQ(c.conditions.controls.max_memory_clock_mhz, 2619);
  EXPECT_FALSE(c.conditions.controls.max_sm_clock_mhz);
  EXPECT_EQ(c.conditions.controls.gpus, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(c.conditions.sample_s, 1);
  EXPECT_FALSE(ParseCampaign(Valid(), kFile).conditions.controls.any());
  EXPECT_NE(ErrorOf(Valid() + "conditions: {power_watts: 700}\n").find("conditions: unknown key 'power_watts'"), std::string::npos)
      << ErrorOf(Valid() + "conditions: {power_watts: 700}\n");
  EXPECT_NE(ErrorOf(Valid() + "conditions: {sample_s: 0}\n").find("conditions.sample_s: 0 is outside [0.1, 3600]"), std::string::npos)
      << ErrorOf(Valid() + "conditions: {sample_s: 0}\n");
}

// A trained preset is a committed checkpoint: no seed, found through TANDEM_MODELS_DIR
// (or the source tree), and a clear error naming where it looked when it is not there.
TEST(CampaignYaml, TheTrainedPresetIsFoundOrNamedWhereItWasLookedFor) {
  const auto models = std::filesystem::temp_directory_path() / ("tandem-models-" + std::to_string(::getpid()));
  std::filesystem::remove_all(models);
  std::filesystem::create_directories(models / "mini");
  ::setenv("TANDEM_MODELS_DIR", models.c_str(), 1);
  const std::string mini = ReplaceLine(Valid(), 2, "model: {preset: mini}");
  const std::string missing = ErrorOf(mini);
  EXPECT_NE(
      missing.find(":2:17: model.preset: the mini preset's checkpoint is not at " + (models / "mini").string() + " (TANDEM_MODELS_DIR)"),
      std::string::npos)
      << missing;
  std::ofstream(models / "mini" / "config.json") << "{}";
  std::ofstream(models / "mini" / "model.safetensors") << "";
  const Campaign c = ParseCampaign(mini, kFile);
  EXPECT_EQ(c.model.preset, "mini");
  EXPECT_EQ(c.model.trained, models / "mini");
  EXPECT_TRUE(c.model.path.empty());
  const std::string seeded = ErrorOf(ReplaceLine(Valid(), 2, "model: {preset: mini, seed: 2}"));
  EXPECT_NE(seeded.find(":2:29: model.seed: the mini preset is a trained checkpoint"), std::string::npos) << seeded;
  ::unsetenv("TANDEM_MODELS_DIR");
  std::filesystem::remove_all(models);
}

TEST(CampaignYaml, ErrorsNameFileLineColumnAndKey) {
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"unknown top-level key", {ReplaceLine(Valid(), 12, "sesions: {per_layout: 4}"), ":12:1: (top level): unknown key 'sesions'"}},
      {"unknown nested key", {ReplaceLine(Valid(), 11, "    wokers: 2"), ":11:5: layouts[0]: unknown key 'wokers'"}},
      {"wrong type", {ReplaceLine(Valid(), 11, "    workers: two"), ":11:14: layouts[0].workers: 'two' is not a valid number here"}},
      {"out of range", {ReplaceLine(Valid(), 11, "    workers: -1"), ":11:14: layouts[0].workers: -1 is outside"}},
      {"missing executable",
       {ReplaceLine(Valid(), 7, "    source: {kind: binary, coordinator: /no/such/tandem-rt, worker: /no/such/tandem-rt}"), ":7:"}},
      {"unknown source kind", {ReplaceLine(Valid(), 7, "    source: {kind: svn}"), ":7:20: arms[1].source.kind: 'svn' is not one of"}},
      {"pattern letter without an arm", {ReplaceLine(Valid(), 12, "sessions: {per_layout: 4, order: ABCA}"), ":12:34: sessions.order:"}},
      {"unknown case",
       {ReplaceLine(Valid(), 16, "    cases: [hello, poetry]"), ":16:20: workloads[0].cases[1]: 'poetry' is not a case of"}},
      {"bad sampling", {ReplaceLine(Valid(), 16, "    sampling: hot"), ":16:15: workloads[0].sampling: must be 'greedy' or"}},
      {"duplicate key", {ReplaceLine(Valid(), 16, "    kind: battery"), ":16:5: workloads[0]: key 'kind' appears twice"}},
      {"duplicate label", {ReplaceLine(Valid(), 6, "  - label: a"), ": arms[1]: label 'a' is used twice"}},
      {"missing name", {ReplaceLine(Valid(), 1, "# no name"), ": (top level): 'name' is missing"}},
      {"bad CPU list",
       {ReplaceLine(Valid(), 11, "    workers: 2\n    worker_cpus: 3-1"), ":12:18: layouts[0].worker_cpus: '3-1' is not a CPU list"}},
      {"key of another kind", {ReplaceLine(Valid(), 15, "    kind: mixed"), ":16:12: workloads[0].cases: is not used by a mixed workload"}},
      {"emulated link without workers",
       {ReplaceLine(Valid(), 11, "    workers: 0\n    emulated_rtt_us: 500"), ":12:22: layouts[0].emulated_rtt_us: needs expert workers"}},
      {"emulated link with a command arm",
       {ReplaceLine(ReplaceLine(Valid(), 11, "    workers: 2\n    emulated_rtt_us: 500"), 7,
                    "    source: {kind: command, command: 'server --port {port}'}"),
        ":12:22: layouts[0].emulated_rtt_us: arm 'b' is a command arm"}},
      {"not YAML", {ReplaceLine(Valid(), 10, "  - name: [l"), ": not valid YAML:"}},
      {"API key variable that is no name",
       {ReplaceLine(Valid(), 8, "    api_key_env: my key"), ":8:18: arms[1].api_key_env: 'my key' is not an environment variable name"}},
      {"the worker token in env",
       {ReplaceLine(Valid(), 8, "    env: {TANDEM_WORKER_TOKEN: x}"), ":8:11: arms[1].env.TANDEM_WORKER_TOKEN: is set by the harness"}},
      {"env name that is no variable",
       {ReplaceLine(Valid(), 8, "    env: {OK: x, 'A B': y}"), ":8:18: arms[1].env.A B: is not an environment variable name"}},
      {"one arm",
       {ReplaceLine(ReplaceLine(Valid(), 7,
                                "    source: {kind: binary, coordinator: " + std::string(TANDEM_RT_BIN) +
                                    ", worker: " + std::string(TANDEM_RT_BIN) + "}"),
                    6, "  # b removed"),
        "arms: must list at least two arms"}},
  };
  for (const auto& [what, c] : cases) {
    const std::string error = ErrorOf(c.first);
    EXPECT_EQ(error.rfind(kFile, 0), 0u) << what << ": " << error;
    EXPECT_NE(error.find(c.second), std::string::npos) << what << ":\n  got  " << error << "\n  want " << c.second;
  }
}

// The campaign text the store keeps: secrets replaced where they stand, everything else as
// written (comments too); it still parses, to the same campaign but for the secrets.
// Past the bounds of what one YAML file may hold: refused with where and which bound, exit 2
// (a 56 MB file of 8 M options ended in "internal error: std::bad_alloc", exit 1; 600
// levels of nesting in "not valid YAML: bad file").
TEST(CampaignYaml, DocumentsPastTheirBoundsAreRefusedNamingTheBound) {
  const std::string deep = ReplaceLine(Valid(), 2, "model: " + std::string(600, '[') + std::string(600, ']'));
  EXPECT_NE(ErrorOf(deep).find("nests deeper than 64 levels"), std::string::npos) << ErrorOf(deep);
  EXPECT_EQ(ErrorOf(deep).rfind(std::string(kFile) + ":2:", 0), 0u) << ErrorOf(deep);
  std::string nested = "x";
  for (int i = 0; i < 70; ++i) nested = "[" + nested + "]";
  EXPECT_NE(ErrorOf(ReplaceLine(Valid(), 2, "model: " + nested)).find("nests deeper than 64 levels"), std::string::npos);

  std::string huge = Valid();
  huge.reserve(17 << 20);
  while (huge.size() <= (16u << 20)) huge += "# padding padding padding padding padding padding padding padding\n";
  EXPECT_NE(ErrorOf(huge).find("more than the 16 MiB a campaign or corpus file may have"), std::string::npos);

  std::string aliases = Valid() + "x-a0: &a0 [" + std::string(40, 'y') + "]\n";
  for (int i = 1; i < 8; ++i) {
    aliases += fmt::format("x-a{}: &a{} [", i, i);
    for (int k = 0; k < 10; ++k) aliases += fmt::format("{}*a{}", k == 0 ? "" : ", ", i - 1);
    aliases += "]\n";
  }
  EXPECT_NE(ErrorOf(aliases).find("more than 1000000 nodes"), std::string::npos) << ErrorOf(aliases);
}

// A flag the harness passes from the layout, given again in an arm's options, made the
// coordinator exit at once and the session read "did not report where it listens within
// 300 s"; it is refused where it is written, naming the layout key to use instead.
TEST(CampaignYaml, AnOptionTheLayoutAlreadySetsIsRefusedNamingTheKey) {
  EXPECT_EQ(ErrorOf(ReplaceLine(Valid(), 8, "    options: [--partial-dtype, f32]")),
            kFile +
                ":8:15: arms[1].options[0]: '--partial-dtype' is set from layouts[0] ('l') key partial_dtype: set partial_dtype there "
                "instead of passing the flag");
  EXPECT_NE(ErrorOf(ReplaceLine(Valid(), 8, "    worker_options: ['--threads=4']")).find("key worker_threads"), std::string::npos);
  EXPECT_NE(ErrorOf(ReplaceLine(Valid(), 8, "    options: [--listen, '0.0.0.0:1']")).find("set by the harness for every session"),
            std::string::npos);
  EXPECT_NE(ErrorOf(ReplaceLine(Valid(), 11, "    workers: 2\n    options: [--wire-dtype, fp8]")).find("layouts[0].options[0]"),
            std::string::npos);
  // Not set by this layout: allowed (coordinator_threads is 0, so --threads is the arm's to give).
  EXPECT_EQ(ErrorOf(Valid()), "(no error)");
}

TEST(CampaignYaml, TheStoredTextHasItsSecretsRedactedInPlace) {
  const std::string secret = ReplaceLine(Valid(), 8,
                                         "    options: [--threads, '2', --api-key, s3cr3t]  # the key\n"
                                         "    worker_options: '--worker-token=tok3n'\n"
                                         "    env: {HF_TOKEN: \"s3cr3t\", OMP_NUM_THREADS: '1', DB_PASSWORD: 'it''s'}") +
                             "    # end\n";
  const std::string stored = RedactCampaignYaml(secret);
  EXPECT_EQ(stored, ReplaceLine(Valid(), 8,
                                "    options: [--threads, '2', --api-key, \"<redacted>\"]  # the key\n"
                                "    worker_options: \"--worker-token=<redacted>\"\n"
                                "    env: {HF_TOKEN: \"<redacted>\", OMP_NUM_THREADS: '1', DB_PASSWORD: \"<redacted>\"}") +
                        "    # end\n");
  const Campaign c = ParseCampaign(stored, kFile);
  EXPECT_EQ(c.arms[1].options, (std::vector<std::string>{"--threads", "2", "--api-key", "<redacted>"}));
  EXPECT_EQ(c.arms[1].env.at("OMP_NUM_THREADS"), "1");
  // Nothing secret: the text as it was, byte for byte.
  EXPECT_EQ(RedactCampaignYaml(Valid()), Valid());
  // A block scalar cannot be replaced in place: the document is written anew, without the secret.
  const std::string block = ReplaceLine(Valid(), 8, "    env:\n      HF_TOKEN: |\n        s3cr3t\n      LANG: C");
  const std::string rewritten = RedactCampaignYaml(block);
  EXPECT_EQ(rewritten.find("s3cr3t"), std::string::npos) << rewritten;
  EXPECT_EQ(ParseCampaign(rewritten, kFile).arms[1].env.at("HF_TOKEN"), "<redacted>");
  EXPECT_EQ(ParseCampaign(rewritten, kFile).arms[1].env.at("LANG"), "C");
  // Command templates: the secret word only.
  const std::string command = ReplaceLine(
      Valid(), 7, "    source: {kind: command, command: 'srv --port {port} --api-key s3cr3t', worker_command: 'w --token=t0k {port}'}");
  const std::string redacted = RedactCampaignYaml(command);
  EXPECT_NE(redacted.find("command: \"srv --port {port} --api-key <redacted>\", worker_command: \"w --token=<redacted> {port}\"}"),
            std::string::npos)
      << redacted;
  const Campaign parsed = ParseCampaign(command, kFile);
  EXPECT_EQ(CampaignSecretValues(parsed), (std::vector<std::string>{"s3cr3t", "t0k"}));
}

// A container arm's run arguments may set the container's environment inside an option
// word (`--env=NAME=V`, `-eNAME=V`): a secret there is redacted like any other.
TEST(CampaignYaml, SecretsInContainerRunArgumentsAreRedacted) {
  const std::string container = ReplaceLine(Valid(), 7,
                                            "    source: {kind: container, engine: podman, coordinator_image: ds/c:1, run_args: "
                                            "[--env=HF_TOKEN=s3cr3t, -eAPI_KEY=k3y0, '-e OMP_NUM_THREADS=1', --gpus, all]}");
  const std::string stored = RedactCampaignYaml(container);
  EXPECT_NE(stored.find("run_args: [\"--env=HF_TOKEN=<redacted>\", \"-eAPI_KEY=<redacted>\", '-e OMP_NUM_THREADS=1', --gpus, all]}"),
            std::string::npos)
      << stored;
  const Campaign parsed = ParseCampaign(container, kFile);
  EXPECT_EQ(CampaignSecretValues(parsed), (std::vector<std::string>{"s3cr3t", "k3y0"}));
}

// Hosts, placements, container and mixed arms (campaigns across machines).
TEST(CampaignYaml, ClusterErrorsNameFileLineColumnAndKey) {
  const std::string hosts = Valid() + "hosts:\n  - {name: h1, ssh: root@10.0.0.1}\n";  // lines 17, 18
  const std::string bin = TANDEM_RT_BIN;
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"unknown worker host",
       {ReplaceLine(hosts, 11, "    worker_hosts: [h1, nope]"),
        ":11:24: layouts[0].worker_hosts[1]: 'nope' is not a host of the campaign (local, h1)"}},
      {"workers and worker_hosts disagree",
       {ReplaceLine(hosts, 11, "    workers: 3\n    worker_hosts: [h1, h1]"),
        ":11:14: layouts[0].workers: is 3, but worker_hosts names 2 workers"}},
      {"unknown coordinator host",
       {ReplaceLine(hosts, 11, "    coordinator_host: h9"), ":11:23: layouts[0].coordinator_host: 'h9' is not a host"}},
      {"peer host without a peer",
       {ReplaceLine(hosts, 11, "    peer_host: h1"), ":11:16: layouts[0].peer_host: is only used with coordinator_ranks: 2"}},
      {"a host named local",
       {ReplaceLine(hosts, 18, "  - {name: local, ssh: root@x}"), ":18:12: hosts[0].name: 'local' is the harness's own machine"}},
      {"two hosts, one name",
       {ReplaceLine(hosts, 18, "  - {name: h1, ssh: a@x}\n  - {name: h1, ssh: b@y}"), ":19:5: hosts[1]: host name 'h1' is used twice"}},
      {"ssh that is an option",
       {ReplaceLine(hosts, 18, "  - {name: h1, ssh: -oProxyCommand=x}"), ":18:21: hosts[0].ssh: '-oProxyCommand=x' is not user@host"}},
      {"unknown host key", {ReplaceLine(hosts, 18, "  - {name: h1, ssh: r@h, prot: 22}"), ": hosts[0]: unknown key 'prot'"}},
      {"bad port", {ReplaceLine(hosts, 18, "  - {name: h1, ssh: r@h, port: 70000}"), ":18:32: hosts[0].port: 70000 is outside"}},
      {"container without an engine",
       {ReplaceLine(hosts, 7, "    source: {kind: container, coordinator_image: ds/coord:v1}"),
        ":7:13: arms[1].source: 'engine' is missing"}},
      {"container with a bad pull",
       {ReplaceLine(hosts, 7, "    source: {kind: container, engine: podman, coordinator_image: a, pull: sometimes}"),
        ":7:75: arms[1].source.pull: 'sometimes' is not one of"}},
      {"container with a binary's key",
       {ReplaceLine(hosts, 7, "    source: {kind: container, engine: docker, coordinator_image: a, coordinator: /x}"),
        ": arms[1].source.coordinator: is not used by a 'container' source"}},
      {"binary with a container's key",
       {ReplaceLine(hosts, 7, "    source: {kind: binary, coordinator: " + bin + ", engine: docker}"),
        ": arms[1].source.engine: is not used by a 'binary' source"}},
      {"mixed from an unknown arm",
       {ReplaceLine(hosts, 7, "    coordinator_from: a\n    worker_from: zz"), ":8:18: arms[1].worker_from: 'zz' is not an arm label"}},
      {"mixed from a mixed arm",
       {ReplaceLine(hosts, 7, "    coordinator_from: b\n    worker_from: a"), ": arms[1].coordinator_from: arm 'b' is a mixed arm"}},
      {"mixed with a source too",
       {ReplaceLine(hosts, 6, "  - label: b\n    coordinator_from: a\n    worker_from: a"),
        ": arms[1].source: a mixed arm (coordinator_from / worker_from) takes its images"}},
      {"command arm on other hosts",
       {ReplaceLine(ReplaceLine(hosts, 11, "    worker_hosts: [h1, h1]"), 7,
                    "    source: {kind: command, command: 'server --port {port}'}"),
        ": layouts[0]: arm 'b' is a command arm, which runs on the harness's machine only"}},
  };
  for (const auto& [what, c] : cases) {
    const std::string error = ErrorOf(c.first);
    EXPECT_EQ(error.rfind(kFile, 0), 0u) << what << ": " << error;
    EXPECT_NE(error.find(c.second), std::string::npos) << what << ":\n  got  " << error << "\n  want " << c.second;
  }
  // And the valid forms parse.
  const Campaign c =
      ParseCampaign(ReplaceLine(ReplaceLine(hosts, 11, "    worker_hosts: [h1, local]\n    coordinator_host: h1"), 7,
                                "    source: {kind: container, engine: podman, coordinator_image: ds/c:1, run_args: [--gpus, all]}"),
                    kFile);
  ASSERT_EQ(c.hosts.size(), 2u);
  EXPECT_EQ(c.hosts[1].address, "10.0.0.1");
  EXPECT_EQ(c.layouts[0].workers, 2);
  EXPECT_EQ(WorkerHost(c.layouts[0], 1), "local");
  EXPECT_TRUE(c.uses_remote_hosts());
  EXPECT_EQ(c.arms[1].worker_image, "ds/c:1");
  EXPECT_EQ(c.arms[1].pull, "never");
  EXPECT_EQ(c.arms[1].run_args, (std::vector<std::string>{"--gpus", "all"}));
  EXPECT_FALSE(ParseCampaign(Valid(), kFile).uses_remote_hosts());
}

TEST(CampaignYaml, MissingFileIsAnError) {
  try {
    LoadCampaign("/no/such/campaign.yaml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/campaign.yaml: cannot open"), std::string::npos) << e.what();
  }
}

Campaign WithSessions(const std::string& sessions_line, int layouts = 1) {
  std::string yaml = ReplaceLine(Valid(), 12, sessions_line);
  if (layouts == 2) yaml = ReplaceLine(yaml, 11, "    workers: 2\n  - name: m\n    workers: 1");
  return ParseCampaign(yaml, kFile);
}

std::string Arms(const std::vector<PlannedSession>& plan) {
  std::string out;
  for (const PlannedSession& s : plan) out += s.arm;
  return out;
}

TEST(SessionPlan, PatternRepeatsToPerLayoutInEveryLayout) {
  const auto plan = PlanSessions(WithSessions("sessions: {per_layout: 8, order: ABBA}", 2));
  ASSERT_EQ(plan.size(), 16u);
  EXPECT_EQ(Arms(plan), "abbaabbaabbaabba");
  for (std::size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].order_index, static_cast<int>(i));
    EXPECT_EQ(plan[i].layout, i < 8 ? "l" : "m");
    EXPECT_EQ(plan[i].index_in_layout, static_cast<int>(i % 8));
  }
  EXPECT_EQ(Arms(PlanSessions(WithSessions("sessions: {per_layout: 5, order: AB}"))), "ababa");
}

TEST(SessionPlan, RandomIsBalancedSeededAndReproducible) {
  const auto one = PlanSessions(WithSessions("sessions: {per_layout: 8, order: random, seed: 7}"));
  const auto again = PlanSessions(WithSessions("sessions: {per_layout: 8, order: random, seed: 7}"));
  EXPECT_EQ(Arms(one), Arms(again));
  const std::string order = Arms(one);
  EXPECT_EQ(std::count(order.begin(), order.end(), 'a'), 4);
  // Different seeds give different orders (at least one of several).
  bool differs = false;
  for (int seed = 8; seed < 16; ++seed) {
    differs = differs ||
              Arms(PlanSessions(WithSessions("sessions: {per_layout: 8, order: random, seed: " + std::to_string(seed) + "}"))) != Arms(one);
  }
  EXPECT_TRUE(differs);
}

TEST(SessionPlan, SequentialCampaignsPlanTheirMaximumAndLookAfterEveryBlock) {
  const Campaign c = ParseCampaign(ReplaceLine(Valid(), 12, "sessions: {max_per_layout: 12, until: decided, order: ABBA}"), kFile);
  EXPECT_TRUE(c.sessions.until_decided);
  EXPECT_EQ(PlanSessions(c).size(), 12u);
  EXPECT_EQ(c.sessions.looks(c.arms.size()), (std::vector<int>{4, 8, 12}));
  EXPECT_EQ(c.sessions.precision, 0.0);
  EXPECT_DOUBLE_EQ(
      ParseCampaign(ReplaceLine(Valid(), 12, "sessions: {max_per_layout: 12, until: decided, precision: 0.15}"), kFile).sessions.precision,
      0.15);
  EXPECT_TRUE(ParseCampaign(ReplaceLine(Valid(), 12, "sessions: {per_layout: 4, order: ABBA, method: paired}"), kFile).sessions.paired);
  EXPECT_NE(
      ErrorOf(ReplaceLine(Valid(), 12, "sessions: {per_layout: 4, method: matched}")).find("sessions.method: 'matched' is not one of"),
      std::string::npos);
  const Campaign fixed = ParseCampaign(Valid(), kFile);
  EXPECT_EQ(fixed.sessions.looks(fixed.arms.size()), (std::vector<int>{4}));
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"sessions: {max_per_layout: 10, until: decided, order: ABBA}",
       ":12:28: sessions.max_per_layout: must be a whole number of ABBA blocks"},
      {"sessions: {max_per_layout: 8, order: ABBA}", "sessions.max_per_layout: needs until: decided"},
      {"sessions: {until: decided}", "sessions.until: needs max_per_layout"},
      {"sessions: {until: forever, max_per_layout: 8}", "sessions.until: 'forever' is not one of"},
      {"sessions: {per_layout: 4, max_per_layout: 8, until: decided}", "is for sequential campaigns; per_layout is set too"},
      {"sessions: {max_per_layout: 8, until: decided, order: [a, b, b, a]}", "a sequential campaign needs a pattern order"},
      {"sessions: {per_layout: 8, precision: 0.1}", "sessions.precision: is a stopping condition of sequential campaigns"},
      {"sessions: {max_per_layout: 8, until: decided, precision: 0}", "sessions.precision:"},
      {"sessions: {max_per_layout: 8, until: decided, precision: tight}", "sessions.precision:"},
  };
  for (const auto& [line, message] : errors) {
    const std::string e = ErrorOf(ReplaceLine(Valid(), 12, line));
    EXPECT_NE(e.find(message), std::string::npos) << line << ": " << e;
  }
}

TEST(SessionPlan, ExplicitListIsUsedAsWritten) {
  EXPECT_EQ(Arms(PlanSessions(WithSessions("sessions: {per_layout: 4, order: [b, a, a, b]}"))), "baab");
  EXPECT_NE(ErrorOf(ReplaceLine(Valid(), 12, "sessions: {per_layout: 4, order: [b, a, c, b]}")).find("'c' is not an arm label"),
            std::string::npos);
  EXPECT_NE(ErrorOf(ReplaceLine(Valid(), 12, "sessions: {per_layout: 4, order: [b, a]}"))
                .find("sessions.order: lists 2 sessions, but per_layout is 4"),
            std::string::npos);
  EXPECT_NE(ErrorOf(ReplaceLine(Valid(), 12, "sessions: {order: [b, b]}")).find("arm 'a' gets no session"), std::string::npos);
  EXPECT_NE(ErrorOf(ReplaceLine(Valid(), 12, "sessions: {per_layout: 2, order: AAB}")).find(":12:11: sessions: arm 'b' gets no session"),
            std::string::npos);
}

// A git arm names its repository and ref; both failure modes must say which arm and why.
class GitArm : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("tandem-gitarm-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "repo");
    std::ofstream(root_ / "repo" / "CMakeLists.txt") << "cmake_minimum_required(VERSION 3.16)\nproject(broken CXX)\n"
                                                        "message(FATAL_ERROR \"this revision does not configure\")\n";
    const auto r = testing::RunCommand(
        "/bin/sh", {"-c", "cd '" + (root_ / "repo").string() +
                              "' && git init -q && git add . && git -c user.name=t -c user.email=t@t commit -qm broken"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  ArmSpec Spec(const std::string& ref) const {
    ArmSpec a;
    a.label = "old";
    a.kind = ArmKind::kGit;
    a.repository = (root_ / "repo").string();
    a.ref = ref;
    return a;
  }
  std::filesystem::path root_;
};

TEST_F(GitArm, UnknownRefNamesTheArmAndRef) {
  try {
    ResolveArm(Spec("v99"), {.build = false, .build_cache = root_ / "cache"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("arm 'old': git cannot resolve ref 'v99'"), std::string::npos) << e.what();
  }
}

TEST_F(GitArm, DryRunResolvesWithoutBuilding) {
  const ResolvedArm r = ResolveArm(Spec("HEAD"), {.build = false, .build_cache = root_ / "cache"});
  EXPECT_EQ(r.revision.size(), 40u);
  EXPECT_FALSE(r.built);
  EXPECT_FALSE(std::filesystem::exists(root_ / "cache" / ("src-" + r.revision.substr(0, 12))));
}

TEST_F(GitArm, FailingBuildShowsTheEndOfItsLog) {
  try {
    ResolveArm(Spec("HEAD"), {.build = true, .build_cache = root_ / "cache"});
    FAIL();
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("arm 'old': cmake configure failed"), std::string::npos) << what;
    EXPECT_NE(what.find("this revision does not configure"), std::string::npos) << what;
  }
  // The worktree it checked out is registered with the repository (and reusable).
  const auto r = testing::RunCommand("/bin/sh", {"-c", "git -C '" + (root_ / "repo").string() + "' worktree list"});
  EXPECT_NE(r.out.find((root_ / "cache").string()), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem::harness
