#pragma once

#include <cstdint>
#include <span>
#include <vector>

// Which compressed positions a query of DeepSeek V4.1 attends to, from its indexer
// scores over the visible positions: the candidate blocks a candidate source publishes,
// and the top-k positions. Ties go to the lower position (the reference's topk leaves
// their order unspecified).
namespace tandem::rt {

// The best `topk_blocks` blocks of `block_size` positions by their highest score among
// the `visible` first ones, the block of the newest visible position always among them;
// blocks with no finite score are never picked. Returns a mask over the visible positions.
std::vector<bool> CandidateBlocks(std::span<const float> score, std::int64_t visible, int topk_blocks, int block_size);

// The min(k, visible) best visible positions by score (masked ones: −inf), in ascending
// order, each plus `offset`, then −1 up to k.
void TopPositions(std::span<const float> score, std::int64_t visible, int k, std::int32_t offset, std::int32_t* out);

}  // namespace tandem::rt
