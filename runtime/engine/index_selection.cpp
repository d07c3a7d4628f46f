#include "runtime/engine/index_selection.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem::rt {

std::vector<bool> CandidateBlocks(std::span<const float> score, std::int64_t visible, int topk_blocks, int block_size) {
  const std::int64_t blocks = (visible + block_size - 1) / block_size;
  std::vector<float> best(static_cast<std::size_t>(blocks), -INFINITY);
  for (std::int64_t t = 0; t < visible; ++t) {
    float& b = best[static_cast<std::size_t>(t / block_size)];
    b = std::max(b, score[static_cast<std::size_t>(t)]);
  }
  if (visible > 0) best[static_cast<std::size_t>((visible - 1) / block_size)] = INFINITY;  // the newest block always
  std::vector<std::int64_t> order(static_cast<std::size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  const auto picks = std::min<std::int64_t>(topk_blocks, blocks);
  std::partial_sort(order.begin(), order.begin() + picks, order.end(), [&](std::int64_t a, std::int64_t b) {
    const float x = best[static_cast<std::size_t>(a)], y = best[static_cast<std::size_t>(b)];
    return x != y ? x > y : a < b;
  });
  std::vector<bool> mask(static_cast<std::size_t>(visible), false);
  for (std::int64_t i = 0; i < picks; ++i) {
    const std::int64_t b = order[static_cast<std::size_t>(i)];
    if (best[static_cast<std::size_t>(b)] == -INFINITY) continue;
    for (std::int64_t t = b * block_size; t < std::min(visible, (b + 1) * block_size); ++t) mask[static_cast<std::size_t>(t)] = true;
  }
  return mask;
}

void TopPositions(std::span<const float> score, std::int64_t visible, int k, std::int32_t offset, std::int32_t* out) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(visible));
  std::iota(order.begin(), order.end(), 0);
  const auto picks = std::min<std::int64_t>(k, visible);
  std::partial_sort(order.begin(), order.begin() + picks, order.end(), [&](std::int64_t a, std::int64_t b) {
    const float x = score[static_cast<std::size_t>(a)], y = score[static_cast<std::size_t>(b)];
    return x != y ? x > y : a < b;
  });
  std::sort(order.begin(), order.begin() + picks);
  for (std::int64_t i = 0; i < k; ++i) out[i] = i < picks ? static_cast<std::int32_t>(order[static_cast<std::size_t>(i)]) + offset : -1;
}

}  // namespace tandem::rt
