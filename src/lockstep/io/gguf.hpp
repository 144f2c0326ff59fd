// A GGUF (v2/v3) reader: the metadata key/values and the tensor directory.
//
// GGUF is llama.cpp's model file: "GGUF", version, tensor count, metadata
// count, the metadata (key, type, value), the tensor infos (name, dims, ggml
// type, offset), padding to `general.alignment` (default 32), then the tensor
// data. All integers are little-endian. Spec: ggml/docs/gguf.md.
//
// The writer (GgufWriter) emits v3 files: the metadata in the order added,
// general.alignment written first when it is not the default 32, tensor data
// each at an aligned offset. Tensor data codecs (F32, F16, BF16, Q8_0 and
// bitnet.cpp's I2_S) are in io/gguf_tensor.hpp.
//
// The reader reads the header only (tensor data stays on disk; a model loader
// reads or maps it at data_offset + tensor.offset). Malformed input throws
// std::runtime_error("<source>: offset N: <what>"); it never allocates more
// than the input could hold.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockstep/io/escape.hpp"

namespace lockstep::io {

enum class GgufType : std::uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// One metadata value: a scalar, a string, or an array of scalars or strings
// (arrays of arrays are rejected, as llama.cpp does).
class GgufValue {
 public:
  // Constructors for the writer (and tests). Integers out of the type's range
  // throw std::invalid_argument.
  static GgufValue integer(GgufType t, std::int64_t v);  // u8 .. i64 (u64 from a non-negative int64)
  static GgufValue u64(std::uint64_t v);
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue int_array(GgufType elem, const std::vector<std::int64_t>& v);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue f64_array(const std::vector<double>& v);
  static GgufValue bool_array(const std::vector<bool>& v);
  static GgufValue string_array(std::vector<std::string> v);

  // Same type, element type and bytes (floats by bit pattern).
  bool operator==(const GgufValue& o) const;
  // The value in a line for `lockstep inspect`: scalars as written, strings
  // quoted and escaped (escape_bytes), arrays as their type and length with
  // the first few elements.
  std::string to_display(std::size_t max_elems = 8) const;

  GgufType type() const { return type_; }
  GgufType elem_type() const { return elem_; }  // arrays only
  bool is_array() const { return type_ == GgufType::kArray; }

  // Scalars. Each throws std::runtime_error naming the key when the value is
  // of another kind (or an integer out of the target's range).
  std::int64_t as_int() const;      // any integer type
  double as_float() const;          // f32 or f64
  bool as_bool() const;
  const std::string& as_string() const;

  // Arrays.
  std::size_t size() const { return count_; }
  const std::vector<std::string>& strings() const;  // array of strings
  std::vector<std::int64_t> ints() const;           // array of any integer type
  std::vector<float> f32s() const;                  // array of f32
  // The raw little-endian bytes of a numeric array (the writer's input).
  const std::vector<unsigned char>& raw() const { return raw_; }
  std::uint64_t scalar_bits() const { return bits_; }

 private:
  friend class GgufParser;
  friend class GgufWriter;
  std::string key_;  // for messages
  GgufType type_ = GgufType::kU8, elem_ = GgufType::kU8;
  std::uint64_t bits_ = 0;   // a numeric scalar's little-endian bytes
  std::string str_;
  std::size_t count_ = 0;
  std::vector<std::string> strs_;
  std::vector<unsigned char> raw_;  // a numeric array's little-endian bytes
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> dims;  // ne[0] first (the contiguous dimension)
  std::uint32_t type = 0;           // ggml_type
  std::uint64_t offset = 0;         // from GgufFile::data_offset
  std::optional<std::uint64_t> nbytes;  // when the ggml type is known to us
};

struct GgufFile {
  std::string source;
  std::uint32_t version = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;                       // in file order
  std::uint64_t alignment = 32;
  std::uint64_t data_offset = 0;  // absolute file offset of the tensor data

  const GgufValue* find(std::string_view key) const;
  // Throws std::runtime_error("<source>: missing key <key>").
  const GgufValue& at(std::string_view key) const;

  std::unordered_map<std::string, std::size_t> index;  // key -> metadata position
};

// ggml type name and (block size, bytes per block); nullopt when unknown.
struct GgmlTypeSize {
  std::string_view name;
  std::uint32_t block, bytes;
};
std::optional<GgmlTypeSize> ggml_type_size(std::uint32_t type);

// Bytes of a tensor of `numel` elements of this ggml type: the block formula,
// and bitnet.cpp's I2_S (numel / 4 + 32, numel a multiple of 128). nullopt
// for an unknown type or an element count that is not whole blocks.
std::optional<std::uint64_t> ggml_tensor_nbytes(std::uint32_t type, std::uint64_t numel);

// bitnet.cpp's ternary type and file type (its llama.cpp fork's ggml.h).
inline constexpr std::uint32_t kGgmlTypeI2S = 36;
inline constexpr std::uint32_t kGgufFileTypeI2S = 40;  // LLAMA_FTYPE_MOSTLY_I2_S


GgufFile gguf_parse(std::span<const unsigned char> bytes, std::string_view source);
GgufFile gguf_read(const std::filesystem::path& path);

// A tensor's data bytes (nbytes of them at data_offset + offset), read from
// the file; throws std::runtime_error naming the file and tensor when its
// type is unknown or the read fails.
std::vector<unsigned char> gguf_read_tensor_data(const std::filesystem::path& path, const GgufFile& file,
                                                 const GgufTensorInfo& tensor);
// The same from a file held in memory.
std::span<const unsigned char> gguf_tensor_data(std::span<const unsigned char> bytes, const GgufFile& file,
                                                const GgufTensorInfo& tensor);

// A GGUF v3 writer. Keys and tensor names must be unique (std::invalid_argument
// otherwise); tensor data is given as the type's bytes (io/gguf_tensor.hpp
// encodes them) and checked against ggml_tensor_nbytes.
class GgufWriter {
 public:
  explicit GgufWriter(std::uint32_t alignment = 32);
  void set(std::string key, GgufValue value);
  // dims: ne[0] first (a [rows, cols] row-major matrix is {cols, rows}).
  void add_tensor(std::string name, std::vector<std::uint64_t> dims, std::uint32_t type,
                  std::vector<unsigned char> data);
  std::vector<unsigned char> serialize() const;
  void write(const std::filesystem::path& path) const;  // atomically (io/atomic_file.hpp)

 private:
  struct Tensor {
    GgufTensorInfo info;
    std::vector<unsigned char> data;
  };
  std::uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
  std::uint64_t data_size_ = 0;
  void emit(const std::function<void(const unsigned char*, std::size_t)>& out) const;
};

}  // namespace lockstep::io
