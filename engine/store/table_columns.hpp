// A table's columns as one list (private to the store): each column's SQL expression, the
// schema version it appeared in (older stores read a fallback instead) and how its value goes
// into the row's struct. The SELECT list and the positional reads both come from that list, so
// a column is named once and the two cannot drift apart.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "store/sqlite_connection.hpp"

namespace fp8rl {

template <class Out>
struct TableColumn {
  const char* expr;  // "name", or any expression of the table
  void (*read)(const sqlite::Row& s, int i, Out& out);
  int since = 1;                // the schema version that added it
  const char* before = "NULL";  // what a store older than `since` reads
};

// "SELECT a, b, … FROM <from>" for a store at schema version `version`; replace swaps a
// column's expression for another (e.g. a CASE) where a query needs it.
template <class Out, size_t N>
std::string select_columns(const TableColumn<Out> (&cols)[N], int version, const std::string& from,
                           const std::vector<std::pair<std::string, std::string>>& replace = {}) {
  std::string sql = "SELECT ";
  for (size_t i = 0; i < N; ++i) {
    std::string e = version >= cols[i].since ? cols[i].expr : cols[i].before;
    for (const auto& [name, with] : replace)
      if (name == cols[i].expr) e = with;
    sql += (i ? ", " : "") + e;
  }
  return sql + " FROM " + from;
}

// One row of select_columns(cols, …) read into a new Out.
template <class Out, size_t N>
Out read_columns(const TableColumn<Out> (&cols)[N], const sqlite::Row& s) {
  Out out{};
  for (size_t i = 0; i < N; ++i) cols[i].read(s, static_cast<int>(i), out);
  return out;
}

}  // namespace fp8rl
