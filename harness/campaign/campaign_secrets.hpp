#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "harness/campaign/campaign.hpp"

// A campaign's secrets (common/redact.hpp says what is secret): kept out of what is
// stored and printed, still passed to the processes.
namespace tandem::harness {

// The campaign text to store: the YAML as written, comments and layout kept, with every
// secret value in it replaced by "<redacted>" — arms' `env` values of secret names, the
// values of secret options in arms' `options`, `worker_options` and `source.run_args`
// and layouts' `options`, and those in `source.command` / `worker_command` templates.
// Text without secrets comes back unchanged. (Where a value cannot be replaced in place,
// e.g. a block scalar, the whole document is re-emitted without its comments.)
std::string RedactCampaignYaml(std::string_view text);

// Every secret value the campaign gives its processes, for scrubbing free text
// (failure reasons, messages): see ScrubSecrets.
std::vector<std::string> CampaignSecretValues(const Campaign& campaign);

}  // namespace tandem::harness
