// The run store's schema: its migration scripts, one per version, and bringing a file up to
// the latest version.
#pragma once

#include <string>
#include <vector>

#include "store/sqlite_connection.hpp"

namespace fp8rl::run_store_schema {

// Migrations, oldest first: migrations()[v - 1] takes a database from version v − 1 to v.
const std::vector<std::string>& migrations();
// The version this build creates and migrates to.
int latest_version();

// The file's schema version (its user_version; 0 for a new file).
int user_version(sqlite::Connection& db, const sqlite::What& what);
// Throws "<name>: database schema version <version> is newer than this build supports (…)"
// when version is newer than latest_version().
void require_supported(const std::string& name, int version);
// Takes db, a store opened for writing and at schema version `from`, to the latest version,
// each version in its own write transaction; returns the version it has then. Throws when the
// file has tables but no version (another program's database) or is newer than this build.
int migrate(sqlite::Connection& db, const std::string& name, int from);

}  // namespace fp8rl::run_store_schema
