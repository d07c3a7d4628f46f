#include "runtime/model/json_bounds.hpp"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::rt {

namespace {

using json = nlohmann::json;

// Counts as nlohmann's SAX parser reads; returning false stops the parse.
class BoundsCounter final : public nlohmann::json_sax<json> {
 public:
  explicit BoundsCounter(const JsonBounds& bounds) : bounds_(bounds) {}
  std::optional<JsonExcess> excess;

  bool null() override { return Element(); }
  bool boolean(bool) override { return Element(); }
  bool number_integer(number_integer_t) override { return Element(); }
  bool number_unsigned(number_unsigned_t) override { return Element(); }
  bool number_float(number_float_t, const string_t&) override { return Element(); }
  bool string(string_t&) override { return Element(); }
  bool binary(binary_t&) override { return Element(); }
  bool start_object(std::size_t) override { return Open(true); }
  bool key(string_t&) override {
    if (++levels_.back().members <= bounds_.max_object_members) return true;
    excess = JsonExcess{JsonExcess::Kind::kObjectMembers, bounds_.max_object_members};
    return false;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Level {
    bool object;
    std::size_t members;
  };

  // A value in an array is one of its elements (in an object, its key was counted).
  bool Element() {
    if (levels_.empty() || levels_.back().object || ++levels_.back().members <= bounds_.max_array_elements) return true;
    excess = JsonExcess{JsonExcess::Kind::kArrayElements, bounds_.max_array_elements};
    return false;
  }
  bool Open(bool object) {
    if (!Element()) return false;
    if (static_cast<int>(levels_.size()) >= bounds_.max_depth) {
      excess = JsonExcess{JsonExcess::Kind::kDepth, static_cast<std::size_t>(bounds_.max_depth)};
      return false;
    }
    levels_.push_back({object, 0});
    return true;
  }
  bool Close() {
    levels_.pop_back();
    return true;
  }

  const JsonBounds& bounds_;
  std::vector<Level> levels_;
};

}  // namespace

std::optional<JsonExcess> FindJsonExcess(std::string_view text, const JsonBounds& bounds) {
  BoundsCounter counter(bounds);
  json::sax_parse(text, &counter, nlohmann::detail::input_format_t::json, /*strict=*/true);
  return counter.excess;
}

}  // namespace tandem::rt
