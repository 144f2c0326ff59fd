#include "lockstep/io/gguf.hpp"

#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace lockstep::io {

namespace {

constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// Bytes of one scalar of a fixed-size type; 0 for string/array.
std::size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    case GgufType::kString: case GgufType::kArray: return 0;
  }
  return 0;
}

bool valid_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(GgufType::kF64); }

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16:
    case GgufType::kU32: case GgufType::kI32: case GgufType::kU64: case GgufType::kI64: return true;
    default: return false;
  }
}

// The integer stored in the first `scalar_size(t)` bytes at p, or false when
// it does not fit an int64 (a u64 above INT64_MAX).
bool read_int(GgufType t, const unsigned char* p, std::int64_t& out) {
  std::uint64_t u = 0;
  const std::size_t n = scalar_size(t);
  for (std::size_t k = 0; k < n; ++k) u |= static_cast<std::uint64_t>(p[k]) << (8 * k);
  const bool is_signed = t == GgufType::kI8 || t == GgufType::kI16 || t == GgufType::kI32 || t == GgufType::kI64;
  if (is_signed && n < 8 && (u >> (8 * n - 1)) & 1u) u |= ~std::uint64_t{0} << (8 * n);  // sign-extend
  if (!is_signed && u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
  std::memcpy(&out, &u, sizeof out);
  return true;
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  static constexpr std::string_view names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<std::uint32_t>(t);
  return i < std::size(names) ? names[i] : "invalid";
}

std::optional<GgmlTypeSize> ggml_type_size(std::uint32_t type) {
  // From ggml's type_traits (ggml.c): blck_size, type_size. Types not listed
  // (removed ones, or forks' own such as bitnet.cpp's I2_S) are unknown.
  switch (type) {
    case 0: return GgmlTypeSize{"F32", 1, 4};
    case 1: return GgmlTypeSize{"F16", 1, 2};
    case 2: return GgmlTypeSize{"Q4_0", 32, 18};
    case 3: return GgmlTypeSize{"Q4_1", 32, 20};
    case 6: return GgmlTypeSize{"Q5_0", 32, 22};
    case 7: return GgmlTypeSize{"Q5_1", 32, 24};
    case 8: return GgmlTypeSize{"Q8_0", 32, 34};
    case 9: return GgmlTypeSize{"Q8_1", 32, 36};
    case 10: return GgmlTypeSize{"Q2_K", 256, 84};
    case 11: return GgmlTypeSize{"Q3_K", 256, 110};
    case 12: return GgmlTypeSize{"Q4_K", 256, 144};
    case 13: return GgmlTypeSize{"Q5_K", 256, 176};
    case 14: return GgmlTypeSize{"Q6_K", 256, 210};
    case 15: return GgmlTypeSize{"Q8_K", 256, 292};
    case 16: return GgmlTypeSize{"IQ2_XXS", 256, 66};
    case 17: return GgmlTypeSize{"IQ2_XS", 256, 74};
    case 18: return GgmlTypeSize{"IQ3_XXS", 256, 98};
    case 19: return GgmlTypeSize{"IQ1_S", 256, 50};
    case 20: return GgmlTypeSize{"IQ4_NL", 32, 18};
    case 21: return GgmlTypeSize{"IQ3_S", 256, 110};
    case 22: return GgmlTypeSize{"IQ2_S", 256, 82};
    case 23: return GgmlTypeSize{"IQ4_XS", 256, 136};
    case 24: return GgmlTypeSize{"I8", 1, 1};
    case 25: return GgmlTypeSize{"I16", 1, 2};
    case 26: return GgmlTypeSize{"I32", 1, 4};
    case 27: return GgmlTypeSize{"I64", 1, 8};
    case 28: return GgmlTypeSize{"F64", 1, 8};
    case 29: return GgmlTypeSize{"IQ1_M", 256, 56};
    case 30: return GgmlTypeSize{"BF16", 1, 2};
    case 34: return GgmlTypeSize{"TQ1_0", 256, 54};
    case 35: return GgmlTypeSize{"TQ2_0", 256, 66};
    default: return std::nullopt;
  }
}

// ---------------------------------------------------------------------------
// GgufValue accessors

namespace {
[[noreturn]] void wrong_kind(const std::string& key, GgufType have, std::string_view want) {
  throw std::runtime_error("gguf: key " + key + " is " + std::string(gguf_type_name(have)) + ", expected " +
                           std::string(want));
}
}  // namespace

std::int64_t GgufValue::as_int() const {
  std::int64_t v = 0;
  unsigned char b[8];
  for (int k = 0; k < 8; ++k) b[k] = static_cast<unsigned char>(bits_ >> (8 * k));
  if (!is_integer(type_)) wrong_kind(key_, type_, "an integer");
  if (!read_int(type_, b, v)) throw std::runtime_error("gguf: key " + key_ + ": value too large");
  return v;
}

double GgufValue::as_float() const {
  if (type_ == GgufType::kF32) {
    float f;
    const auto u = static_cast<std::uint32_t>(bits_);
    std::memcpy(&f, &u, sizeof f);
    return static_cast<double>(f);
  }
  if (type_ == GgufType::kF64) {
    double d;
    std::memcpy(&d, &bits_, sizeof d);
    return d;
  }
  wrong_kind(key_, type_, "f32 or f64");
}

bool GgufValue::as_bool() const {
  if (type_ != GgufType::kBool) wrong_kind(key_, type_, "bool");
  return bits_ != 0;
}

const std::string& GgufValue::as_string() const {
  if (type_ != GgufType::kString) wrong_kind(key_, type_, "string");
  return str_;
}

const std::vector<std::string>& GgufValue::strings() const {
  if (type_ != GgufType::kArray || elem_ != GgufType::kString) wrong_kind(key_, type_, "array of strings");
  return strs_;
}

std::vector<std::int64_t> GgufValue::ints() const {
  if (type_ != GgufType::kArray || !is_integer(elem_)) wrong_kind(key_, type_, "array of integers");
  std::vector<std::int64_t> out(count_);
  const std::size_t n = scalar_size(elem_);
  for (std::size_t i = 0; i < count_; ++i) {
    if (!read_int(elem_, raw_.data() + i * n, out[i])) throw std::runtime_error("gguf: key " + key_ + ": value too large");
  }
  return out;
}

std::vector<float> GgufValue::f32s() const {
  if (type_ != GgufType::kArray || elem_ != GgufType::kF32) wrong_kind(key_, type_, "array of f32");
  std::vector<float> out(count_);
  if (count_ > 0) std::memcpy(out.data(), raw_.data(), count_ * sizeof(float));  // little-endian host
  return out;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = index.find(std::string(key));
  return it == index.end() ? nullptr : &metadata[it->second].second;
}

const GgufValue& GgufFile::at(std::string_view key) const {
  if (const GgufValue* v = find(key)) return *v;
  throw std::runtime_error(source + ": missing key " + std::string(key));
}

// ---------------------------------------------------------------------------
// The parser: one cursor over either memory or a file, with its size known up
// front so that no length field can make us read or allocate past the end.

class GgufParser {
 public:
  GgufParser(std::span<const unsigned char> mem, std::string_view source)
      : mem_(mem), size_(mem.size()), source_(source) {}
  GgufParser(std::ifstream& file, std::uint64_t size, std::string_view source)
      : file_(&file), size_(size), source_(source) {}

  GgufFile parse();

 private:
  [[noreturn]] void fail(std::uint64_t at, const std::string& what) const {
    throw std::runtime_error(source_ + ": offset " + std::to_string(at) + ": " + what);
  }
  std::uint64_t remaining() const { return size_ - pos_; }
  void read(void* dst, std::uint64_t n, const char* what) {
    if (n > remaining()) fail(pos_, std::string("unexpected end of file reading ") + what);
    if (file_ != nullptr) {
      file_->read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
      if (static_cast<std::uint64_t>(file_->gcount()) != n) fail(pos_, "read error");
    } else if (n > 0) {
      std::memcpy(dst, mem_.data() + pos_, n);
    }
    pos_ += n;
  }
  template <class T>
  T read_le(const char* what) {
    unsigned char b[sizeof(T)];
    read(b, sizeof(T), what);
    std::uint64_t u = 0;
    for (std::size_t k = 0; k < sizeof(T); ++k) u |= static_cast<std::uint64_t>(b[k]) << (8 * k);
    return static_cast<T>(u);
  }
  std::string read_string(const char* what) {
    const std::uint64_t at = pos_;
    const auto len = read_le<std::uint64_t>(what);
    if (len > remaining()) fail(at, std::string(what) + " length " + std::to_string(len) + " exceeds the file");
    std::string s(static_cast<std::size_t>(len), '\0');
    read(s.data(), len, what);
    return s;
  }
  GgufValue read_value(const std::string& key);

  std::span<const unsigned char> mem_;
  std::ifstream* file_ = nullptr;
  std::uint64_t size_ = 0, pos_ = 0;
  std::string source_;
};

GgufValue GgufParser::read_value(const std::string& key) {
  GgufValue v;
  v.key_ = key;
  const std::uint64_t at = pos_;
  const auto type = read_le<std::uint32_t>("value type");
  if (!valid_type(type)) fail(at, "key " + key + ": invalid value type " + std::to_string(type));
  v.type_ = static_cast<GgufType>(type);
  if (v.type_ == GgufType::kString) {
    v.str_ = read_string("string value");
  } else if (v.type_ == GgufType::kArray) {
    const std::uint64_t at_elem = pos_;
    const auto elem = read_le<std::uint32_t>("array type");
    if (!valid_type(elem)) fail(at_elem, "key " + key + ": invalid array element type " + std::to_string(elem));
    v.elem_ = static_cast<GgufType>(elem);
    if (v.elem_ == GgufType::kArray) fail(at_elem, "key " + key + ": nested arrays are not supported");
    const std::uint64_t at_count = pos_;
    const auto count = read_le<std::uint64_t>("array length");
    // Every element takes at least scalar_size bytes (a string at least its
    // 8-byte length): a count the file cannot hold is rejected before any
    // allocation.
    const std::uint64_t min_elem = v.elem_ == GgufType::kString ? 8 : scalar_size(v.elem_);
    if (count > remaining() / min_elem) fail(at_count, "key " + key + ": array length " + std::to_string(count) + " exceeds the file");
    v.count_ = static_cast<std::size_t>(count);
    if (v.elem_ == GgufType::kString) {
      v.strs_.reserve(v.count_);
      for (std::size_t i = 0; i < v.count_; ++i) v.strs_.push_back(read_string("string in array"));
    } else {
      v.raw_.resize(v.count_ * min_elem);
      read(v.raw_.data(), v.raw_.size(), "array data");
      if (v.elem_ == GgufType::kBool) {
        for (std::size_t i = 0; i < v.count_; ++i) {
          if (v.raw_[i] > 1) fail(at_count + 8 + i, "key " + key + ": bool is neither 0 nor 1");
        }
      }
    }
  } else {
    const std::size_t n = scalar_size(v.type_);
    unsigned char b[8] = {};
    read(b, n, "scalar value");
    for (std::size_t k = 0; k < n; ++k) v.bits_ |= static_cast<std::uint64_t>(b[k]) << (8 * k);
    if (v.type_ == GgufType::kBool && v.bits_ > 1) fail(at + 4, "key " + key + ": bool is neither 0 nor 1");
  }
  return v;
}

GgufFile GgufParser::parse() {
  GgufFile g;
  g.source = source_;
  char magic[4];
  read(magic, 4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) fail(0, "not a GGUF file (bad magic)");
  g.version = read_le<std::uint32_t>("version");
  if (g.version == 0x03000000u || g.version == 0x02000000u) fail(4, "big-endian GGUF files are not supported");
  if (g.version != 2 && g.version != 3) fail(4, "unsupported GGUF version " + std::to_string(g.version));
  const auto n_tensors = read_le<std::uint64_t>("tensor count");
  const auto n_kv = read_le<std::uint64_t>("metadata count");
  // Each entry takes >= 12 bytes: the loops below end at the file's end long
  // before a huge count could matter, and nothing is reserved from counts.
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::uint64_t at = pos_;
    std::string key = read_string("key");
    if (key.empty()) fail(at, "empty key");
    if (g.index.count(key)) fail(at, "duplicate key " + key);
    GgufValue v = read_value(key);
    g.index.emplace(key, g.metadata.size());
    g.metadata.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = g.find("general.alignment")) {
    if (a->type() != GgufType::kU32) fail(pos_, "general.alignment must be u32");
    g.alignment = static_cast<std::uint64_t>(a->as_int());
    if (g.alignment == 0 || (g.alignment & (g.alignment - 1)) != 0) fail(pos_, "general.alignment is not a power of two");
  }
  std::unordered_map<std::string, std::size_t> names;
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    const std::uint64_t at = pos_;
    GgufTensorInfo t;
    t.name = read_string("tensor name");
    if (!names.emplace(t.name, g.tensors.size()).second) fail(at, "duplicate tensor name " + t.name);
    const auto n_dims = read_le<std::uint32_t>("tensor dims");
    if (n_dims == 0 || n_dims > kMaxDims) fail(at, "tensor " + t.name + ": " + std::to_string(n_dims) + " dimensions");
    std::uint64_t elems = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = read_le<std::uint64_t>("tensor dim");
      if (ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (ne != 0 && elems > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / ne)) {
        fail(at, "tensor " + t.name + ": element count overflows");
      }
      elems *= ne;
      t.dims.push_back(ne);
    }
    t.type = read_le<std::uint32_t>("tensor type");
    t.offset = read_le<std::uint64_t>("tensor offset");
    if (t.offset % g.alignment != 0) fail(at, "tensor " + t.name + ": offset " + std::to_string(t.offset) + " is not aligned");
    if (const auto ts = ggml_type_size(t.type)) {
      if (t.dims[0] % ts->block != 0) fail(at, "tensor " + t.name + ": row length is not a multiple of the " + std::string(ts->name) + " block");
      const std::uint64_t blocks = elems / ts->block;
      if (blocks > std::numeric_limits<std::uint64_t>::max() / ts->bytes) fail(at, "tensor " + t.name + ": size overflows");
      t.nbytes = blocks * ts->bytes;
    }
    g.tensors.push_back(std::move(t));
  }
  const std::uint64_t pad = (g.alignment - pos_ % g.alignment) % g.alignment;
  g.data_offset = pos_ + pad;
  for (const GgufTensorInfo& t : g.tensors) {
    if (!t.nbytes) continue;
    // data_offset + offset + nbytes <= size, written so that nothing overflows.
    if (t.offset > size_ || *t.nbytes > size_ - t.offset || g.data_offset > size_ - t.offset - *t.nbytes) {
      fail(pos_, "tensor " + t.name + ": data extends past the end of the file");
    }
  }
  return g;
}

GgufFile gguf_parse(std::span<const unsigned char> bytes, std::string_view source) {
  return GgufParser(bytes, source).parse();
}

GgufFile gguf_read(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path.string() + ": cannot open");
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error(path.string() + ": cannot stat: " + ec.message());
  return GgufParser(f, size, path.string()).parse();
}

}  // namespace lockstep::io
