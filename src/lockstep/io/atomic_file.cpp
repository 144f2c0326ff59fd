#include "lockstep/io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace lockstep::io {

std::function<void(const std::string&)> g_before_rename_hook;

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

void write_all(int fd, std::span<const std::uint8_t> bytes, const std::string& path) {
  const std::uint8_t* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", path);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(const ChunkWriter&)>& fill) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // (Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "." + string.)
  std::string tmp_name(1, '.');
  tmp_name += target.filename().string();
  tmp_name += ".tmpXXXXXX";
  std::string tmp = (dir / tmp_name).string();
  Fd fd(::mkstemp(tmp.data()));
  if (fd.get() < 0) fail("cannot create a temporary file for", path);
  try {
    fill([&](std::span<const std::uint8_t> chunk) { write_all(fd.get(), chunk, tmp); });
    if (::fsync(fd.get()) != 0) fail("cannot fsync", tmp);
    if (::close(fd.release()) != 0) fail("cannot close", tmp);
    if (g_before_rename_hook) g_before_rename_hook(tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename into place", path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename itself durable.
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY));
  if (dfd.get() >= 0) ::fsync(dfd.get());
}

void write_file_atomic(const std::string& path, std::span<const std::uint8_t> bytes) {
  write_file_atomic(path, [&](const ChunkWriter& w) { w(bytes); });
}

std::string read_file_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(fmt::format("cannot read '{}'", path));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace lockstep::io
