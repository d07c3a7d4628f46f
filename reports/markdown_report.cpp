#include "reports/markdown_report.hpp"

#include "reports/report_sections.hpp"

namespace tandem::reports {

std::string RenderReport(const store::CampaignRecord& r, const ReportOptions& options) {
  MarkdownDoc d;
  sections::Title(r, d);
  sections::Arms(r, d);
  sections::Host(r, d);
  sections::Protocol(r, d);
  sections::AbTables(r, d);
  sections::MixedPairs(r, d);
  sections::GreedyAgreement(r, d);
  sections::Headline(r, d);
  sections::ContentTypes(r, d);
  sections::Startup(r, d);
  sections::Memory(r, d);
  sections::GpuConditions(r, d);
  sections::Latency(r, d);
  sections::DraftAcceptance(r, d);
  sections::PredictionError(r, d);
  sections::Concurrency(r, d);
  sections::Prefill(r, d);
  sections::Retained(r, d);
  sections::QualitySection(r, d);
  sections::NoiseAndPower(r, d);
  sections::Plots(options, d);
  sections::Appendix(r, d);
  while (d.text.size() >= 2 && d.text.substr(d.text.size() - 2) == "\n\n") d.text.pop_back();
  return d.text;
}

}  // namespace tandem::reports
