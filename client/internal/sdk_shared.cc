// libtandem_client.so.0 (client/CMakeLists.txt): its code is the whole of the
// tandem_client and tandem_client_transport archives and what they use of
// the other tandem libraries; this translation unit only gives the shared
// library target a source of its own (CMake needs one). What it exports is
// client/tandem_client.map.
namespace tandem::client {
namespace {
[[maybe_unused]] constexpr int kSharedSdkAbiVersion = 0;  // the SONAME's number
}  // namespace
}  // namespace tandem::client
