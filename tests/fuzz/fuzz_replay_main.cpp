// Stands in for libFuzzer's main when the fuzz targets are built with GCC: feeds
// each file of the given corpus directories to LLVMFuzzerTestOneInput, then a fixed
// number of deterministic mutations of it (byte flips, truncations, splices), so
// that CI exercises every parser without clang. Any crash or sanitizer report fails.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Bytes = std::vector<std::uint8_t>;

void Run(const Bytes& input) { LLVMFuzzerTestOneInput(input.data(), input.size()); }

Bytes Mutate(const Bytes& seed, const std::vector<Bytes>& corpus, std::mt19937_64& rng) {
  Bytes out = seed;
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t pos = out.empty() ? 0 : rng() % out.size();
    switch (rng() % 5) {
      case 0:  // flip a bit
        if (!out.empty()) out[pos] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // truncate
        out.resize(pos);
        break;
      case 2:  // insert an interesting byte
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<std::uint8_t>("\0\xff{}[]\",:-.0e9\\"[rng() % 16]));
        break;
      case 3:  // delete a byte
        if (!out.empty()) out.erase(out.begin() + static_cast<std::ptrdiff_t>(pos));
        break;
      default: {  // splice in a piece of another corpus file
        const Bytes& other = corpus[rng() % corpus.size()];
        if (other.empty()) break;
        const std::size_t from = rng() % other.size();
        const std::size_t len = std::min<std::size_t>(other.size() - from, 1 + rng() % 64);
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(pos), other.begin() + static_cast<std::ptrdiff_t>(from),
                   other.begin() + static_cast<std::ptrdiff_t>(from + len));
      }
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr int kMutationsPerFile = 2000;
  std::vector<Bytes> corpus;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(argv[i])) {
      for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else {
      files.emplace_back(argv[i]);
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "fuzz replay: cannot read %s\n", file.c_str());
        return 1;
      }
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "fuzz replay: no corpus files given\n");
    return 1;
  }
  std::mt19937_64 rng(20261130);
  for (const Bytes& seed : corpus) {
    Run(seed);
    for (int m = 0; m < kMutationsPerFile; ++m) Run(Mutate(seed, corpus, rng));
  }
  std::printf("fuzz replay: %zu corpus files, %d mutations each, no failure\n", corpus.size(), kMutationsPerFile);
  return 0;
}
