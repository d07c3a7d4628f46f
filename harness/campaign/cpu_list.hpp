#pragma once

#include <string>
#include <vector>

namespace tandem::harness {

// Parses "0-3,6" into CPU indices (a layout's `coordinator_cpus` / `worker_cpus`);
// throws InputError naming the text.
std::vector<int> ParseCpuList(const std::string& text);

}  // namespace tandem::harness
