#include "lockstep/io/gguf.hpp"

#include "lockstep/io/atomic_file.hpp"

#include <cstring>
#include <set>
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
  throw std::runtime_error("gguf: key " + escape_bytes(key) + " is " + std::string(gguf_type_name(have)) + ", expected " +
                           std::string(want));
}
}  // namespace

std::int64_t GgufValue::as_int() const {
  std::int64_t v = 0;
  unsigned char b[8];
  for (int k = 0; k < 8; ++k) b[k] = static_cast<unsigned char>(bits_ >> (8 * k));
  if (!is_integer(type_)) wrong_kind(key_, type_, "an integer");
  if (!read_int(type_, b, v)) throw std::runtime_error("gguf: key " + escape_bytes(key_) + ": value too large");
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
    if (!read_int(elem_, raw_.data() + i * n, out[i])) throw std::runtime_error("gguf: key " + escape_bytes(key_) + ": value too large");
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
  throw std::runtime_error(escape_bytes(source) + ": missing key " + escape_bytes(key));
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
    throw std::runtime_error(escape_bytes(source_) + ": offset " + std::to_string(at) + ": " + what);
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
  if (!valid_type(type)) fail(at, "key " + escape_bytes(key) + ": invalid value type " + std::to_string(type));
  v.type_ = static_cast<GgufType>(type);
  if (v.type_ == GgufType::kString) {
    v.str_ = read_string("string value");
  } else if (v.type_ == GgufType::kArray) {
    const std::uint64_t at_elem = pos_;
    const auto elem = read_le<std::uint32_t>("array type");
    if (!valid_type(elem)) fail(at_elem, "key " + escape_bytes(key) + ": invalid array element type " + std::to_string(elem));
    v.elem_ = static_cast<GgufType>(elem);
    if (v.elem_ == GgufType::kArray) fail(at_elem, "key " + escape_bytes(key) + ": nested arrays are not supported");
    const std::uint64_t at_count = pos_;
    const auto count = read_le<std::uint64_t>("array length");
    // Every element takes at least scalar_size bytes (a string at least its
    // 8-byte length): a count the file cannot hold is rejected before any
    // allocation.
    const std::uint64_t min_elem = v.elem_ == GgufType::kString ? 8 : scalar_size(v.elem_);
    if (count > remaining() / min_elem) fail(at_count, "key " + escape_bytes(key) + ": array length " + std::to_string(count) + " exceeds the file");
    v.count_ = static_cast<std::size_t>(count);
    if (v.elem_ == GgufType::kString) {
      v.strs_.reserve(v.count_);
      for (std::size_t i = 0; i < v.count_; ++i) v.strs_.push_back(read_string("string in array"));
    } else {
      v.raw_.resize(v.count_ * min_elem);
      read(v.raw_.data(), v.raw_.size(), "array data");
      if (v.elem_ == GgufType::kBool) {
        for (std::size_t i = 0; i < v.count_; ++i) {
          if (v.raw_[i] > 1) fail(at_count + 8 + i, "key " + escape_bytes(key) + ": bool is neither 0 nor 1");
        }
      }
    }
  } else {
    const std::size_t n = scalar_size(v.type_);
    unsigned char b[8] = {};
    read(b, n, "scalar value");
    for (std::size_t k = 0; k < n; ++k) v.bits_ |= static_cast<std::uint64_t>(b[k]) << (8 * k);
    if (v.type_ == GgufType::kBool && v.bits_ > 1) fail(at + 4, "key " + escape_bytes(key) + ": bool is neither 0 nor 1");
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
    if (g.index.count(key)) fail(at, "duplicate key " + escape_bytes(key));
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
    if (!names.emplace(t.name, g.tensors.size()).second) fail(at, "duplicate tensor name " + escape_bytes(t.name));
    const auto n_dims = read_le<std::uint32_t>("tensor dims");
    if (n_dims == 0 || n_dims > kMaxDims) fail(at, "tensor " + escape_bytes(t.name) + ": " + std::to_string(n_dims) + " dimensions");
    std::uint64_t elems = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = read_le<std::uint64_t>("tensor dim");
      if (ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (ne != 0 && elems > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / ne)) {
        fail(at, "tensor " + escape_bytes(t.name) + ": element count overflows");
      }
      elems *= ne;
      t.dims.push_back(ne);
    }
    t.type = read_le<std::uint32_t>("tensor type");
    t.offset = read_le<std::uint64_t>("tensor offset");
    if (t.offset % g.alignment != 0) fail(at, "tensor " + escape_bytes(t.name) + ": offset " + std::to_string(t.offset) + " is not aligned");
    if (const auto ts = ggml_type_size(t.type)) {
      if (t.dims[0] % ts->block != 0) fail(at, "tensor " + escape_bytes(t.name) + ": row length is not a multiple of the " + std::string(ts->name) + " block");
      const std::uint64_t blocks = elems / ts->block;
      if (blocks > std::numeric_limits<std::uint64_t>::max() / ts->bytes) fail(at, "tensor " + escape_bytes(t.name) + ": size overflows");
      t.nbytes = blocks * ts->bytes;
    } else if (t.type == kGgmlTypeI2S) {
      t.nbytes = ggml_tensor_nbytes(t.type, elems);
      if (!t.nbytes) fail(at, "tensor " + escape_bytes(t.name) + ": I2_S needs a multiple of 128 elements, has " + std::to_string(elems));
    }
    g.tensors.push_back(std::move(t));
  }
  const std::uint64_t pad = (g.alignment - pos_ % g.alignment) % g.alignment;
  g.data_offset = pos_ + pad;
  for (const GgufTensorInfo& t : g.tensors) {
    if (!t.nbytes) continue;
    // data_offset + offset + nbytes <= size, written so that nothing overflows.
    if (t.offset > size_ || *t.nbytes > size_ - t.offset || g.data_offset > size_ - t.offset - *t.nbytes) {
      fail(pos_, "tensor " + escape_bytes(t.name) + ": data extends past the end of the file");
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

std::vector<unsigned char> gguf_read_tensor_data(const std::filesystem::path& path, const GgufFile& file,
                                                 const GgufTensorInfo& tensor) {
  if (!tensor.nbytes)
    throw std::runtime_error(path.string() + ": tensor " + escape_bytes(tensor.name) + " has ggml type " +
                             std::to_string(tensor.type) + ", which lockstep does not know");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path.string() + ": cannot open");
  std::vector<unsigned char> out(static_cast<std::size_t>(*tensor.nbytes));
  f.seekg(static_cast<std::streamoff>(file.data_offset + tensor.offset));
  f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!f || static_cast<std::uint64_t>(f.gcount()) != out.size())
    throw std::runtime_error(path.string() + ": tensor " + escape_bytes(tensor.name) + ": cannot read its data");
  return out;
}

