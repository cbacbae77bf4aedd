// Target: the modelled machine (IPUs × tiles, memory per tile, clock, exchange and sync costs) and its presets.
#pragma once

#include <tilebsp/core/error.hpp>

#include <cstddef>
#include <string>

namespace tilebsp {

/// A tiled BSP machine. Figures for the IPU presets come from Graphcore's published specifications
/// (see docs/01-machine-model.md); sync figures are model parameters, not measurements.
struct Target {
  std::string name;
  std::size_t ipus = 1;
  std::size_t tiles_per_ipu = 1;
  std::size_t bytes_per_tile = 1 << 16;
  std::size_t workers_per_tile = 6;
  double clock_hz = 1.33e9;
  double exchange_bytes_per_cycle = 4;      ///< per tile, on one IPU (send and receive each)
  double inter_ipu_bytes_per_cycle = 48;    ///< per IPU pair and direction (64 GB/s of IPU-Links at 1.33 GHz)
  std::size_t inter_ipu_latency_cycles = 1000;  ///< added once to an exchange that crosses IPU-Links
  /// Replicas: their collectives run over IPU-Links while all replicas' IPUs are within one IPU-POD (64 IPUs: 16
  /// IPU-M2000s joined by IPU-Links), else over the GW-Links between pods (100 Gb/s, 9.4 bytes per cycle).
  std::size_t ipus_per_pod = 64;
  double gateway_bytes_per_cycle = 9.4;
  double host_bytes_per_cycle = 24;         ///< host link (PCIe Gen4 x16, ~32 GB/s at 1.33 GHz)
  double f32_macs_per_cycle = 16;           ///< per tile, f32 operands (accumulating matmul/conv unit)
  double f16_macs_per_cycle = 64;           ///< per tile, f16 operands
  std::size_t sync_cycles = 150;            ///< on-chip barrier
  std::size_t inter_ipu_sync_cycles = 1500;  ///< barrier across IPUs (only steps on more than one IPU pay it)

  std::size_t num_tiles() const noexcept { return ipus * tiles_per_ipu; }
  /// The IPU of a tile: 0 on one IPU without a division (planning asks once per vertex and source tile).
  std::size_t ipu_of(std::size_t tile) const noexcept { return ipus == 1 ? 0 : tile / tiles_per_ipu; }
  std::size_t total_bytes() const noexcept { return num_tiles() * bytes_per_tile; }

  friend bool operator==(Target const&, Target const&) = default;
};

namespace targets {

/// Graphcore Colossus GC2 (IPU Mk1): 1216 tiles × 256 KiB, 6 workers per tile, 1.6 GHz.
inline Target ipu_mk1(std::size_t ipus = 1) {
  if (ipus == 0) throw index_error("ipu_mk1: the number of IPUs must be at least 1");
  Target t;
  t.name = ipus == 1 ? "ipu_mk1" : "ipu_mk1x" + std::to_string(ipus);
  t.ipus = ipus;
  t.tiles_per_ipu = 1216;
  t.bytes_per_tile = 256 * 1024;
  t.clock_hz = 1.6e9;
  t.inter_ipu_bytes_per_cycle = 40;  // 64 GB/s at 1.6 GHz
  t.f32_macs_per_cycle = 8;          // 31.1 TFLOP/s f32 and 124.5 TFLOP/s f16 over 1216 tiles at 1.6 GHz
  t.f16_macs_per_cycle = 32;
  return t;
}

/// Graphcore Colossus GC200 (IPU Mk2): 1472 tiles × 624 KiB, 6 workers per tile, 1.33 GHz; 62.5 TFLOP/s f32
/// and 250 TFLOP/s f16 give 16 and 64 MACs per tile-cycle.
inline Target ipu_mk2(std::size_t ipus = 1) {
  if (ipus == 0) throw index_error("ipu_mk2: the number of IPUs must be at least 1");
  Target t;
  t.name = ipus == 1 ? "ipu_mk2" : "ipu_mk2x" + std::to_string(ipus);
  t.ipus = ipus;
  t.tiles_per_ipu = 1472;
  t.bytes_per_tile = 624 * 1024;
  return t;
}

/// A small test machine: `tiles` tiles of `bytes_per_tile` bytes on each of `ipus` IPUs, Mk2 timing.
inline Target tiny(std::size_t tiles, std::size_t bytes_per_tile = 64 * 1024, std::size_t ipus = 1) {
  if (tiles == 0 || ipus == 0) throw index_error("tiny: tiles and ipus must be at least 1");
  Target t;
  t.name = "tiny" + std::to_string(tiles) + (ipus > 1 ? "x" + std::to_string(ipus) : "");
  t.ipus = ipus;
  t.tiles_per_ipu = tiles;
  t.bytes_per_tile = bytes_per_tile;
  return t;
}

}  // namespace targets
}  // namespace tilebsp
