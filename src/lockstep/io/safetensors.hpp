// safetensors: the checkpoint format Hugging Face tools read.
//
// Layout: 8 bytes little-endian u64 N, then N bytes of JSON header
//   {"name": {"dtype": "F32", "shape": [r, c], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the data buffer; offsets are relative to its start. The reader enforces
// the rules of the reference implementation: offsets in range and consistent
// with dtype × shape, tensors neither overlapping nor leaving holes, the
// header valid JSON of at most 100 MB.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace lockstep::io {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* dtype_name(DType d);      // "F32", ...
std::size_t dtype_size(DType d);      // bytes per element
DType dtype_from_name(const std::string& s);  // throws std::runtime_error on unknown

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range inside the data buffer

  std::int64_t numel() const;
};

// A tensor to write: name, dtype, shape and its little-endian bytes.
struct TensorRef {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::span<const std::uint8_t> bytes;

  static TensorRef f32(std::string name, std::vector<std::int64_t> shape, std::span<const float> v);
};

class SafetensorsFile {
 public:
  // Parses a whole file's bytes (kept inside the object). Throws
  // std::runtime_error naming `what` and the problem on malformed input.
  static SafetensorsFile parse(std::vector<std::uint8_t> bytes, const std::string& what = "safetensors");
  static SafetensorsFile read(const std::string& path);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;

  // The bytes of a tensor; throws if absent.
  std::span<const std::uint8_t> bytes(const std::string& name) const;
  // A float32 tensor's values, checked against the expected shape when given.
  std::vector<float> f32(const std::string& name, const std::vector<std::int64_t>* expect_shape = nullptr) const;

 private:
  std::string what_;
  std::vector<std::uint8_t> file_;
  std::size_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Serializes tensors (in the order given) with metadata into safetensors bytes.
std::vector<std::uint8_t> serialize_safetensors(const std::vector<TensorRef>& tensors,
                                                const std::map<std::string, std::string>& metadata = {});

// Writes a safetensors file atomically (io/atomic_file.hpp).
void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace lockstep::io
