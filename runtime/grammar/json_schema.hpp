#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

// Structured outputs: a JSON schema compiled into the node graph the byte matcher
// walks (runtime/grammar/json_matcher.hpp).
namespace tandem::rt {

// A schema the matcher cannot enforce; `what()` names the feature and where it is.
class SchemaError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct SchemaNode {
  enum Type : std::uint32_t {
    kObject = 1,
    kArray = 2,
    kString = 4,
    kNumber = 8,
    kInteger = 16,
    kBoolean = 32,
    kNull = 64,
    kAnyType = 127,
  };
  std::uint32_t types = kAnyType;  // a bit set of the allowed types
  // enum / const: the allowed values, each as compact JSON text; empty: no such limit.
  std::vector<std::string> literals;
  // object
  struct Property {
    std::string name;
    int node = 0;
    bool required = false;
  };
  std::vector<Property> properties;  // in schema order; the matcher emits them in this order
  std::vector<std::string> keys;     // each property's name as a JSON string, quotes included
  bool closed = false;               // additionalProperties: false (only `properties` allowed)
  int additional = -1;               // node of additional properties' values (-1: any value)
  // array
  int items = -1;  // -1: any value
  int min_items = 0, max_items = -1;
  // string (lengths in code points)
  int min_length = 0, max_length = -1;
};

// An immutable compiled schema. Supported: type (one or a list), enum, const,
// properties, required, additionalProperties (false, true or a schema), items,
// minItems/maxItems, minLength/maxLength, and the annotations title, description,
// default, examples, $schema, $id. Anything else (pattern, format, anyOf, $ref,
// minimum, …) is refused with a SchemaError naming it and its path: a constraint
// that is not enforced would let invalid output through.
class JsonGrammar {
 public:
  // Bounds on what one schema may cost to compile and to match: schemas nested in
  // properties, items and additionalProperties; schemas in all; enum values or
  // properties of one object. Beyond them, Compile throws a SchemaError naming the limit.
  static constexpr int kMaxDepth = 16;
  static constexpr int kMaxNodes = 1024;
  static constexpr std::size_t kMaxChoices = 64;

  // Properties keep the order the schema lists them in (hence ordered_json).
  static std::shared_ptr<const JsonGrammar> Compile(const nlohmann::ordered_json& schema);
  // Any JSON object (response_format json_object).
  static std::shared_ptr<const JsonGrammar> AnyObject();

  const SchemaNode& node(int i) const { return nodes_[static_cast<std::size_t>(i)]; }
  int root() const { return 0; }

 private:
  int Add(const nlohmann::ordered_json& schema, const std::string& path, int depth);
  std::vector<SchemaNode> nodes_;
};

}  // namespace tandem::rt
