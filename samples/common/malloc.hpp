// How the samples' processes keep the memory they free: building and compiling a large graph allocates and frees
// gigabytes, and glibc's defaults hand freed blocks back to the kernel (trimming the heap, unmapping large blocks),
// so each reuse faults in freshly zeroed pages again.
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#endif

#include <cstdlib>
#include <fstream>
#include <string>

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

/// Asks glibc to back the heap with transparent huge pages (its tunable glibc.malloc.hugetlb=1, glibc 2.35 and
/// later), which it reads when a process starts: where the tunable is not set, the program executes itself again
/// once with it added to GLIBC_TUNABLES, then goes on. A model's graph is some hundred bytes per vertex for hundreds
/// of thousands of vertices, built once; on a virtual machine a 4 KiB page fault costs about 10 us, and faulting that
/// memory in was half of the tool's startup (benchmarks/RESULTS.md, session 74). Nothing changes where the kernel
/// has transparent huge pages off, where GLIBC_TUNABLES already names the tunable, or with TILEBSP_HUGE_PAGES=0.
/// Returns whether the tunable is in effect. A process-wide choice, made by the programs, never by the library.
inline bool use_huge_pages([[maybe_unused]] char** argv) {
#if defined(__GLIBC__) && defined(__linux__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
  std::string const tunables = std::getenv("GLIBC_TUNABLES") ? std::getenv("GLIBC_TUNABLES") : "";
  if (tunables.find("glibc.malloc.hugetlb=1") != std::string::npos) return true;
  char const* const choice = std::getenv("TILEBSP_HUGE_PAGES");
  if ((choice && std::string(choice) == "0") || tunables.find("glibc.malloc.hugetlb") != std::string::npos) return false;
  std::string mode;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), mode);
  if (mode.empty() || mode.find("[never]") != std::string::npos) return false;
  std::string const with = tunables.empty() ? "glibc.malloc.hugetlb=1" : tunables + ":glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", with.c_str(), 1) != 0) return false;
  execv("/proc/self/exe", argv);  // returns only where it failed: go on as we are
  unsetenv("GLIBC_TUNABLES");
  if (!tunables.empty()) setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
#endif
  return false;
}

}  // namespace samples
