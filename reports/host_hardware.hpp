#pragma once

#include <map>
#include <string>
#include <vector>

#include "store/campaign_record.hpp"

// Which hardware each session ran on, from the host facts the harness stored with it.
// A campaign's machines may change under it (a VM moved to another host between two
// sittings): interleaving keeps a ratio fair only while each machine ran both arms
// alike, so the report shows the mix and the gate doubts a lopsided one.
namespace tandem::reports {

// One host's CPU in words: "AMD EPYC, AuthenticAMD family 26 model 2 stepping 1, 2 logical
// CPUs, avx2 fma … avx512_bf16", from what its facts hold (older stores: the model name).
std::string DescribeCpu(const store::HostFacts& facts);

// Every host of a session (the harness's own, then each other host by name), described
// as DescribeCpu: sessions with different values ran on different hardware.
std::string SessionHardware(const store::SessionRecord& session);

// Completed sessions per layout, hardware and arm.
using HardwareMix = std::map<std::string, std::map<std::string, std::map<std::string, int>>>;
HardwareMix AssessHardware(const store::CampaignRecord& record);

// How many different machines the mix holds, over every layout.
std::size_t Machines(const HardwareMix& mix);

// The hardware share of either arm may differ by at most this much (a fraction of the
// arm's sessions in the layout) before a comparison of the two is in doubt.
inline constexpr double kHardwareShareTolerance = 0.1;

// For each layout where the two arms' sessions are spread unlike over the hardware, a
// sentence saying how (empty when they are alike, or ran on one machine).
std::vector<std::string> LopsidedHardware(const HardwareMix& mix, const std::string& baseline, const std::string& candidate);

}  // namespace tandem::reports
