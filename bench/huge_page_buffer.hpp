#pragma once

#include <cstddef>
#include <memory>

namespace tandem::bench {

// `bytes` of zeroed memory on 2 MiB pages where the kernel gives them
// (madvise(MADV_HUGEPAGE); 4 KiB pages otherwise). Decode reads weights from a
// file mapping that Linux maps with 2 MiB pages when the page cache holds large
// folios (ext4 on recent kernels), and on this VM 4 KiB pages read 128 KiB
// chunks ~15% and long streams ~10% slower: a benchmark buffer on small pages
// would understate what the hardware reads. Throws std::bad_alloc.
std::shared_ptr<void> HugePageBuffer(std::size_t bytes);

}  // namespace tandem::bench
