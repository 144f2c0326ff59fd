// A GGUF (v2/v3) reader: the metadata key/values and the tensor directory.
//
// GGUF is llama.cpp's model file: "GGUF", version, tensor count, metadata
// count, the metadata (key, type, value), the tensor infos (name, dims, ggml
// type, offset), padding to `general.alignment` (default 32), then the tensor
// data. All integers are little-endian. Spec: ggml/docs/gguf.md.
//
// The reader reads the header only (tensor data stays on disk; a model loader
// reads or maps it at data_offset + tensor.offset). Malformed input throws
// std::runtime_error("<source>: offset N: <what>"); it never allocates more
// than the input could hold.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

 private:
  friend class GgufParser;
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

GgufFile gguf_parse(std::span<const unsigned char> bytes, std::string_view source);
GgufFile gguf_read(const std::filesystem::path& path);

}  // namespace lockstep::io
