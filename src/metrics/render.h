// The two read formats of a Snapshot: Prometheus text exposition 0.0.4 (/metrics) and JSON
// (/api/stats). Pure: a snapshot in, text out. docs/metrics.md lists every figure.
#pragma once

#include <string>
#include <string_view>

#include "metrics/snapshot.h"

namespace peregrine::metrics {

std::string render_prometheus(const Snapshot& snapshot);
std::string render_json(const Snapshot& snapshot);

// A label value as the text format wants it: backslash, double quote and line feed escaped.
void append_label_value(std::string& out, std::string_view value);
// A JSON string literal, quotes included.
void append_json_string(std::string& out, std::string_view value);

}  // namespace peregrine::metrics