std::span<const unsigned char> gguf_tensor_data(std::span<const unsigned char> bytes, const GgufFile& file,
                                                const GgufTensorInfo& tensor) {
  if (!tensor.nbytes)
    throw std::runtime_error(escape_bytes(file.source) + ": tensor " + escape_bytes(tensor.name) + " has ggml type " +
                             std::to_string(tensor.type) + ", which lockstep does not know");
  const std::uint64_t at = file.data_offset + tensor.offset;  // the parser checked it lies inside the file
  if (at > bytes.size() || *tensor.nbytes > bytes.size() - at)
    throw std::runtime_error(escape_bytes(file.source) + ": tensor " + escape_bytes(tensor.name) + ": data past the end");
  return bytes.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(*tensor.nbytes));
}

// ---------------------------------------------------------------------------
// Writing

namespace {
void check_int_range(GgufType t, std::int64_t v) {
  std::int64_t lo = 0, hi = 0;
  switch (t) {
    case GgufType::kU8: lo = 0, hi = 0xFF; break;
    case GgufType::kI8: lo = -128, hi = 127; break;
    case GgufType::kU16: lo = 0, hi = 0xFFFF; break;
    case GgufType::kI16: lo = -32768, hi = 32767; break;
    case GgufType::kU32: lo = 0, hi = 0xFFFFFFFFll; break;
    case GgufType::kI32: lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max(); break;
    case GgufType::kU64: lo = 0, hi = std::numeric_limits<std::int64_t>::max(); break;
    case GgufType::kI64: lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max(); break;
    default: throw std::invalid_argument("gguf: " + std::string(gguf_type_name(t)) + " is not an integer type");
  }
  if (v < lo || v > hi)
    throw std::invalid_argument("gguf: " + std::to_string(v) + " does not fit " + std::string(gguf_type_name(t)));
}
}  // namespace

