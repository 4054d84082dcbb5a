// The report's HTML page: static sections (summary, stage costs, S-curve, similarity histogram,
// eval tables) written here with every value escaped, the cluster browser, review sample and
// missed pairs as JSON data that the page's own script (page.js, embedded at build time) renders
// with text nodes only. One file, no network: style and script are inline and carry a per-page
// nonce that the page's Content-Security-Policy requires, so nothing else can run.
//
// Internal header of the report (src/report/).
#ifndef NEARDUP_REPORT_REPORT_PAGE_H_
#define NEARDUP_REPORT_REPORT_PAGE_H_

#include <string>
#include <string_view>

#include "report/report_model.h"

namespace neardup::report {

// The whole page.
std::string RenderPage(const ReportModel& model);

// `text` escaped for HTML text and double-quoted attribute values.
std::string EscapeHtml(std::string_view text);

// JSON text made safe inside <script type="application/json">: <, > and & become \u escapes
// (inside JSON strings, the only place they can be), so the data holds no markup character.
std::string EscapeScriptJson(std::string_view json);

// The page's script and style (src/report/page.js, page.css).
extern const char* const kPageScript;
extern const char* const kPageStyle;

}  // namespace neardup::report

#endif  // NEARDUP_REPORT_REPORT_PAGE_H_
