// Host streams: FIFO connections (buffers and callbacks) and the transfers of stream instructions. Part of the
// Engine's definitions (exec/engine_impl.hpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/exec/detail/engine_core.hpp>
#include <tilebsp/exec/engine.hpp>

#include <string>
#include <utility>

namespace tilebsp {

TILEBSP_INLINE void exec::detail::EngineCore::stream(schedule::Instr const& in, std::size_t local) {
  auto const& fifo = g_.fifos[static_cast<std::size_t>(in.a)];
  auto const f = static_cast<std::size_t>(in.a);
  auto& c = fifos_[f][fifo_shared_[f] ? 0 : local];
  Tensor const& t = s_.slots[static_cast<std::size_t>(in.b)];
  std::size_t const bytes = t.num_elements() * size_of(t.element_type());
  bool const to_device = in.op == schedule::Op::stream_in;
  std::byte* host = nullptr;
  if (c.fill || c.drain) {
    if (to_device) c.take_next();
    host = c.scratch.data();
  } else {
    if (c.pos + bytes > c.buffer_bytes) {
      if (!c.circular || bytes == 0)
        throw stream_error(std::string(to_device ? "stream_in" : "stream_out") + ": FIFO '" + fifo.name +
                           "' is exhausted after " + std::to_string(c.transfers) + " transfers");
      c.pos = 0;
    }
    host = c.buffer + c.pos;
    c.pos += bytes;
  }
  ++c.transfers;
  if (to_device) write_bytes(local, t, host, bytes);
  else read_bytes(local, t, host, bytes);
  if (c.drain) c.drain(host);
}

TILEBSP_INLINE exec::detail::FifoConnection& exec::detail::EngineCore::connection(char const* op, Fifo const& f,
                                                                                ElementType type, std::size_t local) {
  if (f.graph != g_.id || f.id >= fifos_.size()) throw error(std::string(op) + ": the FIFO belongs to another graph");
  if (f.type != type)
    throw type_error(std::string(op) + ": FIFO '" + g_.fifos[f.id].name + "' carries " + std::string(name_of(f.type)) +
                     " but the host type is " + std::string(name_of(type)));
  // Switching between one shared connection and one per replica drops the old ones.
  bool const shared = local == all;
  if (static_cast<bool>(fifo_shared_[f.id]) != shared) {
    for (auto& c : fifos_[f.id]) c.wait(), c = {};
    fifo_shared_[f.id] = shared;
  }
  return fifos_[f.id][shared ? 0 : local];
}

TILEBSP_INLINE void Engine::connect_buffer(Fifo const& f, std::size_t replica, ElementType type, std::byte* data,
                                           std::size_t elements, std::size_t bytes, bool circular, bool read_only) {
  if (read_only && f.graph == core_->g_.id && f.id < core_->g_.fifos.size() && !f.to_device)
    throw stream_error("connect: device-to-host FIFO '" + core_->fifo_name(f) + "' needs writable host memory");
  std::size_t const local = replica == all_replicas ? exec::detail::EngineCore::all : core_->local_of("connect", replica);
  core_->connection("connect", f, type, local);  // checks the FIFO first
  if (elements % std::max<std::size_t>(f.elements, 1) != 0 || (f.elements > 0 && elements == 0))
    throw stream_error("connect: FIFO '" + core_->fifo_name(f) + "' moves " + std::to_string(f.elements) +
                       " elements per transfer; the host buffer of " + std::to_string(elements) +
                       " elements is not a positive multiple of that");
  auto& c = core_->connection("connect", f, type, local);
  c.wait();
  c = {};
  c.connected = true;
  c.buffer = data;
  c.buffer_bytes = bytes;
  c.circular = circular;
}

TILEBSP_INLINE void Engine::connect_callback(Fifo const& f, std::size_t replica, ElementType type,
                                             std::size_t element_bytes, std::function<void(std::byte*)> fill,
                                             std::function<void(std::byte const*)> drain, ConnectOptions options) {
  std::size_t const local = replica == all_replicas ? exec::detail::EngineCore::all : core_->local_of("connect", replica);
  core_->connection("connect", f, type, local);  // checks the FIFO first
  if (options.prefetch && !f.to_device)
    throw stream_error("connect: prefetch applies to infeeds; FIFO '" + core_->fifo_name(f) + "' is an outfeed");
  if (f.to_device && !fill) throw stream_error("connect: an infeed callback must accept std::span<T>");
  if (!f.to_device && !drain) throw stream_error("connect: an outfeed callback must accept std::span<T const>");
  auto& c = core_->connection("connect", f, type, local);
  c.wait();
  c = {};
  c.connected = true;
  c.prefetch = options.prefetch;
  if (f.to_device) c.fill = std::move(fill);
  else c.drain = std::move(drain);
  c.scratch.resize(f.elements * element_bytes + 1);
  if (c.prefetch) c.next.resize(c.scratch.size());
}

}  // namespace tilebsp