GgufValue GgufValue::integer(GgufType t, std::int64_t v) {
  check_int_range(t, v);
  GgufValue g;
  g.type_ = t;
  g.bits_ = static_cast<std::uint64_t>(v);
  const std::size_t n = scalar_size(t);
  if (n < 8) g.bits_ &= (std::uint64_t{1} << (8 * n)) - 1;
  return g;
}
GgufValue GgufValue::u64(std::uint64_t v) {
  GgufValue g;
  g.type_ = GgufType::kU64;
  g.bits_ = v;
  return g;
}
GgufValue GgufValue::f32(float v) {
  GgufValue g;
  g.type_ = GgufType::kF32;
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  g.bits_ = u;
  return g;
}
GgufValue GgufValue::f64(double v) {
  GgufValue g;
  g.type_ = GgufType::kF64;
  std::memcpy(&g.bits_, &v, 8);
  return g;
}
GgufValue GgufValue::boolean(bool v) {
  GgufValue g;
  g.type_ = GgufType::kBool;
  g.bits_ = v ? 1 : 0;
  return g;
}
GgufValue GgufValue::string(std::string v) {
  GgufValue g;
  g.type_ = GgufType::kString;
  g.str_ = std::move(v);
  return g;
}
GgufValue GgufValue::int_array(GgufType elem, const std::vector<std::int64_t>& v) {
  GgufValue g;
  g.type_ = GgufType::kArray;
  g.elem_ = elem;
  g.count_ = v.size();
  const std::size_t n = scalar_size(elem);
  for (std::int64_t x : v) {
    check_int_range(elem, x);
    for (std::size_t k = 0; k < n; ++k) g.raw_.push_back(static_cast<unsigned char>(static_cast<std::uint64_t>(x) >> (8 * k)));
  }
  return g;
}
GgufValue GgufValue::f32_array(const std::vector<float>& v) {
  GgufValue g;
  g.type_ = GgufType::kArray;
  g.elem_ = GgufType::kF32;
  g.count_ = v.size();
  g.raw_.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(g.raw_.data(), v.data(), g.raw_.size());
  return g;
}
GgufValue GgufValue::f64_array(const std::vector<double>& v) {
  GgufValue g;
  g.type_ = GgufType::kArray;
  g.elem_ = GgufType::kF64;
  g.count_ = v.size();
  g.raw_.resize(v.size() * 8);
  if (!v.empty()) std::memcpy(g.raw_.data(), v.data(), g.raw_.size());
  return g;
}
GgufValue GgufValue::bool_array(const std::vector<bool>& v) {
  GgufValue g;
  g.type_ = GgufType::kArray;
  g.elem_ = GgufType::kBool;
  g.count_ = v.size();
  for (bool b : v) g.raw_.push_back(b ? 1 : 0);
  return g;
}
GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue g;
  g.type_ = GgufType::kArray;
  g.elem_ = GgufType::kString;
  g.count_ = v.size();
  g.strs_ = std::move(v);
  return g;
}

bool GgufValue::operator==(const GgufValue& o) const {
  if (type_ != o.type_) return false;
  if (type_ == GgufType::kString) return str_ == o.str_;
  if (type_ != GgufType::kArray) return bits_ == o.bits_;
  return elem_ == o.elem_ && count_ == o.count_ && strs_ == o.strs_ && raw_ == o.raw_;
}

std::string GgufValue::to_display(std::size_t max_elems) const {
  const auto scalar = [](GgufType t, std::uint64_t bits) -> std::string {
    if (t == GgufType::kF32) {
      float f;
      const auto u32 = static_cast<std::uint32_t>(bits);
      std::memcpy(&f, &u32, 4);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
      return buf;
    }
    if (t == GgufType::kF64) {
      double d;
      std::memcpy(&d, &bits, 8);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", d);
      return buf;
    }
    if (t == GgufType::kBool) return bits ? "true" : "false";
    unsigned char b[8];
    for (int k = 0; k < 8; ++k) b[k] = static_cast<unsigned char>(bits >> (8 * k));
    std::int64_t v = 0;
    if (read_int(t, b, v)) return std::to_string(v);
    return std::to_string(bits);  // a u64 above INT64_MAX
  };
  if (type_ == GgufType::kString) {
    std::string q = "\"";
    q += escape_bytes(str_);
    q += '"';
    return q;
  }
  if (type_ != GgufType::kArray) return scalar(type_, bits_);
  std::string out = "[" + std::string(gguf_type_name(elem_)) + " x " + std::to_string(count_) + "]";
  const std::size_t show = std::min(count_, max_elems);
  const std::size_t n = scalar_size(elem_);
  for (std::size_t i = 0; i < show; ++i) {
    out += i == 0 ? " " : ", ";
    if (elem_ == GgufType::kString) {
      out += '"';
      out += escape_bytes(strs_[i]);
      out += '"';
    } else {
      std::uint64_t bits = 0;
      for (std::size_t k = 0; k < n; ++k) bits |= static_cast<std::uint64_t>(raw_[i * n + k]) << (8 * k);
      out += scalar(elem_, bits);
    }
  }
  if (show < count_) out += ", ...";
  return out;
}

std::optional<std::uint64_t> ggml_tensor_nbytes(std::uint32_t type, std::uint64_t numel) {
  if (type == kGgmlTypeI2S) {
    if (numel % 128 != 0) return std::nullopt;
    return numel / 4 + 32;
  }
  const auto ts = ggml_type_size(type);
  if (!ts || numel % ts->block != 0) return std::nullopt;
  return numel / ts->block * ts->bytes;
}

GgufWriter::GgufWriter(std::uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw std::invalid_argument("gguf writer: alignment " + std::to_string(alignment) + " is not a power of two");
  if (alignment != 32) set("general.alignment", GgufValue::integer(GgufType::kU32, alignment));
}

