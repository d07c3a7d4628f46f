#include "harness/campaign/yaml_reader.hpp"

#include <utility>
#include <vector>

#include <yaml-cpp/depthguard.h>

namespace tandem::harness::yaml {

namespace {

std::string Where(const std::string& file, const YAML::Mark& m) {
  return m.is_null() ? file : fmt::format("{}:{}:{}", file, m.line + 1, m.column + 1);
}

// Walks the document as a reader of it would, every alias followed, and stops at the
// first bound crossed: nothing that reads it later can take more.
void CheckExpandedSize(const YAML::Node& root, const std::string& file) {
  std::vector<std::pair<YAML::Node, int>> stack{{root, 1}};
  std::size_t nodes = 0, scalar_bytes = 0;
  while (!stack.empty()) {
    auto [node, depth] = std::move(stack.back());
    stack.pop_back();
    if (++nodes > kMaxYamlNodes) {
      throw InputError(fmt::format("{}: the YAML expands to more than {} nodes (each use of an alias counts); the limit is {}",
                                   Where(file, node.Mark()), kMaxYamlNodes, kMaxYamlNodes));
    }
    if (depth > kMaxYamlDepth) {
      throw InputError(fmt::format("{}: the YAML nests deeper than {} levels, the limit", Where(file, node.Mark()), kMaxYamlDepth));
    }
    if (node.IsScalar()) {
      scalar_bytes += node.Scalar().size();
      if (scalar_bytes > kMaxYamlScalarBytes) {
        throw InputError(fmt::format("{}: the YAML's values add up to more than {} MiB (each use of an alias counts); the limit",
                                     Where(file, node.Mark()), kMaxYamlScalarBytes >> 20));
      }
    } else if (node.IsMap()) {
      for (const auto& kv : node) {
        stack.emplace_back(kv.first, depth + 1);
        stack.emplace_back(kv.second, depth + 1);
      }
    } else if (node.IsSequence()) {
      for (const auto& item : node) stack.emplace_back(item, depth + 1);
    }
  }
}

}  // namespace

YAML::Node Load(const std::string& text, const std::string& file) {
  if (text.size() > kMaxYamlBytes) {
    throw InputError(
        fmt::format("{}: {} bytes, more than the {} MiB a campaign or corpus file may have", file, text.size(), kMaxYamlBytes >> 20));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own guard, which says only "bad file".
    throw InputError(fmt::format("{}: the YAML nests deeper than {} levels, the limit", Where(file, e.mark), kMaxYamlDepth));
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}: not valid YAML: {}", Where(file, e.mark), e.msg));
  }
  CheckExpandedSize(root, file);
  return root;
}

}  // namespace tandem::harness::yaml
