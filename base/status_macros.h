// Status propagation macros used at every tandem boundary.
//
//   TANDEM_RETURN_IF_ERROR(expr);            // expr yields absl::Status
//   TANDEM_ASSIGN_OR_RETURN(auto x, expr);   // expr yields absl::StatusOr<T>
//
// Both evaluate `expr` exactly once and return the error unchanged.
#ifndef TANDEM_BASE_STATUS_MACROS_H_
#define TANDEM_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TANDEM_STATUS_CONCAT_INNER_(a, b) a##b
#define TANDEM_STATUS_CONCAT_(a, b) TANDEM_STATUS_CONCAT_INNER_(a, b)

#define TANDEM_RETURN_IF_ERROR(expr)                                \
  do {                                                              \
    const ::absl::Status tandem_status_macro_value_ = (expr);       \
    if (!tandem_status_macro_value_.ok()) {                         \
      return tandem_status_macro_value_;                            \
    }                                                               \
  } while (false)

#define TANDEM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) {                                     \
    return std::move(statusor).status();                    \
  }                                                         \
  lhs = std::move(statusor).value()

#define TANDEM_ASSIGN_OR_RETURN(lhs, rexpr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL_(            \
      TANDEM_STATUS_CONCAT_(tandem_statusor_, __LINE__), lhs, rexpr)

#endif  // TANDEM_BASE_STATUS_MACROS_H_
