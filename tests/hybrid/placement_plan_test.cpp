#include "runtime/hybrid/placement_plan.hpp"

#include <gtest/gtest.h>

#include "runtime/model/synthetic_checkpoint.hpp"

namespace tandem::rt {
namespace {

ModelConfig Tiny() { return FindPreset("tiny").config; }  // MoE layers 1, 2, 3; 16 experts; intermediate 64

TEST(PlacementPlan, TensorParallelSlicesEveryExpert) {
  const PlacementPlan p = PlacementPlan::Compute(Tiny(), {.workers = {"a:1", "b:2", "c:3"}});
  ASSERT_EQ(p.ranks.size(), 4u);
  EXPECT_EQ(p.OwnersOf(1), (std::vector<int>{0, 1, 2, 3})) << "rank 0 keeps the shared experts";
  const LayerSlice& s = p.ranks[2].slices[0];
  EXPECT_EQ(s.expert_begin, 0);
  EXPECT_EQ(s.expert_end, 16);
  EXPECT_EQ(s.inter_begin, 22);  // 64 = 22 + 21 + 21
  EXPECT_EQ(s.inter_end, 43);
  EXPECT_FALSE(p.ranks[0].slices[0].HoldsRouted());
  EXPECT_EQ(p.ranks[0].slices[0].shared_end, 64);
}

TEST(PlacementPlan, ExpertParallelPartitionsExperts) {
  const PlacementPlan p = PlacementPlan::Compute(Tiny(), {.workers = {"a:1", "b:2", "c:3", "d:4"}, .parallel = ExpertParallel::kExpert});
  for (int w = 0; w < 4; ++w) {
    const LayerSlice& s = p.ranks[static_cast<std::size_t>(w + 1)].slices[0];
    EXPECT_EQ(s.expert_begin, 4 * w);
    EXPECT_EQ(s.expert_end, 4 * w + 4);
    EXPECT_EQ(s.inter_end, 64);
  }
}

TEST(PlacementPlan, LocalLayersAndTwoCoordinatorRanks) {
  const PlacementPlan p =
      PlacementPlan::Compute(Tiny(), {.workers = {"a:1", "b:2"}, .local_expert_layers = 2, .coordinator_ranks = 2, .peer = "p:9"});
  ASSERT_EQ(p.ranks.size(), 4u);
  EXPECT_EQ(p.ranks[1].role, "peer");
  EXPECT_EQ(p.OwnersOf(1), (std::vector<int>{0, 1}));
  EXPECT_EQ(p.OwnersOf(2), (std::vector<int>{0, 1}));
  EXPECT_EQ(p.OwnersOf(3), (std::vector<int>{0, 1, 2, 3})) << "shared halves on 0 and 1, routed on the workers";
  const LayerSlice& peer = p.ranks[1].slices[0];
  EXPECT_EQ(peer.inter_begin, 32);
  EXPECT_EQ(peer.inter_end, 64);
  EXPECT_EQ(peer.shared_begin, 32);
  EXPECT_NE(p.ToJson().find("\"role\": \"peer\""), std::string::npos);
}

// DeepSeek V4.1's cuts: routed experts split at whole 32-column blocks (tp over workers, or
// halves on two coordinator ranks), the shared expert whole on rank 0.
TEST(PlacementPlan, V41CutsWholeBlocksAndKeepsTheSharedExpertWhole) {
  const Layout layout{
      .workers = {"a:1", "b:2"}, .parallel = ExpertParallel::kTensor, .local_expert_layers = 2, .coordinator_ranks = 2, .peer = "p:9"};
  const PlacementPlan p = PlacementPlan::Compute(Tiny(), layout, ExpertCuts::V41());  // moe_intermediate_size 64
  ASSERT_EQ(p.ranks.size(), 4u);
  EXPECT_EQ(p.OwnersOf(1), (std::vector<int>{0, 1}));
  EXPECT_EQ(p.OwnersOf(3), (std::vector<int>{0, 2, 3})) << "the shared expert on 0 only, the routed ones on the workers";
  for (const RankPlan& r : p.ranks) {
    for (const LayerSlice& s : r.slices) {
      if (s.HoldsRouted()) {
        EXPECT_EQ(s.inter_begin % 32, 0) << "rank " << r.rank << " layer " << s.layer;
        EXPECT_EQ(s.inter_end - s.inter_begin, 32) << "rank " << r.rank << " layer " << s.layer;
      }
      if (s.HoldsShared()) {
        EXPECT_EQ(r.rank, 0);
        EXPECT_EQ(s.shared_end - s.shared_begin, 64);
      }
    }
  }
  const LayerSlice& peer = p.ranks[1].slices[0];
  EXPECT_EQ(peer.inter_begin, 32);
  EXPECT_FALSE(peer.HoldsShared());
  // Three workers would hold less than a block each; two workers of a 96-wide expert would cut
  // at 48: both refused, naming why.
  Layout three = layout;
  three.workers = {"a:1", "b:2", "c:3"};
  const auto error = [](const ModelConfig& c, const Layout& l) {
    try {
      PlacementPlan::Compute(c, l, ExpertCuts::V41());
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error(Tiny(), three), "tp over 3 workers needs moe_intermediate_size >= 96, the model has 64");
  ModelConfig wider = Tiny();
  wider.moe_intermediate_size = 96;
  EXPECT_NE(error(wider, layout)
                .find("tp over 2 workers splits each routed expert's moe_intermediate_size 96 at column 48, which is not "
                      "a multiple of 32 (DeepSeek V4.1's FP4 scale blocks)"),
            std::string::npos)
      << error(wider, layout);
}

TEST(PlacementPlan, NoWorkersMeansEverythingLocal) {
  const PlacementPlan p = PlacementPlan::Compute(Tiny(), {});
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_EQ(p.ranks[0].slices.size(), 3u);
  EXPECT_TRUE(p.ranks[0].slices[0].HoldsRouted());
}

TEST(PlacementPlan, RejectsImpossibleLayouts) {
  EXPECT_THROW(PlacementPlan::Compute(Tiny(), {.coordinator_ranks = 2}), std::invalid_argument);
  EXPECT_THROW(PlacementPlan::Compute(Tiny(), {.peer = "p:1"}), std::invalid_argument);
  EXPECT_THROW(PlacementPlan::Compute(Tiny(), {.coordinator_ranks = 3}), std::invalid_argument);
  std::vector<std::string> many(17, "w:1");
  EXPECT_THROW(PlacementPlan::Compute(Tiny(), {.workers = many, .parallel = ExpertParallel::kExpert}), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::rt
