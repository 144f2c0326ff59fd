#include "lockstep/data/rdata.hpp"

#include <zlib.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

namespace lockstep::data {
namespace {

// Big-endian reader over the XDR stream, with offsets for error messages.
class XdrReader {
 public:
  XdrReader(std::span<const std::uint8_t> b, const std::string& what) : b_(b), what_(what) {}

  std::int32_t i32() {
    need(4, "a 32-bit integer");
    const std::uint32_t v = (std::uint32_t{b_[pos_]} << 24) | (std::uint32_t{b_[pos_ + 1]} << 16) |
                            (std::uint32_t{b_[pos_ + 2]} << 8) | std::uint32_t{b_[pos_ + 3]};
    pos_ += 4;
    return static_cast<std::int32_t>(v);
  }

  std::string bytes(std::size_t n) {
    need(n, "string bytes");
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  [[noreturn]] void fail(const std::string& msg) const {
    throw std::runtime_error(fmt::format("{}: {} at byte {}", what_, msg, pos_));
  }

  std::size_t pos() const { return pos_; }
  std::size_t size() const { return b_.size(); }

 private:
  void need(std::size_t n, const char* thing) const {
    if (b_.size() - pos_ < n) fail(fmt::format("truncated while reading {}", thing));
  }
  std::span<const std::uint8_t> b_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

constexpr int kStrSxp = 16;   // character vector
constexpr int kCharSxp = 9;   // one string
constexpr int kNaLength = -1; // NA_STRING is written as a CHARSXP of length -1

}  // namespace

CharacterVector parse_r_character_vector(std::span<const std::uint8_t> bytes,
                                         const std::string& what) {
  XdrReader r(bytes, what);
  if (r.bytes(2) != "X\n") r.fail("not an R XDR serialization (expected \"X\\n\")");
  const std::int32_t version = r.i32();
  if (version != 2 && version != 3) r.fail(fmt::format("unsupported serialization version {}", version));
  r.i32();  // R version that wrote it
  r.i32();  // oldest R version that can read it
  if (version == 3) {
    const std::int32_t n = r.i32();  // native encoding name, e.g. "UTF-8"
    if (n < 0 || n > 64) r.fail(fmt::format("bad encoding-name length {}", n));
    r.bytes(static_cast<std::size_t>(n));
  }
  const std::int32_t flags = r.i32();
  if ((flags & 0xff) != kStrSxp)
    r.fail(fmt::format("expected a character vector (type 16), found type {}", flags & 0xff));
  const std::int32_t length = r.i32();
  if (length < 0) r.fail(fmt::format("bad vector length {} (long vectors are not supported)", length));
  // Every element takes at least 8 bytes: refuse lengths the input cannot hold
  // before reserving memory for them.
  if (static_cast<std::size_t>(length) > (r.size() - r.pos()) / 8)
    r.fail(fmt::format("vector length {} exceeds the data", length));
  CharacterVector out;
  out.reserve(static_cast<std::size_t>(length));
  for (std::int32_t i = 0; i < length; ++i) {
    const std::int32_t cflags = r.i32();
    if ((cflags & 0xff) != kCharSxp)
      r.fail(fmt::format("element {}: expected a string (type 9), found type {}", i, cflags & 0xff));
    const std::int32_t n = r.i32();
    if (n == kNaLength) {
      out.emplace_back();
    } else if (n < 0) {
      r.fail(fmt::format("element {}: bad string length {}", i, n));
    } else {
      out.push_back(r.bytes(static_cast<std::size_t>(n)));
    }
  }
  return out;
}

std::vector<CharacterVector> parse_rdb(std::span<const std::uint8_t> bytes, const std::string& what) {
  std::vector<CharacterVector> out;
  std::size_t off = 0;
  while (off < bytes.size()) {
    if (bytes.size() - off < 4)
      throw std::runtime_error(fmt::format("{}: truncated blob header at byte {}", what, off));
    const std::uint32_t want = (std::uint32_t{bytes[off]} << 24) | (std::uint32_t{bytes[off + 1]} << 16) |
                               (std::uint32_t{bytes[off + 2]} << 8) | std::uint32_t{bytes[off + 3]};
    // zlib cannot expand more than 1032:1, so a larger claim is corrupt; refusing
    // it here keeps a damaged file from allocating gigabytes.
    const std::uint64_t most = 1032ull * (bytes.size() - off - 4) + 64;
    if (want > (1u << 30) || want > most)
      throw std::runtime_error(fmt::format("{}: blob at byte {} claims {} bytes, more than its data can hold", what, off, want));
    std::vector<std::uint8_t> inflated(want);
    z_stream z{};
    if (inflateInit(&z) != Z_OK) throw std::runtime_error(what + ": zlib inflateInit failed");
    z.next_in = const_cast<Bytef*>(bytes.data() + off + 4);
    z.avail_in = static_cast<uInt>(bytes.size() - off - 4);
    z.next_out = inflated.data();
    z.avail_out = want;
    const int rc = inflate(&z, Z_FINISH);
    const std::size_t consumed = z.total_in, produced = z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || produced != want)
      throw std::runtime_error(fmt::format(
          "{}: blob at byte {}: zlib stream is corrupt or its length is not the {} bytes its header says",
          what, off, want));
    out.push_back(parse_r_character_vector(inflated, fmt::format("{} blob {}", what, out.size())));
    off += 4 + consumed;
  }
  return out;
}

std::vector<CharacterVector> read_rdb(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_rdb(bytes, path);
}

}  // namespace lockstep::data
