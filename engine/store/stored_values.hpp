// How the run store keeps values that SQLite or JSON cannot hold as they are: NaN and ±inf
// scalars, JSON documents with non-finite numbers, and histograms as two JSON columns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "contract/histogram.hpp"
#include "contract/step_record.hpp"
#include "core/json.hpp"
#include "store/sqlite_connection.hpp"

namespace fp8rl::stored {

// "nan", "inf" or "-inf" for a non-finite v.
const char* nonfinite_name(double v);
// The value nonfinite_name names (NaN for anything else).
double nonfinite_value(const std::string& name);

// A scalar is two columns, value and nonfinite: SQLite keeps a NaN REAL as NULL, so a
// non-finite scalar is (NULL, its name) and a finite one (v, NULL).
std::optional<double> finite_or_null(double v);
std::optional<std::string_view> nonfinite_or_null(double v);
// The scalar in columns value_column (value) and value_column + 1 (nonfinite) of row.
double scalar(const sqlite::Row& row, int value_column);

// The text of a stored JSON document. JSON has no NaN or inf: they are written as the strings
// "nan", "inf", "-inf" (as the telemetry line does), so a stored document always parses again.
std::string json_text(const Json& j);
// As json_text, with a JSON null stored as NULL.
std::optional<std::string> json_text_or_null(const Json& j);

// A histogram's edges (non-finite ones by name) and counts as JSON arrays.
std::string edges_json(const std::vector<double>& edges);
std::string counts_json(const std::vector<int64_t>& counts);
// The histogram in columns edges_column (edges) and edges_column + 1 (counts) of row; throws
// "<the statement's what>: malformed histogram: …" when they do not read back.
Histogram histogram(const sqlite::Row& row, int edges_column);

// A sample's per-token detail as {"tokens": [...], "logprob_diff": [...]} (NULL when it has
// none), and reading it back into x from column c of row (NULL: none).
std::optional<std::string> sample_detail_or_null(const SampleRecord& x);
void read_sample_detail(const sqlite::Row& row, int c, SampleRecord& x);

}  // namespace fp8rl::stored
