// The AMX tile configuration both AMX kernels use (int8_gemm_kernels.cpp's
// int8 GEMM and ternary_gemm.cpp's BitLinear product): palette 1, all eight
// tiles 16 rows × 64 bytes — an accumulator of 16 × 16 int32, an A tile of 16
// rows × 64 k, or a B tile of 16 k-quads × 16 columns × 4 bytes.
// Only for x86-64 builds with GCC or clang; the caller must hold the tile
// permission (int8::probe_machine asks for it) and run where amx_int8 exists.
#pragma once

#include <cstdint>

namespace lockstep::cpu::amx {

struct alignas(64) TileConfig {
  std::uint8_t palette_id = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};  // bytes per row of each tile
  std::uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// ldtilecfg with every tile 16 × 64 bytes. Not GCC 12's _tile_loadconfig: its
// asm names only the first 8 bytes of the configuration as read, so the stores
// of the rest could be dropped as dead. Here the whole object is the operand,
// and the "memory" clobber also orders the buffers written before the tile
// loads, whose asm (GCC's _tile_loadd) takes only the address and names no
// memory at all.
inline void load_uniform_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg) : "memory");
}

}  // namespace lockstep::cpu::amx
