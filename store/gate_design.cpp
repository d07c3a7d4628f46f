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
      d.families = Field<std::vector<std::string>>(g, "families", where);
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
  const json g = {{"version", kVersion},
                  {"baseline", baseline},
                  {"candidate", candidate},
                  {"families", families},
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