void GgufWriter::set(std::string key, GgufValue value) {
  if (key.empty()) throw std::invalid_argument("gguf writer: empty key");
  for (const auto& kv : kv_)
    if (kv.first == key) throw std::invalid_argument("gguf writer: duplicate key " + escape_bytes(key));
  if (key == "general.alignment" && (value.type() != GgufType::kU32 || value.as_int() != alignment_))
    throw std::invalid_argument("gguf writer: general.alignment is the writer's own (its constructor's argument)");
  value.key_ = key;
  kv_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_tensor(std::string name, std::vector<std::uint64_t> dims, std::uint32_t type,
                            std::vector<unsigned char> data) {
  for (const auto& t : tensors_)
    if (t.info.name == name) throw std::invalid_argument("gguf writer: duplicate tensor " + escape_bytes(name));
  if (dims.empty() || dims.size() > kMaxDims)
    throw std::invalid_argument("gguf writer: tensor " + escape_bytes(name) + " has " + std::to_string(dims.size()) + " dimensions");
  std::uint64_t n = 1;
  for (auto d : dims) n *= d;
  const auto want = ggml_tensor_nbytes(type, n);
  if (!want) throw std::invalid_argument("gguf writer: tensor " + escape_bytes(name) + ": type " + std::to_string(type) + " cannot hold " + std::to_string(n) + " elements");
  if (*want != data.size())
    throw std::invalid_argument("gguf writer: tensor " + escape_bytes(name) + ": " + std::to_string(data.size()) + " bytes, its type needs " + std::to_string(*want));
  if (const auto ts = ggml_type_size(type); ts && dims[0] % ts->block != 0)
    throw std::invalid_argument("gguf writer: tensor " + escape_bytes(name) + ": row length is not a multiple of the " + std::string(ts->name) + " block");
  Tensor t;
  t.info.name = std::move(name);
  t.info.dims = std::move(dims);
  t.info.type = type;
  t.info.offset = (data_size_ + alignment_ - 1) / alignment_ * alignment_;
  t.info.nbytes = *want;
  data_size_ = t.info.offset + *want;
  t.data = std::move(data);
  tensors_.push_back(std::move(t));
}

void GgufWriter::emit(const std::function<void(const unsigned char*, std::size_t)>& out) const {
  std::vector<unsigned char> h;
  const auto le = [&](std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) h.push_back(static_cast<unsigned char>(v >> (8 * k)));
  };
  const auto str = [&](const std::string& s) {
    le(s.size(), 8);
    h.insert(h.end(), s.begin(), s.end());
  };
  le(0x46554747u, 4);  // "GGUF"
  le(3, 4);
  le(tensors_.size(), 8);
  le(kv_.size(), 8);
  for (const auto& [key, v] : kv_) {
    str(key);
    le(static_cast<std::uint32_t>(v.type_), 4);
    if (v.type_ == GgufType::kString) {
      str(v.str_);
    } else if (v.type_ == GgufType::kArray) {
      le(static_cast<std::uint32_t>(v.elem_), 4);
      le(v.count_, 8);
      if (v.elem_ == GgufType::kString)
        for (const auto& s : v.strs_) str(s);
      else
        h.insert(h.end(), v.raw_.begin(), v.raw_.end());
    } else {
      le(v.bits_, static_cast<int>(scalar_size(v.type_)));
    }
  }
  for (const auto& t : tensors_) {
    str(t.info.name);
    le(t.info.dims.size(), 4);
    for (auto d : t.info.dims) le(d, 8);
    le(t.info.type, 4);
    le(t.info.offset, 8);
  }
  while (h.size() % alignment_) h.push_back(0);
  out(h.data(), h.size());
  static const unsigned char zeros[64] = {};
  std::uint64_t at = 0;
  for (const auto& t : tensors_) {
    for (; at < t.info.offset; at += std::min<std::uint64_t>(64, t.info.offset - at))
      out(zeros, static_cast<std::size_t>(std::min<std::uint64_t>(64, t.info.offset - at)));
    out(t.data.data(), t.data.size());
    at += t.data.size();
  }
  const std::uint64_t end = (at + alignment_ - 1) / alignment_ * alignment_;  // llama.cpp pads the last tensor too
  for (; at < end; at += std::min<std::uint64_t>(64, end - at)) out(zeros, static_cast<std::size_t>(std::min<std::uint64_t>(64, end - at)));
}

std::vector<unsigned char> GgufWriter::serialize() const {
  std::vector<unsigned char> out;
  emit([&](const unsigned char* p, std::size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  write_file_atomic(path.string(), [&](const ChunkWriter& w) {
    emit([&](const unsigned char* p, std::size_t n) { w({p, n}); });
  });
}

}  // namespace lockstep::io
