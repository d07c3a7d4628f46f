// Allowed: the kernels. Not allowed: a folder the rules do not name.
#include "runtime/kernels/matmul.hpp"
#include "runtime/serve/scheduler.hpp"
