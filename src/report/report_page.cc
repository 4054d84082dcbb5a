// Writes the report's HTML page from a ReportModel (see report_page.h).
#include "report/report_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "common/json_writer.h"
#include "neardup/minhash_lsh.h"

namespace neardup::report {
namespace {

// ---- formatting ---------------------------------------------------------------------------------

std::string Thousands(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string Fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

std::string Percent(double fraction) { return Fixed(100 * fraction, 1) + " %"; }

std::string Bytes(uint64_t bytes) {
  if (bytes >= 10000000) return Fixed(static_cast<double>(bytes) / 1e6, 0) + " MB";
  if (bytes >= 1000000) return Fixed(static_cast<double>(bytes) / 1e6, 2) + " MB";
  if (bytes >= 10000) return Fixed(static_cast<double>(bytes) / 1e3, 0) + " kB";
  return Thousands(bytes) + " bytes";
}

std::string Nonce() {
  std::random_device device;
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string nonce;
  for (int i = 0; i < 22; ++i) nonce.push_back(kAlphabet[device() % 62]);
  return nonce;
}

// ---- an HTML writer -----------------------------------------------------------------------------

class Html {
 public:
  Html& Raw(std::string_view markup) {
    out_.append(markup);
    return *this;
  }
  Html& Text(std::string_view text) {
    out_ += EscapeHtml(text);
    return *this;
  }
  // <tag class="..."> text </tag>
  Html& Element(std::string_view tag, std::string_view text, std::string_view css_class = "") {
    Open(tag, css_class);
    Text(text);
    return Close(tag);
  }
  Html& Open(std::string_view tag, std::string_view css_class = "", std::string_view id = "") {
    out_ += '<';
    out_ += tag;
    if (!css_class.empty()) out_ += " class=\"" + EscapeHtml(css_class) + "\"";
    if (!id.empty()) out_ += " id=\"" + EscapeHtml(id) + "\"";
    out_ += '>';
    return *this;
  }
  Html& Close(std::string_view tag) {
    out_ += "</";
    out_ += tag;
    out_ += ">\n";
    return *this;
  }
  // A two-column table of name / value rows.
  Html& Pairs(const std::vector<std::pair<std::string, std::string>>& rows,
              std::string_view css_class = "pairs") {
    Open("table", css_class);
    for (const auto& [name, value] : rows) {
      Raw("<tr><th>").Text(name).Raw("</th><td>").Text(value).Raw("</td></tr>\n");
    }
    return Close("table");
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// ---- charts (inline SVG) ------------------------------------------------------------------------

// Horizontal bars: one row per (label, value), the value printed with `unit`.
std::string BarChart(const std::vector<std::pair<std::string, double>>& bars,
                     const std::string& unit, int decimals, const char* fill) {
  const int row = 22, label_width = 110, bar_width = 260, width = label_width + bar_width + 90;
  const int height = static_cast<int>(bars.size()) * row + 6;
  double largest = 0;
  for (const auto& bar : bars) largest = std::max(largest, bar.second);
  std::string svg = "<svg class=\"chart\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
                    std::to_string(height) + "\" role=\"img\">\n";
  for (size_t i = 0; i < bars.size(); ++i) {
    const int y = static_cast<int>(i) * row + 4;
    const double length = largest > 0 ? bar_width * bars[i].second / largest : 0;
    const std::string value = Fixed(bars[i].second, decimals) + " " + unit;
    svg += "<text x=\"" + std::to_string(label_width - 6) + "\" y=\"" + std::to_string(y + 14) +
           "\" text-anchor=\"end\">" + EscapeHtml(bars[i].first) + "</text>";
    svg += "<rect x=\"" + std::to_string(label_width) + "\" y=\"" + std::to_string(y + 2) +
           "\" width=\"" + Fixed(std::max(length, 1.0), 1) + "\" height=\"15\" fill=\"" + fill +
           "\"><title>" + EscapeHtml(bars[i].first + ": " + value) + "</title></rect>";
    svg += "<text x=\"" + Fixed(label_width + length + 5, 1) + "\" y=\"" + std::to_string(y + 14) +
           "\">" + EscapeHtml(value) + "</text>\n";
  }
  return svg + "</svg>\n";
}

// Plot area shared by the S-curve and the histogram: x in [0, 1] left to right.
struct Plot {
  int width = 460, height = 260, left = 46, right = 14, top = 14, bottom = 36;
  double X(double fraction) const { return left + fraction * (width - left - right); }
  double Y(double fraction) const { return top + (1 - fraction) * (height - top - bottom); }
  std::string Open() const {
    return "<svg class=\"chart\" width=\"" + std::to_string(width) + "\" height=\"" +
           std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
           std::to_string(height) + "\" role=\"img\">\n";
  }
  // The x axis from 0 to 1 with ticks every 0.1, and its title.
  std::string XAxis(const std::string& title) const {
    std::string svg = "<line x1=\"" + Fixed(X(0), 1) + "\" y1=\"" + Fixed(Y(0), 1) + "\" x2=\"" +
                      Fixed(X(1), 1) + "\" y2=\"" + Fixed(Y(0), 1) + "\" stroke=\"#555\"/>";
    for (int i = 0; i <= 10; ++i) {
      const double x = X(i / 10.0);
      svg += "<line x1=\"" + Fixed(x, 1) + "\" y1=\"" + Fixed(Y(0), 1) + "\" x2=\"" + Fixed(x, 1) +
             "\" y2=\"" + Fixed(Y(0) + 4, 1) + "\" stroke=\"#555\"/>";
      svg += "<text x=\"" + Fixed(x, 1) + "\" y=\"" + Fixed(Y(0) + 15, 1) +
             "\" text-anchor=\"middle\" class=\"tick\">" + Fixed(i / 10.0, 1) + "</text>";
    }
    svg += "<text x=\"" + Fixed(X(0.5), 1) + "\" y=\"" + std::to_string(height - 4) +
           "\" text-anchor=\"middle\">" + EscapeHtml(title) + "</text>\n";
    return svg;
  }
  std::string Marker(double at, const std::string& label) const {
    return "<line x1=\"" + Fixed(X(at), 1) + "\" y1=\"" + Fixed(Y(1), 1) + "\" x2=\"" +
           Fixed(X(at), 1) + "\" y2=\"" + Fixed(Y(0), 1) +
           "\" stroke=\"#c0392b\" stroke-dasharray=\"4 3\"/><text x=\"" + Fixed(X(at) + 4, 1) +
           "\" y=\"" + Fixed(Y(1) + 10, 1) + "\" class=\"marker\">" + EscapeHtml(label) +
           "</text>\n";
  }
};

std::string SCurve(const SummaryModel& summary) {
  LshParameters parameters;
  parameters.bands = summary.bands;
  parameters.rows = summary.rows;
  Plot plot;
  std::string svg = plot.Open();
  for (int i = 0; i <= 4; ++i) {
    const double y = plot.Y(i / 4.0);
    svg += "<line x1=\"" + Fixed(plot.X(0), 1) + "\" y1=\"" + Fixed(y, 1) + "\" x2=\"" +
           Fixed(plot.X(1), 1) + "\" y2=\"" + Fixed(y, 1) + "\" stroke=\"#ddd\"/>";
    svg += "<text x=\"" + Fixed(plot.X(0) - 5, 1) + "\" y=\"" + Fixed(y + 4, 1) +
           "\" text-anchor=\"end\" class=\"tick\">" + Fixed(i / 4.0, 2) + "</text>";
  }
  svg += plot.XAxis("Jaccard similarity of a pair");
  std::string path = "M";
  for (int i = 0; i <= 200; ++i) {
    const double j = i / 200.0;
    path += (i ? " L" : "") + Fixed(plot.X(j), 1) + " " +
            Fixed(plot.Y(LshCandidateProbability(j, parameters)), 1);
  }
  svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"#2c6fbb\" stroke-width=\"2\"/>\n";
  for (int i = 3; i <= 9; ++i) {
    const double j = i / 10.0, p = LshCandidateProbability(j, parameters);
    svg += "<circle cx=\"" + Fixed(plot.X(j), 1) + "\" cy=\"" + Fixed(plot.Y(p), 1) +
           "\" r=\"3.5\" fill=\"#2c6fbb\"><title>" +
           EscapeHtml("Jaccard " + Fixed(j, 1) + ": found with probability " + Fixed(p, 4)) +
           "</title></circle>";
  }
  if (summary.threshold > 0)
    svg += plot.Marker(summary.threshold, "threshold " + Fixed(summary.threshold, 2));
  svg += "<text x=\"12\" y=\"" + Fixed(plot.Y(0.5), 1) + "\" transform=\"rotate(-90 12 " +
         Fixed(plot.Y(0.5), 1) + ")\" text-anchor=\"middle\">P(candidate)</text>";
  return svg + "</svg>\n";
}

std::string Histogram(const SummaryModel& summary, double threshold) {
  const auto& h = summary.histogram;
  const size_t bins = h.accepted.size();
  uint64_t largest = 0;
  for (size_t i = 0; i < bins; ++i) largest = std::max({largest, h.accepted[i], h.rejected[i]});
  const double top = std::log10(1.0 + static_cast<double>(largest));
  Plot plot;
  plot.width = 520;
  plot.top = 30;  // the legend goes above the bars
  std::string svg = plot.Open();
  // A logarithmic y axis: counts span orders of magnitude.
  for (uint64_t tick = 1; top > 0 && tick <= largest; tick *= 10) {
    const double y = plot.Y(std::log10(1.0 + static_cast<double>(tick)) / top);
    svg += "<line x1=\"" + Fixed(plot.X(0), 1) + "\" y1=\"" + Fixed(y, 1) + "\" x2=\"" +
           Fixed(plot.X(1), 1) + "\" y2=\"" + Fixed(y, 1) + "\" stroke=\"#eee\"/>";
    svg += "<text x=\"" + Fixed(plot.X(0) - 5, 1) + "\" y=\"" + Fixed(y + 4, 1) +
           "\" text-anchor=\"end\" class=\"tick\">" + Thousands(tick) + "</text>";
  }
  svg += plot.XAxis("similarity (shingle Jaccard), bins of 0.01");
  const double bin_width = (plot.X(1) - plot.X(0)) / static_cast<double>(bins);
  for (size_t i = 0; i < bins; ++i) {
    const double x = plot.X(static_cast<double>(i) / static_cast<double>(bins));
    const std::string range =
        Fixed(static_cast<double>(i) / bins, 2) + "-" + Fixed(static_cast<double>(i + 1) / bins, 2);
    auto bar = [&](uint64_t count, double offset, const char* fill, const char* what) {
      if (count == 0 || top <= 0) return;
      const double y = plot.Y(std::log10(1.0 + static_cast<double>(count)) / top);
      svg += "<rect x=\"" + Fixed(x + offset, 2) + "\" y=\"" + Fixed(y, 1) + "\" width=\"" +
             Fixed(bin_width / 2, 2) + "\" height=\"" + Fixed(plot.Y(0) - y, 1) + "\" fill=\"" +
             fill + "\"><title>" + EscapeHtml(range + ": " + Thousands(count) + " " + what) +
             "</title></rect>";
    };
    bar(h.rejected[i], 0, "#e67e22", "rejected (measured)");
    bar(h.accepted[i], bin_width / 2, "#27ae60", "accepted");
  }
  if (threshold > 0) svg += plot.Marker(threshold, "verify " + Fixed(threshold, 2));
  svg += "<rect x=\"" + Fixed(plot.X(0), 1) +
         "\" y=\"4\" width=\"10\" height=\"10\" fill=\"#e67e22\"/><text x=\"" +
         Fixed(plot.X(0) + 14, 1) + "\" y=\"13\">rejected candidates</text>";
  svg += "<rect x=\"" + Fixed(plot.X(0) + 150, 1) +
         "\" y=\"4\" width=\"10\" height=\"10\" fill=\"#27ae60\"/><text x=\"" +
         Fixed(plot.X(0) + 164, 1) + "\" y=\"13\">accepted pairs</text>";
  return svg + "</svg>\n";
}

// ---- the data the script renders ----------------------------------------------------------------

// A document; its text only when `with_text` (a diff already holds the texts it compares).
void WriteDocument(const ShownDocument& document, JsonWriter* json, bool with_text = true) {
  json->BeginObject().Key("id").String(document.id).Key("loc").String(document.location);
  json->Key("bytes").Uint(document.bytes);
  if (document.cut) json->Key("cut").Bool(true);
  if (document.text && with_text) {
    json->Key("text").String(*document.text);
  } else {
    json->Key("text").Null();
  }
  json->EndObject();
}

void WriteDiff(const std::optional<WordDiffResult>& diff, JsonWriter* json) {
  json->Key("diff");
  if (!diff) {
    json->Null();
    return;
  }
  json->BeginArray();
  for (const DiffSpan& span : diff->spans) {
    json->BeginArray().String(std::string(1, static_cast<char>(span.kind))).String(span.text);
    json->EndArray();
  }
  json->EndArray();
  if (!diff->complete) json->Key("diff_partial").Bool(true);
}

void WriteMember(const ShownMember& member, JsonWriter* json) {
  json->BeginObject().Key("doc");
  WriteDocument(member.document, json, !member.diff);
  json->Key("reason").String(member.reason).Key("via").String(member.via);
  json->Key("distance").Int(member.distance).Key("distance_to_via").Int(member.distance_to_via);
  if (member.similarity >= 0) json->Key("similarity").Double(member.similarity);
  WriteDiff(member.diff, json);
  json->EndObject();
}

std::string PageData(const ReportModel& model) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  json.Key("clusters").BeginArray();
  for (const ShownCluster& cluster : model.clusters) {
    json.BeginObject().Key("n").Uint(cluster.number).Key("size").Uint(cluster.size);
    json.Key("kept");
    WriteDocument(cluster.kept, &json);
    json.Key("members").BeginArray();
    for (const ShownMember& member : cluster.members) WriteMember(member, &json);
    json.EndArray();
    json.Key("vias").BeginArray();  // bases of diffs that are not listed (texts in the diffs)
    for (const ShownDocument& via : cluster.vias) WriteDocument(via, &json, false);
    json.EndArray();
    json.Key("unlisted").Uint(cluster.unlisted);
    if (cluster.texts_omitted) json.Key("texts_omitted").Bool(true);
    json.EndObject();
  }
  json.EndArray();
  json.Key("sample").BeginArray();
  for (const SampleEntry& entry : model.sample) {
    json.BeginObject().Key("cluster").Uint(entry.cluster).Key("size").Uint(entry.cluster_size);
    json.Key("kept");
    WriteDocument(entry.kept, &json);
    json.Key("member");
    WriteMember(entry.member, &json);
    if (entry.via.wants_text) {
      json.Key("via");
      WriteDocument(entry.via, &json, !entry.member.diff);
    }
    json.EndObject();
  }
  json.EndArray();
  json.Key("missed").BeginArray();
  for (const MissedPair& pair : model.eval.missed) {
    json.BeginObject().Key("kind").String(pair.kind).Key("set").String(pair.set);
    json.Key("label").String(pair.label);
    if (pair.reference_similarity >= 0) json.Key("reference").Double(pair.reference_similarity);
    if (pair.jaccard >= 0) json.Key("jaccard").Double(pair.jaccard);
    if (pair.distance >= 0) json.Key("distance").Int(pair.distance);
    json.Key("a");
    WriteDocument(pair.a, &json, !pair.diff);
    json.Key("b");
    WriteDocument(pair.b, &json, !pair.diff);
    WriteDiff(pair.diff, &json);
    json.EndObject();
  }
  json.EndArray();
  json.Key("total_clusters").Uint(model.total_clusters);
  json.Key("seed").Uint(model.options.seed);
  json.EndObject();
  return out;
}

// ---- sections -----------------------------------------------------------------------------------

void Summary(const ReportModel& model, Html* html) {
  const SummaryModel& s = model.summary;
  html->Raw("<section id=\"summary\"><h2>Summary</h2>\n<div class=\"cards\">\n");
  auto card = [html](const std::string& value, const std::string& name, const std::string& id) {
    html->Raw("<div class=\"card\"><div class=\"value\"");
    if (!id.empty()) html->Raw(" id=\"" + id + "\"");
    html->Raw(">").Text(value).Raw("</div><div class=\"name\">").Text(name).Raw("</div></div>\n");
  };
  card(Thousands(s.documents_read), "documents read", "documents-read");
  card(Thousands(s.skipped), "records skipped", "");
  card(Thousands(model.total_clusters), "clusters", "cluster-count");
  card(Thousands(model.total_removed), "documents removed", "removed-count");
  card(Thousands(s.kept), "documents kept", "");
  if (s.candidate_pairs > 0 || s.accepted_pairs > 0) {
    card(Thousands(s.candidate_pairs), "candidate pairs", "");
    card(Thousands(s.accepted_pairs), "accepted pairs", "");
  }
  if (s.total_seconds > 0) card(Fixed(s.total_seconds, 2) + " s", "dedup time", "");
  html->Raw("</div>\n");
  if (s.clusters != model.total_clusters && s.clusters > 0) {
    html->Element("p",
                  "summary.json counts " + Thousands(s.clusters) + " clusters, clusters.jsonl " +
                      Thousands(model.total_clusters) + ": the two files are not from one run.",
                  "warning");
  }
  html->Raw("<div class=\"columns\">\n<div>\n");
  std::vector<std::pair<std::string, std::string>> counts;
  counts.emplace_back("documents fingerprinted", Thousands(s.documents));
  if (s.text_bytes > 0) counts.emplace_back("text", Bytes(s.text_bytes));
  for (const auto& [reason, count] : s.skipped_by_reason) {
    counts.emplace_back("skipped: " + reason, Thousands(count));
  }
  for (const auto& [reason, count] : s.fallbacks_by_reason) {
    counts.emplace_back("read with a fallback: " + reason, Thousands(count));
  }
  for (const auto& [code, count] : s.failures_by_code) {
    counts.emplace_back("could not be fingerprinted: " + code, Thousands(count));
  }
  if (s.duplicate_ids > 0) {
    counts.emplace_back("documents sharing an id (listed as id@file:line)",
                        Thousands(s.duplicate_ids));
  }
  for (const auto& [reason, count] : model.removed_by_reason) {
    counts.emplace_back("removed as " + reason, Thousands(count));
  }
  html->Element("h3", "Documents");
  html->Pairs(counts);
  html->Element("h3", "Cluster sizes");
  std::vector<std::pair<std::string, std::string>> sizes;
  for (const auto& [size, count] : model.cluster_sizes) {
    sizes.emplace_back(size + " documents", Thousands(count));
  }
  if (sizes.empty()) sizes.emplace_back("no cluster", "");
  html->Pairs(sizes);
  html->Raw("</div>\n<div>\n");
  html->Element("h3", "Parameters");
  if (s.parameters.empty()) {
    html->Element("p", "summary.json records no parameters.");
  } else {
    html->Pairs(s.parameters);
  }
  html->Raw("</div>\n<div>\n");
  if (!s.stages.empty()) {
    std::vector<std::pair<std::string, double>> seconds, memory;
    for (const StageRow& stage : s.stages) {
      seconds.emplace_back(stage.stage, stage.seconds);
      if (stage.peak_memory_mb > 0) memory.emplace_back(stage.stage, stage.peak_memory_mb);
    }
    html->Element("h3", "Time per stage");
    html->Raw(BarChart(seconds, "s", 2, "#2c6fbb"));
    if (!memory.empty()) {
      html->Element("h3", "Peak memory per stage");
      html->Raw(BarChart(memory, "MB", 0, "#8e44ad"));
      html->Element("p",
                    "Peak resident memory of the process during each stage (read, fingerprint "
                    "and minhash run interleaved and share one figure).",
                    "note");
    }
  }
  html->Raw("</div>\n</div>\n");
  if (!s.inputs.empty()) {
    html->Raw("<details><summary>");
    html->Text("Inputs (" + Thousands(s.inputs.size()) + ")");
    html->Raw("</summary><ul class=\"inputs\">\n");
    size_t listed = 0;
    for (const SummaryModel::Input& input : s.inputs) {
      if (++listed > 200) {
        html->Element("li", "... and " + Thousands(s.inputs.size() - 200) + " more");
        break;
      }
      html->Element("li", input.path + (input.has_stat ? " (" + Bytes(input.bytes) + ")" : ""));
    }
    html->Raw("</ul></details>\n");
  }
  html->Raw("</section>\n");
}

void Parameters(const ReportModel& model, Html* html) {
  const SummaryModel& s = model.summary;
  html->Raw("<section id=\"parameters\"><h2>Why these parameters</h2>\n<div class=\"columns\">\n");
  html->Raw("<div>\n");
  if (s.bands > 0 && s.rows > 0) {
    LshParameters parameters;
    parameters.bands = s.bands;
    parameters.rows = s.rows;
    html->Element("h3", "MinHash LSH: " + std::to_string(s.bands) + " bands of " +
                            std::to_string(s.rows) + " rows");
    html->Raw(SCurve(s));
    html->Element("p",
                  "The probability that a pair of documents with that shingle Jaccard "
                  "similarity shares at least one band, 1 - (1 - J^" +
                      std::to_string(s.rows) + ")^" + std::to_string(s.bands) +
                      ", so that verification looks at it. It does not depend on the number "
                      "of documents.",
                  "note");
    html->Raw("<table class=\"grid\" id=\"s-curve-table\"><tr><th>Jaccard</th>");
    for (int i = 3; i <= 9; ++i) html->Raw("<td>" + Fixed(i / 10.0, 1) + "</td>");
    html->Raw("</tr><tr><th>P(candidate)</th>");
    for (int i = 3; i <= 9; ++i) {
      html->Raw("<td>" + Fixed(LshCandidateProbability(i / 10.0, parameters), 3) + "</td>");
    }
    html->Raw("</tr></table>\n");
  } else {
    html->Element("p",
                  "The MinHash LSH stage did not run (or summary.json does not say its "
                  "bands and rows): no S-curve.");
  }
  html->Raw("</div>\n<div>\n");
  const double threshold = s.verify > 0 ? s.verify : s.threshold;
  if (s.histogram.present) {
    const auto& h = s.histogram;
    html->Element("h3", "Verified similarities");
    html->Raw(Histogram(s, threshold));
    uint64_t accepted = 0, near_accepted = 0, near_rejected = 0, exact = 0;
    const size_t bins = h.accepted.size();
    for (size_t i = 0; i < bins; ++i) {
      accepted += h.accepted[i];
      const double low = static_cast<double>(i) / bins;
      if (threshold > 0 && low >= threshold - 1e-9 && low < threshold + 0.05 - 1e-9) {
        near_accepted += h.accepted[i];
      }
      if (threshold > 0 && low < threshold - 1e-9 && low >= threshold - 0.05 - 1e-9) {
        near_rejected += h.rejected[i];
      }
    }
    exact = h.accepted.empty() ? 0 : h.accepted.back();
    std::string rejected_how =
        h.rejected_sample_every <= 1
            ? "for every one of the " + Thousands(h.rejected_pairs) + " rejected candidates"
            : "for a deterministic sample of 1 in " + Thousands(h.rejected_sample_every) +
                  " rejected candidates (chosen by a hash of the pair): " +
                  Thousands(h.rejected_measured) + " of " + Thousands(h.rejected_pairs);
    html->Element(
        "p",
        "Accepted pairs (" + Thousands(accepted) +
            ") by their verified similarity; exact and whitespace-only copies count as 1 (" +
            Thousands(exact) +
            " pairs in the last bin). Verification stops comparing a pair as "
            "soon as it cannot reach the threshold, so the exact Jaccard of rejected candidates "
            "was computed again " +
            rejected_how + ". Logarithmic counts.",
        "note");
    if (threshold > 0) {
      html->Pairs({{"accepted within 0.05 above the threshold", Thousands(near_accepted)},
                   {"rejected within 0.05 below it (measured)", Thousands(near_rejected)}},
                  "pairs");
    }
  } else {
    html->Element("h3", "Verified similarities");
    html->Element("p", s.verify == 0
                           ? "Verification was off in this run: no similarity was measured."
                           : "summary.json holds no similarity histogram (written by an older "
                             "neardup, or by neardup.dask).");
  }
  html->Raw("</div>\n</div>\n</section>\n");
}

void ClusterSection(const ReportModel& model, Html* html) {
  const ReportOptions& o = model.options;
  html->Raw("<section id=\"clusters\"><h2>Clusters</h2>\n<ul class=\"notes\">\n");
  html->Element("li", "The page holds the " + Thousands(model.clusters.size()) + " largest of " +
                          Thousands(model.total_clusters) + " clusters (at most " +
                          Thousands(o.max_clusters) +
                          "; ties by cluster number). Every cluster is in clusters.jsonl.");
  html->Element("li", "Per cluster, up to " + Thousands(o.max_listed_members) +
                          " removed members are listed (" + Thousands(o.max_total_listed_members) +
                          " on the whole page) and up to " + Thousands(o.max_members_with_text) +
                          " of those that are not byte-identical copies are shown with a diff; "
                          "every text is cut to its first " +
                          Thousands(o.max_text_bytes) +
                          " bytes, and the diff is of those cut texts.");
  html->Element(
      "li",
      "Each removed member is compared with the document it was matched to: the kept "
      "one, or for a chained member (marked) the member it was linked through. The "
      "word-level diff is Myers' O(ND) shortest edit script (Myers 1986) over words, "
      "single Han/kana/Thai characters, whitespace and punctuation, computed when "
      "the report was written; a diff needing more than " +
          Thousands(o.max_diff_edits) + " edits is shown as a whole replacement" +
          (model.diffs_incomplete > 0 ? " (" + Thousands(model.diffs_incomplete) + " here)."
                                      : "."));
  if (model.first_cluster_without_texts != UINT64_MAX) {
    html->Element("li",
                  "The page's text budget (" + Bytes(o.max_total_text_bytes) +
                      ") was reached: clusters from #" +
                      Thousands(model.first_cluster_without_texts + 1) +
                      " in this list on are shown without texts.",
                  "warning");
  }
  if (!model.texts_note.empty()) {
    html->Element("li",
                  "Texts unavailable for " + Thousands(model.texts_missing) +
                      " documents: " + model.texts_note + ".",
                  "warning");
  }
  html->Raw("</ul>\n");
  html->Raw(
      "<div class=\"controls\"><label>Find id or #cluster <input id=\"cluster-search\" "
      "type=\"search\" placeholder=\"id, or #12\"></label> <label>Show <select "
      "id=\"cluster-filter\"><option value=\"all\">all clusters</option><option "
      "value=\"near\">with near duplicates</option><option value=\"chained\">with chained "
      "members</option><option value=\"exact\">only exact copies</option></select></label> "
      "<span class=\"pager\"><button id=\"page-prev\" type=\"button\">previous</button> <span "
      "id=\"page-info\"></span> <button id=\"page-next\" type=\"button\">next</button></span> "
      "<span id=\"cluster-matches\"></span></div>\n");
  html->Raw("<div id=\"cluster-list\"></div>\n");
  html->Raw(
      "<noscript><p class=\"warning\">The cluster browser needs JavaScript.</p></noscript>\n");
  html->Raw("</section>\n");
}

void SampleSection(const ReportModel& model, Html* html) {
  html->Raw("<section id=\"sample\"><h2>");
  html->Text("A sample for review: " + Thousands(model.sample.size()) + " removed documents");
  html->Raw("</h2>\n");
  html->Element(
      "p",
      "Chosen at random with seed " + std::to_string(model.options.seed) + " from all " +
          Thousands(model.total_removed) +
          " removed documents (those whose seeded hash of the id is smallest; the same seed "
          "gives the same sample, `neardup report DIR --seed N` another one). Read each against "
          "the document it was matched to and mark it: the tally estimates the precision of "
          "the run.",
      "note");
  html->Raw(
      "<p class=\"tally\" id=\"sample-tally\"></p>\n<div id=\"sample-list\"></div>\n</section>\n");
}

void EvalSection(const ReportModel& model, Html* html) {
  const EvalTable& eval = model.eval;
  html->Raw("<section id=\"eval\"><h2>Evaluation on labelled pairs</h2>\n");
  if (!eval.overall.empty()) html->Pairs(eval.overall);
  html->Element("h3", "Per label");
  html->Element("p",
                "Positive labels: the share flagged is the recall. Negative labels: it is the "
                "false-positive rate. Other classes are reported only.",
                "note");
  html->Raw(
      "<table class=\"grid\" id=\"eval-labels\"><tr><th>label</th><th>class</th>"
      "<th>pairs</th>");
  for (const std::string& method : eval.methods) html->Raw("<th>").Text(method).Raw("</th>");
  html->Raw("</tr>\n");
  for (const EvalTable::Row& row : eval.rows) {
    html->Raw("<tr><td>").Text(row.label).Raw("</td><td>").Text(row.label_class);
    html->Raw("</td><td>").Text(Thousands(row.pairs)).Raw("</td>");
    for (double rate : row.rates) {
      html->Raw("<td>").Text(rate >= 0 ? Percent(rate) : "n/a").Raw("</td>");
    }
    html->Raw("</tr>\n");
  }
  html->Raw("</table>\n");
  html->Element("h3", "Missed pairs: " + Thousands(eval.missed_total));
  html->Element("p",
                "Positive pairs the run did not put in one cluster, and negative pairs it did" +
                    (eval.missed.size() < eval.missed_total
                         ? " (the first " + Thousands(eval.missed.size()) + " are shown)."
                         : std::string(".")),
                "note");
  html->Raw("<div id=\"missed-list\"></div>\n</section>\n");
}

}  // namespace

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string EscapeScriptJson(std::string_view json) {
  // As Django's json_script: no markup character is left, so nothing in the data can end the
  // script element or open a comment, whatever the HTML parser's state.
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string RenderPage(const ReportModel& model) {
  const std::string nonce = Nonce();
  Html html;
  html.Raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
  html.Raw(
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src "
      "'nonce-" +
      nonce + "'; style-src 'nonce-" + nonce + "'; img-src data:\">\n");
  html.Raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
  html.Raw("<title>").Text(model.title).Raw("</title>\n");
  html.Raw("<style nonce=\"" + nonce + "\">\n").Raw(kPageStyle).Raw("</style>\n</head>\n<body>\n");
  html.Raw("<header><h1>").Text(model.title).Raw("</h1>\n<nav><a href=\"#summary\">Summary</a> ");
  html.Raw("<a href=\"#parameters\">Parameters</a> <a href=\"#clusters\">Clusters</a> ");
  html.Raw("<a href=\"#sample\">Sample</a>");
  if (model.eval.present) html.Raw(" <a href=\"#eval\">Eval</a>");
  html.Raw("</nav></header>\n<main>\n");
  Summary(model, &html);
  Parameters(model, &html);
  if (model.eval.present) EvalSection(model, &html);
  ClusterSection(model, &html);
  SampleSection(model, &html);
  html.Raw("</main>\n<footer>");
  html.Text("Written by neardup report from " + model.source +
            ". One self-contained file: nothing is loaded from the network.");
  html.Raw("</footer>\n");
  html.Raw("<script type=\"application/json\" id=\"neardup-data\">");
  html.Raw(EscapeScriptJson(PageData(model)));
  html.Raw("</script>\n<script nonce=\"" + nonce + "\">\n").Raw(kPageScript);
  html.Raw("</script>\n</body>\n</html>\n");
  return std::move(html.out());
}

}  // namespace neardup::report
