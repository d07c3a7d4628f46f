#pragma once

#include <string>

namespace tandem::rt {

class Checkpoint;

// The checkpoint's identity: sha256 (hex) over config.json and then each weight
// file in name order, each fed as "<file name>\n<size in bytes>\n<contents>".
// The result is cached in <dir>/.tandem-revision.json and reused while every
// file's size and modification time are unchanged; a read-only directory just
// means it is recomputed each time.
std::string ModelRevision(const Checkpoint& checkpoint);

}  // namespace tandem::rt
