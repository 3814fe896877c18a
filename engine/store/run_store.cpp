// Opening a run store and what it says about itself; its writers and readers are in
// run_store_writers.cpp and run_store_readers.cpp.
#include "store/run_store.hpp"

#include <filesystem>

#include "core/files.hpp"
#include "store/run_store_impl.hpp"
#include "store/run_store_schema.hpp"

namespace fp8rl {
namespace {

constexpr int kBusyTimeoutMs = 5000;

}  // namespace

RunStore::RunStore(const std::string& path, bool read_only) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  m.read_only = read_only;
  if (path.empty()) throw Error("run store: empty path");
  if (!read_only) {
    // Run data is the user's alone (docs/security.md): folders we make are 0700 and a new
    // database 0600 (SQLite gives its -wal and -shm files the database's mode). An existing
    // store keeps its mode: `fp8rl doctor` reports one that others can read.
    try {
      create_private_directories(std::filesystem::path(path).parent_path().string());
      if (!std::filesystem::exists(path)) open_private_file(path, std::ios::app);
    } catch (const Error& e) {
      throw Error(m.name() + ": " + e.message());
    }
  }
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  m.db.open(path, flags, kBusyTimeoutMs, m.name());

  // The first read of the file: a file that is not a database fails here, before any write.
  m.version = run_store_schema::user_version(m.db, m.name() + ": reading the schema version");
  run_store_schema::require_supported(m.name(), m.version);
  if (read_only) {
    if (m.version == 0) throw Error(m.name() + " is not a run store (schema version 0)");
    m.db.exec("PRAGMA query_only = ON", m.name() + ": setting query_only");
    return;
  }
  m.db.exec("PRAGMA foreign_keys = ON", m.name() + ": enabling foreign keys");
  m.db.exec("PRAGMA synchronous = NORMAL", m.name() + ": setting synchronous");
  // Where WAL is impossible (e.g. a file system without shared memory) SQLite keeps the
  // rollback journal: still correct, only readers then wait for writers.
  m.db.query(m.name() + ": enabling WAL", "PRAGMA journal_mode = WAL").run();
  m.version = run_store_schema::migrate(m.db, m.name(), m.version);
}

RunStore::~RunStore() = default;
RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;

const std::string& RunStore::path() const {
  return impl_->path;
}
bool RunStore::read_only() const {
  return impl_->read_only;
}
int RunStore::schema_version() const {
  return impl_->version;
}
int RunStore::latest_schema_version() {
  return run_store_schema::latest_version();
}

const std::string& RunStore::migration_script(int version) {
  if (version < 1 || version > latest_schema_version())
    throw Error("run store: no migration to schema version " + std::to_string(version) +
                " (versions 1 to " + std::to_string(latest_schema_version()) + ")");
  return run_store_schema::migrations()[static_cast<size_t>(version - 1)];
}

}  // namespace fp8rl
