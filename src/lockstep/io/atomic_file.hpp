// Whole-file reads, and crash-safe file writes: the new content goes to a temporary file beside the
// target, is flushed to disk (fsync), and then renamed over the target, and
// the directory is fsync'ed. A crash at any point leaves either the old file or
// the new one, never a torn mix.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace lockstep::io {

// Writes `bytes` to `path` atomically. Throws std::runtime_error (naming the
// path and the errno text) on failure; the previous file is then untouched.
void write_file_atomic(const std::string& path, std::span<const std::uint8_t> bytes);

// Same, with the content produced by `fill`, which receives a writer callback
// it may call any number of times (for large files written in pieces).
using ChunkWriter = std::function<void(std::span<const std::uint8_t>)>;
void write_file_atomic(const std::string& path, const std::function<void(const ChunkWriter&)>& fill);

// The whole file as bytes in a string; throws std::runtime_error
// ("cannot read '<path>'") when it cannot be opened.
std::string read_file_text(const std::string& path);

// Test hook: when set, called after the temporary file is complete and before
// the rename (simulates a crash by throwing). Empty in production.
extern std::function<void(const std::string& tmp_path)> g_before_rename_hook;

}  // namespace lockstep::io
