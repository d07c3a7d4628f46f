#include "store/gate_design.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"

namespace tandem::store {

namespace {

using nlohmann::json;

// A key's value, with its type checked; `where` and `key` name it in errors.
template <class T>
T Field(const json& g, const char* key, const std::string& where) {
  try {
    return g.at(key).get<T>();
  } catch (const json::exception&) {
    throw InputError(fmt::format("{}: '{}' is {}, not what a gate design holds there", where, key, g.at(key).dump()));
  }
}

// A string key that must be one of two words: true for the second.
bool SecondOf(const json& g, const char* key, const std::string& where, const char* first, const char* second) {
  const auto word = Field<std::string>(g, key, where);
  if (word != first && word != second)
    throw InputError(fmt::format("{}: {} '{}' is neither '{}' nor '{}'", where, key, word, first, second));
  return word == second;
}

}  // namespace

FamilySelector ReadSelector(const json& f, const std::string& where) {
  if (f.is_string()) return {f.get<std::string>(), std::nullopt};
  if (!f.is_object()) throw InputError(fmt::format("{}: {} is neither a family's label nor its id", where, f.dump()));
  FamilyId id;
  for (const auto& item : f.items()) {
    // Named, not bound: clang 14 (the fuzzers' compiler) cannot capture a structured binding.
    const std::string& key = item.key();
    const json& value = item.value();
    const auto text = [&] {
      if (!value.is_string()) throw InputError(fmt::format("{}: '{}' is {}, not text", where, key, value.dump()));
      return value.get<std::string>();
    };
    const auto number = [&] {
      if (!value.is_number_integer()) throw InputError(fmt::format("{}: '{}' is {}, not a whole number", where, key, value.dump()));
      return value.get<int>();
    };
    if (key == "workload") {
      id.workload = text();
    } else if (key == "metric") {
      id.metric = ParseFamilyMetric(text(), where);
    } else if (key == "case") {
      id.case_id = text();
    } else if (key == "level") {
      id.level = number();
    } else if (key == "context") {
      id.context = number();
    } else if (key == "new_tokens") {
      id.new_tokens = number();
    } else if (key == "percentile") {
      id.percentile = number();
    } else if (key == "sampling") {
      const std::string word = text();
      if (word != "greedy" && word != "sampled")
        throw InputError(fmt::format("{}: sampling '{}' is neither greedy nor sampled", where, word));
      id.greedy = word == "greedy";
    } else {
      throw InputError(fmt::format(
          "{}: unknown key '{}' in a family's id (known: workload, metric, case, level, context, new_tokens, percentile, sampling)", where,
          key));
    }
  }
  if (id.workload.empty() || !f.contains("metric"))
    throw InputError(fmt::format("{}: a family's id {} needs workload and metric", where, f.dump()));
  return {"", id};
}

json SelectorJson(const FamilyId& id) {
  json j = {{"workload", id.workload}, {"metric", std::string(ToString(id.metric))}};
  if (!id.case_id.empty()) j["case"] = id.case_id;
  if (id.level != 1) j["level"] = id.level;
  if (id.context != 0) j["context"] = id.context;
  if (id.new_tokens != 0) j["new_tokens"] = id.new_tokens;
  if (id.percentile != 0) j["percentile"] = id.percentile;
  if (id.greedy) j["sampling"] = *id.greedy ? "greedy" : "sampled";
  return j;
}

GateDesign GateDesign::FromJson(const std::string& text, const std::string& where) {
  if (text.empty()) return {};  // a campaign recorded without a gate section
  const json g = json::parse(text, nullptr, false);
  if (g.is_discarded() || !g.is_object()) throw InputError(fmt::format("{}: not a JSON object: {}", where, text));
  GateDesign d;
  for (const auto& [key, value] : g.items()) {
    if (key == "version") {
      const int version = Field<int>(g, "version", where);
      if (version < 1 || version > kVersion) {
        throw InputError(
            fmt::format("{}: gate design version {}; this Tandem reads up to {} (a newer Tandem wrote it?)", where, version, kVersion));
      }
    } else if (key == "baseline") {
      d.baseline = Field<std::string>(g, "baseline", where);
    } else if (key == "candidate") {
      d.candidate = Field<std::string>(g, "candidate", where);
    } else if (key == "families") {
      if (!value.is_array()) throw InputError(fmt::format("{}: 'families' is {}, not a list", where, value.dump()));
      for (const json& f : value) d.families.push_back(ReadSelector(f, where + ": families"));
    } else if (key == "max_regression") {
      d.max_regression = Field<double>(g, "max_regression", where);
      if (!(d.max_regression >= 0 && d.max_regression < 1)) {
        throw InputError(fmt::format("{}: max_regression {} is outside [0, 1)", where, d.max_regression));
      }
    } else if (key == "rule") {
      d.rule = SecondOf(g, "rule", where, "noninferior", "proven") ? Rule::kProven : Rule::kNoninferior;
    } else if (key == "require_identical_greedy") {
      d.require_identical_greedy = Field<bool>(g, "require_identical_greedy", where);
    } else if (key == "alpha") {
      d.alpha = Field<double>(g, "alpha", where);
      if (!(d.alpha > 0 && d.alpha < 0.5)) throw InputError(fmt::format("{}: alpha {} is outside (0, 0.5)", where, d.alpha));
    } else if (key == "looks") {
      d.looks = Field<std::vector<int>>(g, "looks", where);
    } else if (key == "block") {
      d.block = Field<int>(g, "block", where);
      if (d.block < 1) throw InputError(fmt::format("{}: block {} is not positive", where, d.block));
    } else if (key == "sequential") {
      d.sequential = Field<bool>(g, "sequential", where);
    } else if (key == "precision") {
      d.precision = Field<double>(g, "precision", where);
      if (!(d.precision >= 0 && d.precision < 1)) throw InputError(fmt::format("{}: precision {} is outside [0, 1)", where, d.precision));
    } else if (key == "method") {
      d.method = SecondOf(g, "method", where, "welch", "paired") ? Method::kPaired : Method::kWelch;
    } else if (key == "extended") {
      if (!value.is_array()) throw InputError(fmt::format("{}: 'extended' is {}, not a list", where, value.dump()));
      for (const json& e : value) {
        if (!e.is_object() || !e.contains("from") || !e.contains("to")) {
          throw InputError(fmt::format("{}: an 'extended' entry {} lacks from and to", where, e.dump()));
        }
        d.extended.push_back({Field<int>(e, "from", where), Field<int>(e, "to", where)});
      }
    } else {
      throw InputError(fmt::format("{}: unknown key '{}' in the gate design", where, key));
    }
  }
  return d;
}

std::string GateDesign::ToJson() const {
  json extensions = json::array();
  for (const Extension& e : extended) extensions.push_back({{"from", e.from}, {"to", e.to}});
  json selectors = json::array();
  bool structured = false;
  for (const FamilySelector& f : families) {
    selectors.push_back(f.id ? SelectorJson(*f.id) : json(f.label));
    structured = structured || f.id.has_value();
  }
  // Version 1 readers know labels only: a design naming a family by its id says 2.
  const json g = {{"version", structured ? 2 : 1},
                  {"baseline", baseline},
                  {"candidate", candidate},
                  {"families", selectors},
                  {"max_regression", max_regression},
                  {"rule", rule == Rule::kProven ? "proven" : "noninferior"},
                  {"require_identical_greedy", require_identical_greedy},
                  {"alpha", alpha},
                  {"looks", looks},
                  {"block", block},
                  {"sequential", sequential},
                  {"precision", precision},
                  {"method", method == Method::kPaired ? "paired" : "welch"},
                  {"extended", extensions}};
  return g.dump();
}

}  // namespace tandem::store
