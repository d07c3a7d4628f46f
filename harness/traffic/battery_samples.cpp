#include "harness/traffic/battery_samples.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_error.hpp"

namespace tandem::harness {

namespace {

using nlohmann::json;

const std::set<std::string, std::less<>> kKnownKeys = {"case", "weight", "completion_tokens", "t_first_output", "t_finish", "repeat"};

class SampleReader {
 public:
  SampleReader(const json& object, std::string_view source, std::size_t index)
      : object_(object), where_(fmt::format("{}: sample {}", source, index)) {}

  const std::string& where() const { return where_; }

  const json& Field(std::string_view key) const {
    const auto it = object_.find(key);
    if (it == object_.end()) throw Error(key, "is missing");
    return *it;
  }

  std::string String(std::string_view key) const {
    const json& v = Field(key);
    if (!v.is_string() || v.get_ref<const std::string&>().empty()) throw Error(key, "must be a non-empty string");
    return v.get<std::string>();
  }

  double Number(std::string_view key) const {
    const json& v = Field(key);
    if (!v.is_number()) throw Error(key, fmt::format("must be a number, got {}", v.dump()));
    return v.get<double>();
  }

  std::int64_t Integer(std::string_view key, std::int64_t min) const {
    const json& v = Field(key);
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw Error(key, fmt::format("is too large: {}", v.dump()));
    }
    if (!v.is_number_integer()) throw Error(key, fmt::format("must be an integer, got {}", v.dump()));
    const auto value = v.get<std::int64_t>();
    if (value < min) throw Error(key, fmt::format("must be at least {}, got {}", min, value));
    return value;
  }

  InputError Error(std::string_view key, std::string_view problem) const {
    return InputError(fmt::format("{}: '{}' {}", where_, key, problem));
  }

 private:
  const json& object_;
  std::string where_;
};

}  // namespace

std::vector<BatterySample> ParseBatterySamples(std::string_view json_text, std::string_view source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", source, e.what()));
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    throw InputError(fmt::format("{}: unusable JSON: {}", source, e.what()));
  }
  if (!doc.is_array()) {
    throw InputError(fmt::format("{}: expected a JSON array of samples, got {}", source, doc.type_name()));
  }
  if (doc.empty()) throw InputError(fmt::format("{}: the sample array is empty", source));

  std::vector<BatterySample> samples;
  samples.reserve(doc.size());
  std::map<std::string, std::pair<double, std::size_t>> weight_of_case;  // weight, first sample
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const json& object = doc[i];
    if (!object.is_object()) {
      throw InputError(fmt::format("{}: sample {} must be an object, got {}", source, i, object.type_name()));
    }
    const SampleReader in(object, source, i);
    for (const auto& [key, value] : object.items()) {
      if (!kKnownKeys.contains(key)) {
        throw InputError(
            fmt::format("{}: unknown key '{}' (known: case, weight, completion_tokens, "
                        "t_first_output, t_finish, repeat)",
                        in.where(), key));
      }
    }

    BatterySample s;
    s.request.case_name = in.String("case");
    s.request.weight = in.Number("weight");
    if (!(s.request.weight > 0.0)) throw in.Error("weight", fmt::format("must be positive, got {}", s.request.weight));
    s.request.timing.completion_tokens = in.Integer("completion_tokens", 1);
    s.request.timing.t_first_output = in.Number("t_first_output");
    s.request.timing.t_finish = in.Number("t_finish");
    if (!std::isfinite(s.request.timing.t_first_output) || !std::isfinite(s.request.timing.t_finish)) {
      throw InputError(fmt::format("{}: times must be finite", in.where()));
    }
    if (s.request.timing.t_finish < s.request.timing.t_first_output) {
      throw in.Error("t_finish",
                     fmt::format("({}) is before t_first_output ({})", s.request.timing.t_finish, s.request.timing.t_first_output));
    }
    s.repeat = object.contains("repeat") ? in.Integer("repeat", 0) : 0;

    const auto [it, inserted] = weight_of_case.try_emplace(s.request.case_name, s.request.weight, i);
    if (!inserted && it->second.first != s.request.weight) {
      throw in.Error("weight", fmt::format("is {} but sample {} gave case \"{}\" weight {}; a case has one weight", s.request.weight,
                                           it->second.second, s.request.case_name, it->second.first));
    }
    samples.push_back(std::move(s));
  }
  return samples;
}

std::vector<BatterySample> ReadBatterySamples(const std::filesystem::path& file) {
  if (std::filesystem::is_directory(file)) {
    throw InputError(fmt::format("{}: is a directory, expected a JSON samples file", file.string()));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the samples file", file.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("{}: read error", file.string()));
  return ParseBatterySamples(text.str(), file.string());
}

}  // namespace tandem::harness
