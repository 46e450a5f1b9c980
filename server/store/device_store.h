// Durable device registry of tandem-coordinator (devices.db in its state
// directory): every enrolled or revoked device key and every redeemed
// enrollment token. Devices are shared by all tasks of the coordinator.
//
// What survives a restart (SIGKILL included): every committed call.
// Error codes: INVALID_ARGUMENT for bad arguments, ALREADY_EXISTS for a
// token redeemed by another device, DATA_LOSS for a stored row that no
// longer parses, UNAVAILABLE/INTERNAL from SQLite.
// Thread safety: all methods are thread-safe (one internal mutex).
#ifndef TANDEM_SERVER_STORE_DEVICE_STORE_H_
#define TANDEM_SERVER_STORE_DEVICE_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/sqlite/database.h"
#include "proto/coordinator.pb.h"

namespace tandem::server {

class DeviceStore {
 public:
  // Opens or creates `path` (WAL, synchronous=FULL), file mode 0600.
  static absl::StatusOr<std::unique_ptr<DeviceStore>> Open(const std::string& path);

  // Every device, ordered by device id (last_checkin_unix_ms is not stored).
  absl::StatusOr<std::vector<proto::DeviceRecord>> LoadDevices();
  // Inserts or replaces the device's row.
  absl::Status PutDevice(const proto::DeviceRecord& device);
  // One transaction: marks `token_id` redeemed by device.device_id() and
  // stores the device. OK (and nothing changes) when the token was already
  // redeemed by this device; ALREADY_EXISTS when by another.
  absl::Status RedeemToken(const std::string& token_id, const proto::DeviceRecord& device);

 private:
  explicit DeviceStore(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}
  absl::Status PutDeviceLocked(const proto::DeviceRecord& device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::unique_ptr<sqlite::Database> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_STORE_DEVICE_STORE_H_
