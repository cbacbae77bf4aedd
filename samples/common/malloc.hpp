// How the samples' processes keep the memory they free: building and compiling a large graph allocates and frees
// gigabytes, and glibc's defaults hand freed blocks back to the kernel (trimming the heap, unmapping large blocks),
// so each reuse faults in freshly zeroed pages again.
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace samples {

/// Keeps freed memory in the process: no heap trimming below 1 GiB, 256 MiB more heap per extension, blocks below
/// 1 GiB from the heap rather than mapped one by one: fewer page faults at startup for a higher peak resident memory
/// (benchmarks/RESULTS.md, session 57). A process-wide choice, made by the programs, never by the library.
inline void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
#endif
}

}  // namespace samples
