// Allowed: its own folder and runtime/numeric. Not allowed: the engine, the tests.
#include "runtime/kernels/matmul.hpp"

#include "httplib.h"
#include "runtime/engine/engine.hpp"
#include "runtime/numeric/dtype.hpp"
#include "tests/support/run_command.hpp"
