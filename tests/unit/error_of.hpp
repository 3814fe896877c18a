// The message of the fp8rl::Error that f throws ("" when it throws none): tests check that bad
// input is refused naming the problem.
#pragma once

#include <QString>

#include "core/error.hpp"

template <class F>
QString error_of(F&& f) {
  try {
    f();
  } catch (const fp8rl::Error& e) {
    return QString::fromStdString(e.message());
  }
  return {};
}
