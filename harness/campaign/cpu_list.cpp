#include "harness/campaign/cpu_list.hpp"

#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "common/input_error.hpp"

namespace tandem::harness {

std::vector<int> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    const auto dash = part.find('-');
    try {
      const int first = std::stoi(part.substr(0, dash));
      const int last = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
      if (first < 0 || last < first || last > 4095) throw std::out_of_range("cpu");
      for (int c = first; c <= last; ++c) cpus.push_back(c);
    } catch (const std::exception&) {
      throw InputError(fmt::format("'{}' is not a CPU list like 0-3,6", text));
    }
  }
  if (cpus.empty()) throw InputError(fmt::format("'{}' is not a CPU list like 0-3,6", text));
  return cpus;
}

}  // namespace tandem::harness
