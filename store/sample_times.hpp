#pragma once

#include <string>

namespace tandem::store {

// Why a stored sample's times cannot be a request's (not finite, negative, or out of
// order: start ≤ first output ≤ finish, where a first output of 0 means none), or ""
// when they can. Such a sample (an edited or damaged store) is left out of every figure,
// and the report says so.
std::string ImplausibleTimes(double t_start, double t_first_output, double t_finish);

}  // namespace tandem::store
