#include "harness/campaign/campaign_secrets.hpp"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "common/redact.hpp"

namespace tandem::harness {

namespace {

// A scalar of the document and what it becomes.
struct Replacement {
  YAML::Node node;
  std::string value;
};

void RedactList(const YAML::Node& list, std::vector<Replacement>& out) {
  if (!list) return;
  if (list.IsScalar()) {
    const std::string redacted = RedactArgs({list.Scalar()}).front();
    if (redacted != list.Scalar()) out.push_back({list, redacted});
    return;
  }
  if (!list.IsSequence()) return;
  std::vector<std::string> items;
  for (const YAML::Node& item : list) items.push_back(item.IsScalar() ? item.Scalar() : std::string());
  const std::vector<std::string> redacted = RedactArgs(items);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (redacted[i] != items[i]) out.push_back({list[i], redacted[i]});
  }
}

// The scalars of a campaign document that hold secrets (the same keys ParseCampaign
// reads; anything malformed was refused there already).
std::vector<Replacement> SecretScalars(const YAML::Node& root) {
  std::vector<Replacement> out;
  if (!root.IsMap()) return out;
  if (const YAML::Node arms = root["arms"]; arms && arms.IsSequence()) {
    for (const YAML::Node& arm : arms) {
      if (!arm.IsMap()) continue;
      if (const YAML::Node env = arm["env"]; env && env.IsMap()) {
        for (const auto& kv : env) {
          if (kv.second.IsScalar() && IsSecretName(kv.first.Scalar()) && kv.second.Scalar() != kRedacted) {
            out.push_back({kv.second, std::string(kRedacted)});
          }
        }
      }
      RedactList(arm["options"], out);
      RedactList(arm["worker_options"], out);
      if (const YAML::Node source = arm["source"]; source && source.IsMap()) {
        for (const char* key : {"command", "worker_command"}) {
          const YAML::Node command = source[key];
          if (!command || !command.IsScalar()) continue;
          const std::string redacted = RedactShellCommand(command.Scalar());
          if (redacted != command.Scalar()) out.push_back({command, redacted});
        }
        RedactList(source["run_args"], out);
      }
    }
  }
  if (const YAML::Node layouts = root["layouts"]; layouts && layouts.IsSequence()) {
    for (const YAML::Node& layout : layouts) {
      if (layout.IsMap()) RedactList(layout["options"], out);
    }
  }
  return out;
}

// Where the scalar starting at `pos` ends in the text: after its closing quote, or after
// `value` written plainly on one line. nullopt for what this cannot delimit (block
// scalars, plain scalars folded over lines).
std::optional<std::size_t> ScalarEnd(std::string_view text, std::size_t pos, const std::string& value) {
  if (pos >= text.size()) return std::nullopt;
  if (text[pos] == '\'') {
    for (std::size_t i = pos + 1; i < text.size(); ++i) {
      if (text[i] != '\'') continue;
      if (i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is a quote inside
        continue;
      }
      return i + 1;
    }
    return std::nullopt;
  }
  if (text[pos] == '"') {
    for (std::size_t i = pos + 1; i < text.size(); ++i) {
      if (text[i] == '\\') {
        ++i;
      } else if (text[i] == '"') {
        return i + 1;
      }
    }
    return std::nullopt;
  }
  if (text[pos] == '|' || text[pos] == '>') return std::nullopt;
  if (text.substr(pos, value.size()) != value) return std::nullopt;
  const std::size_t end = pos + value.size();
  if (end < text.size() && std::string_view(" \t\r\n,]}#").find(text[end]) == std::string_view::npos) return std::nullopt;
  return end;
}

// The same document, ignoring how it is written (styles, tags, comments).
bool SameDocument(const YAML::Node& a, const YAML::Node& b) {
  if (a.Type() != b.Type()) return false;
  switch (a.Type()) {
    case YAML::NodeType::Scalar:
      return a.Scalar() == b.Scalar();
    case YAML::NodeType::Sequence:
    case YAML::NodeType::Map: {
      if (a.size() != b.size()) return false;
      auto i = a.begin();
      auto j = b.begin();
      for (; i != a.end(); ++i, ++j) {
        if (a.IsMap() ? !SameDocument(i->first, j->first) || !SameDocument(i->second, j->second) : !SameDocument(*i, *j)) return false;
      }
      return true;
    }
    default:
      return true;
  }
}

}  // namespace

std::string RedactCampaignYaml(std::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception&) {
    return std::string(text);  // never stored: ParseCampaign refuses it first
  }
  const std::vector<Replacement> replacements = SecretScalars(root);
  if (replacements.empty()) return std::string(text);
  // In place, from the end of the text back, each scalar as a JSON string (which YAML
  // reads as a double-quoted scalar). The order is kept in indices: assigning one
  // YAML::Node to another (as sorting would) rebinds it inside the document.
  std::vector<std::size_t> order(replacements.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return replacements[a].node.Mark().pos > replacements[b].node.Mark().pos; });
  std::string out(text);
  bool in_place = true;
  for (const std::size_t i : order) {
    const Replacement& r = replacements[i];
    const auto pos = static_cast<std::size_t>(r.node.Mark().pos);
    const std::optional<std::size_t> end = ScalarEnd(out, pos, r.node.Scalar());
    if (!end) {
      in_place = false;
      break;
    }
    out.replace(pos, *end - pos, nlohmann::json(r.value).dump());
  }
  for (const Replacement& r : replacements) {
    YAML::Node node = r.node;  // a handle on the same scalar of the document
    node = r.value;            // the document as it must read now
  }
  // The text edited in place must read as exactly that document; else write the document.
  if (in_place) {
    try {
      if (SameDocument(YAML::Load(out), root)) return out;
    } catch (const YAML::Exception&) {
    }
  }
  YAML::Emitter emitter;
  emitter << root;
  return std::string("# secrets redacted by tandem; comments of the original file dropped\n") + emitter.c_str() + "\n";
}

std::vector<std::string> CampaignSecretValues(const Campaign& c) {
  std::vector<std::string> values;
  const auto add = [&](std::vector<std::string> more) { values.insert(values.end(), more.begin(), more.end()); };
  for (const ArmSpec& arm : c.arms) {
    add(SecretValuesOfEnv(arm.env));
    add(SecretValuesOfArgs(arm.options));
    add(SecretValuesOfArgs(arm.worker_options));
    add(SecretValuesOfArgs(arm.run_args));
    add(SecretValuesOfShellCommand(arm.coordinator_command));
    add(SecretValuesOfShellCommand(arm.worker_command));
  }
  for (const LayoutSpec& layout : c.layouts) add(SecretValuesOfArgs(layout.options));
  return values;
}

}  // namespace tandem::harness
