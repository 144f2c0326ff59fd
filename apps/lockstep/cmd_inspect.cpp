// lockstep inspect FILE: the metadata and tensor table of a GGUF or
// safetensors file (a directory: its model.safetensors, or the shards its
// index names). A malformed file gives one line on stderr, its names and
// bytes escaped (io::escape_bytes), and exit status 2.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "lockstep/io/gguf.hpp"
#include "lockstep/io/gguf_tensor.hpp"
#include "lockstep/io/safetensors.hpp"
#include "command.hpp"

namespace lockstep::cli {
namespace {

namespace fs = std::filesystem;

std::string dims_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void inspect_gguf(const std::string& path, std::size_t max_elems) {
  const io::GgufFile g = io::gguf_read(path);
  fmt::print("{}: GGUF v{}, {} metadata keys, {} tensors, alignment {}, data at offset {}\n", io::escape_bytes(path),
             g.version, g.metadata.size(), g.tensors.size(), g.alignment, g.data_offset);
  for (const auto& [key, v] : g.metadata) {
    const std::string type = v.is_array() ? "array" : std::string(io::gguf_type_name(v.type()));
    fmt::print("  {:<44} {:<6} {}\n", io::escape_bytes(key), type, v.to_display(max_elems));
  }
  fmt::print("  {:<40} {:<6} {:<22} {:>14} {:>14}\n", "tensor", "type", "shape (row-major)", "bytes", "offset");
  std::uint64_t total = 0;
  for (const auto& t : g.tensors) {
    const std::vector<std::int64_t> shape(t.dims.rbegin(), t.dims.rend());
    fmt::print("  {:<40} {:<6} {:<22} {:>14} {:>14}\n", io::escape_bytes(t.name), io::ggml_type_label(t.type),
               dims_text(shape), t.nbytes ? std::to_string(*t.nbytes) : "?", t.offset);
    total += t.nbytes.value_or(0);
  }
  fmt::print("  {} tensor bytes\n", total);
}

void inspect_safetensors(const std::string& path) {
  const io::SafetensorsFile f = io::SafetensorsFile::read(path);
  fmt::print("{}: safetensors, {} tensors, {} metadata keys\n", io::escape_bytes(path), f.tensors().size(),
             f.metadata().size());
  for (const auto& [k, v] : f.metadata()) fmt::print("  {:<44} \"{}\"\n", io::escape_bytes(k), io::escape_bytes(v));
  fmt::print("  {:<56} {:<5} {:<22} {:>14}\n", "tensor", "dtype", "shape", "bytes");
  std::uint64_t total = 0;
  for (const auto& t : f.tensors()) {
    fmt::print("  {:<56} {:<5} {:<22} {:>14}\n", io::escape_bytes(t.name), io::dtype_name(t.dtype), dims_text(t.shape),
               t.end - t.begin);
    total += t.end - t.begin;
  }
  fmt::print("  {} tensor bytes\n", total);
}

class InspectCommand : public Command {
 public:
  void add(CLI::App& app) override {
    cmd_ = app.add_subcommand("inspect", "print the metadata and tensor table of a GGUF or safetensors file");
    cmd_->add_option("file", file_, "a .gguf or .safetensors file, or a Hugging Face model directory")->required();
    cmd_->add_option("--max-elems", max_elems_, "array elements shown per metadata key")->capture_default_str();
  }
  int run() override {
    try {
      std::string path = file_;
      if (fs::is_directory(path)) {
        if (!fs::exists(fs::path(path) / "model.safetensors"))
          throw std::runtime_error(io::escape_bytes(path) + ": no model.safetensors in this directory");
        path = (fs::path(path) / "model.safetensors").string();
      }
      std::ifstream in(path, std::ios::binary);
      if (!in) throw std::runtime_error(io::escape_bytes(path) + ": cannot open");
      char magic[4] = {};
      in.read(magic, 4);
      if (in.gcount() == 4 && std::string(magic, 4) == "GGUF")
        inspect_gguf(path, max_elems_);
      else
        inspect_safetensors(path);
      return 0;
    } catch (const std::exception& e) {
      std::fflush(stdout);
      fmt::print(stderr, "lockstep inspect: {}\n", e.what());
      return 2;
    }
  }

 private:
  std::string file_;
  std::size_t max_elems_ = 8;
};

}  // namespace

std::unique_ptr<Command> make_inspect_command() { return std::make_unique<InspectCommand>(); }

}  // namespace lockstep::cli
