// Reading whole files, with errors that name the file; making files and folders that are the
// user's alone (run stores, checkpoints, logs, keys, sockets: docs/security.md).
#pragma once

#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "core/json.hpp"

namespace fp8rl {

// The file's bytes; throws Error("cannot open PATH") when it cannot be opened.
std::string read_text_file(const std::string& path);
// The file parsed as JSON; a parse error is prefixed with "PATH: ".
Json read_json_file(const std::string& path);

// Creates the folder path and every missing folder above it with mode 0700 (folders that exist
// are left as they are). Throws an Error naming the folder that could not be made.
void create_private_directories(const std::string& path);
// Opens path for writing as a file only its owner may read or write: a new file is created 0600
// (never readable by others, not even briefly); an existing one is truncated (trunc) or
// appended to, and set to 0600. Throws an Error naming the file when it cannot be opened.
std::ofstream open_private_file(const std::string& path,
                                std::ios::openmode mode = std::ios::out | std::ios::trunc);
// Writes text to path through path + ".tmp" and a rename (a reader sees the old file or the new
// one whole), as a file only its owner may read or write (0600). Throws an Error naming the
// file ("cannot write …", "write failed for …: No space left on device").
void write_private_file(const std::string& path, const std::string& text);
// Whether the error says the disk ran out (no space left, quota exceeded, file too large, SQLite's
// "database or disk is full"): the run can go on once space is freed.
bool out_of_space(const std::exception& e);
// The permission bits (07777) of path, or -1 when it cannot be stat'ed (links not followed).
int file_mode(const std::string& path);
// "0644" for 0644.
std::string mode_string(int mode);
// The paths under root (root included, links not followed, at most `limit` of them) that users
// other than the owner may read, write or enter (group or other permission bits set).
std::vector<std::string> paths_open_to_others(const std::string& root, size_t limit = 20);

}  // namespace fp8rl
