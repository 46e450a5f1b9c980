#include "server/store/device_store.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::server {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS devices (
  device_id TEXT PRIMARY KEY, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS redeemed_tokens (
  token_id BLOB PRIMARY KEY, device_id TEXT NOT NULL);
)sql";

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceStore>> DeviceStore::Open(const std::string& path) {
  sqlite::DatabaseOptions options;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::Database> db,
                          sqlite::Database::Open(path, options));
  TANDEM_RETURN_IF_ERROR(db->Exec(kSchema));
  // Device keys are public, but who is enrolled is the operator's business.
  ::chmod(path.c_str(), 0600);
  return std::unique_ptr<DeviceStore>(new DeviceStore(std::move(db)));
}

absl::StatusOr<std::vector<proto::DeviceRecord>> DeviceStore::LoadDevices() {
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement st,
                          db_->Prepare("SELECT record FROM devices ORDER BY device_id"));
  std::vector<proto::DeviceRecord> out;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    proto::DeviceRecord d;
    if (!d.ParseFromString(st.ColumnBlob(0))) {
      return absl::DataLossError("a stored device record does not parse");
    }
    out.push_back(std::move(d));
  }
  return out;
}

absl::Status DeviceStore::PutDeviceLocked(const proto::DeviceRecord& device) {
  if (device.device_id().empty()) return absl::InvalidArgumentError("device_id is empty");
  proto::DeviceRecord stored = device;
  stored.clear_last_checkin_unix_ms();
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_->Prepare("INSERT OR REPLACE INTO devices (device_id, record) VALUES (?1, ?2)"));
  TANDEM_RETURN_IF_ERROR(st.BindText(1, stored.device_id()));
  TANDEM_RETURN_IF_ERROR(st.BindBlob(2, stored.SerializeAsString()));
  return st.StepDone();
}

absl::Status DeviceStore::PutDevice(const proto::DeviceRecord& device) {
  absl::MutexLock lock(&mu_);
  return PutDeviceLocked(device);
}

absl::Status DeviceStore::RedeemToken(const std::string& token_id,
                                      const proto::DeviceRecord& device) {
  if (token_id.empty()) return absl::InvalidArgumentError("token_id is empty");
  absl::MutexLock lock(&mu_);
  TANDEM_ASSIGN_OR_RETURN(sqlite::Transaction tx, sqlite::Transaction::Begin(db_.get()));
  TANDEM_ASSIGN_OR_RETURN(sqlite::Statement q,
                          db_->Prepare("SELECT device_id FROM redeemed_tokens WHERE token_id=?1"));
  TANDEM_RETURN_IF_ERROR(q.BindBlob(1, token_id));
  TANDEM_ASSIGN_OR_RETURN(bool row, q.Step());
  if (row) {
    if (q.ColumnText(0) == device.device_id()) return absl::OkStatus();
    return absl::AlreadyExistsError("this enrollment token was already redeemed by another device");
  }
  TANDEM_ASSIGN_OR_RETURN(
      sqlite::Statement st,
      db_->Prepare("INSERT INTO redeemed_tokens (token_id, device_id) VALUES (?1, ?2)"));
  TANDEM_RETURN_IF_ERROR(st.BindBlob(1, token_id));
  TANDEM_RETURN_IF_ERROR(st.BindText(2, device.device_id()));
  TANDEM_RETURN_IF_ERROR(st.StepDone());
  TANDEM_RETURN_IF_ERROR(PutDeviceLocked(device));
  return tx.Commit();
}

}  // namespace tandem::server
