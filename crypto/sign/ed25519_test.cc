#include "crypto/sign/ed25519.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/random.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::crypto {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Hex(absl::string_view hex) { return absl::HexStringToBytes(hex); }

// RFC 8032 section 7.1, TEST 1 to TEST 3.
struct Rfc8032Vector {
  const char* name;
  const char* secret_key;
  const char* public_key;
  const char* message;
  const char* signature;
};
const Rfc8032Vector kRfc8032Vectors[] = {
    {"TEST 1", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
     "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
    {"TEST 2", "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
     "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"TEST 3", "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
     "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
};

TEST(Ed25519Test, Rfc8032KnownAnswers) {
  for (const Rfc8032Vector& v : kRfc8032Vectors) {
    SCOPED_TRACE(v.name);
    auto key = Ed25519SigningKey::FromSeed(Hex(v.secret_key));
    ASSERT_THAT(key, IsOk());
    EXPECT_EQ(absl::BytesToHexString(key->PublicKeyRaw()), v.public_key);
    auto sig = key->Sign(Hex(v.message));
    ASSERT_THAT(sig, IsOk());
    EXPECT_EQ(absl::BytesToHexString(*sig), v.signature);

    auto pub = Ed25519VerifyingKey::FromRaw(Hex(v.public_key));
    ASSERT_THAT(pub, IsOk());
    EXPECT_EQ(pub->Raw(), Hex(v.public_key));
    EXPECT_THAT(pub->Verify(Hex(v.message), Hex(v.signature)), IsOk());
    EXPECT_THAT(pub->Verify(Hex(v.message) + "x", Hex(v.signature)),
                StatusIs(absl::StatusCode::kUnauthenticated));
  }
}

// The PEM encodings of TEST 1's key, built from their DER by hand:
// PKCS#8 = 302e020100300506032b657004220420 || seed,
// SubjectPublicKeyInfo = 302a300506032b6570032100 || public key.
std::string Pem(absl::string_view label, absl::string_view der_hex) {
  return absl::StrCat("-----BEGIN ", label, "-----\n", absl::Base64Escape(Hex(der_hex)),
                      "\n-----END ", label, "-----\n");
}

TEST(Ed25519Test, PemEncodingsMatchTheStandardDer) {
  const Rfc8032Vector& v = kRfc8032Vectors[0];
  auto key = Ed25519SigningKey::FromSeed(Hex(v.secret_key));
  ASSERT_THAT(key, IsOk());
  const std::string private_pem =
      Pem("PRIVATE KEY", absl::StrCat("302e020100300506032b657004220420", v.secret_key));
  const std::string public_pem =
      Pem("PUBLIC KEY", absl::StrCat("302a300506032b6570032100", v.public_key));
  auto written_private = key->PrivateKeyPem();
  auto written_public = key->PublicKeyPem();
  ASSERT_THAT(written_private, IsOk());
  ASSERT_THAT(written_public, IsOk());
  EXPECT_EQ(*written_private, private_pem);
  EXPECT_EQ(*written_public, public_pem);

  auto from_private = Ed25519SigningKey::FromPem(private_pem);
  ASSERT_THAT(from_private, IsOk());
  EXPECT_EQ(from_private->PublicKeyRaw(), Hex(v.public_key));
  auto from_public = Ed25519VerifyingKey::FromPem(public_pem);
  ASSERT_THAT(from_public, IsOk());
  EXPECT_EQ(from_public->Raw(), Hex(v.public_key));
  EXPECT_THAT(from_public->Pem(), ::tandem::testing::IsOkAndHolds(public_pem));
}

TEST(Ed25519Test, PemRoundTripOfGeneratedKeys) {
  auto rng = DeterministicRandom::FromSeed(7);
  for (int i = 0; i < 8; ++i) {
    auto key = Ed25519SigningKey::Generate(rng.get());
    ASSERT_THAT(key, IsOk());
    auto private_pem = key->PrivateKeyPem();
    auto public_pem = key->PublicKeyPem();
    ASSERT_THAT(private_pem, IsOk());
    ASSERT_THAT(public_pem, IsOk());
    EXPECT_THAT(*private_pem, StartsWith("-----BEGIN PRIVATE KEY-----\n"));
    EXPECT_THAT(*public_pem, StartsWith("-----BEGIN PUBLIC KEY-----\n"));

    auto reloaded = Ed25519SigningKey::FromPem(*private_pem);
    ASSERT_THAT(reloaded, IsOk());
    EXPECT_EQ(reloaded->PublicKeyRaw(), key->PublicKeyRaw());
    auto pub = Ed25519VerifyingKey::FromPem(*public_pem);
    ASSERT_THAT(pub, IsOk());
    EXPECT_EQ(pub->Raw(), key->PublicKeyRaw());

    const std::string msg = absl::StrCat("message ", i);
    auto sig = reloaded->Sign(msg);
    ASSERT_THAT(sig, IsOk());
    EXPECT_EQ(*sig, *key->Sign(msg));  // deterministic signatures, same key
    EXPECT_THAT(pub->Verify(msg, *sig), IsOk());
  }
}

TEST(Ed25519Test, GenerateIsDrivenByTheRandomSource) {
  auto a = DeterministicRandom::FromSeed(1);
  auto b = DeterministicRandom::FromSeed(1);
  auto c = DeterministicRandom::FromSeed(2);
  auto ka = Ed25519SigningKey::Generate(a.get());
  auto kb = Ed25519SigningKey::Generate(b.get());
  auto kc = Ed25519SigningKey::Generate(c.get());
  ASSERT_THAT(ka, IsOk());
  ASSERT_THAT(kb, IsOk());
  ASSERT_THAT(kc, IsOk());
  EXPECT_EQ(ka->PublicKeyRaw(), kb->PublicKeyRaw());
  EXPECT_NE(ka->PublicKeyRaw(), kc->PublicKeyRaw());
  auto real = Ed25519SigningKey::Generate(OpenSslRandom::Default());
  ASSERT_THAT(real, IsOk());
  EXPECT_EQ(real->PublicKeyRaw().size(), kEd25519PublicKeySize);
}

class FailingRandom : public SecureRandom {
 public:
  absl::Status Fill(absl::Span<uint8_t>) override { return absl::InternalError("rng broke"); }
};

TEST(Ed25519Test, GenerateRefusesNullAndPropagatesRandomFailure) {
  EXPECT_THAT(Ed25519SigningKey::Generate(nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  FailingRandom failing;
  EXPECT_THAT(Ed25519SigningKey::Generate(&failing),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("rng broke")));
}

TEST(Ed25519Test, MalformedKeysAreInvalidArgument) {
  const std::string pk = Hex(kRfc8032Vectors[0].public_key);
  EXPECT_THAT(Ed25519SigningKey::FromSeed(std::string(31, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Ed25519SigningKey::FromSeed(std::string(33, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Ed25519SigningKey::FromSeed(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Ed25519VerifyingKey::FromRaw(pk.substr(0, 31)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Ed25519VerifyingKey::FromRaw(pk + "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Ed25519VerifyingKey::FromRaw(""), StatusIs(absl::StatusCode::kInvalidArgument));
  for (absl::string_view pem :
       {"", "garbage", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}) {
    EXPECT_THAT(Ed25519SigningKey::FromPem(pem), StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(Ed25519VerifyingKey::FromPem(pem), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  // A key of one kind given to the other loader.
  auto key = Ed25519SigningKey::FromSeed(Hex(kRfc8032Vectors[0].secret_key));
  ASSERT_THAT(key, IsOk());
  EXPECT_THAT(Ed25519SigningKey::FromPem(*key->PublicKeyPem()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Ed25519VerifyingKey::FromPem(*key->PrivateKeyPem()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Encodings that are not acceptable public keys (y little-endian, bit 255 =
// sign of x). The small-order points are the 8 torsion points of
// edwards25519; with such a key, R = [S]B forges a signature on any message.
TEST(Ed25519Test, NonPointsNonCanonicalAndSmallOrderKeysAreRefused) {
  struct Case {
    const char* hex;
    const char* why;
  };
  const Case cases[] = {
      {"0200000000000000000000000000000000000000000000000000000000000000", "not a point"},
      {"0700000000000000000000000000000000000000000000000000000000000000", "not a point"},
      {"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", "canonical"},
      {"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", "canonical"},
      {"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", "canonical"},
      {"0100000000000000000000000000000000000000000000000000000000000000", "small order"},
      {"0100000000000000000000000000000000000000000000000000000000000080", "sign bit"},
      {"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", "small order"},
      {"0000000000000000000000000000000000000000000000000000000000000000", "small order"},
      {"0000000000000000000000000000000000000000000000000000000000000080", "small order"},
      {"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", "small order"},
      {"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85", "small order"},
      {"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", "small order"},
      {"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", "small order"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.hex);
    EXPECT_THAT(Ed25519VerifyingKey::FromRaw(Hex(c.hex)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.why)));
  }
  // Valid points nearby are accepted: y = 3 (x^2 is a square), the base point.
  EXPECT_THAT(Ed25519VerifyingKey::FromRaw(
                  Hex("0300000000000000000000000000000000000000000000000000000000000000")),
              IsOk());
  EXPECT_THAT(Ed25519VerifyingKey::FromRaw(
                  Hex("5866666666666666666666666666666666666666666666666666666666666666")),
              IsOk());
}

TEST(Ed25519Test, SignaturesOfWrongLengthAreUnauthenticated) {
  const Rfc8032Vector& v = kRfc8032Vectors[1];
  auto pub = Ed25519VerifyingKey::FromRaw(Hex(v.public_key));
  ASSERT_THAT(pub, IsOk());
  const std::string sig = Hex(v.signature);
  const std::string msg = Hex(v.message);
  EXPECT_THAT(pub->Verify(msg, ""), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(pub->Verify(msg, sig.substr(0, 63)),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("64 bytes")));
  EXPECT_THAT(pub->Verify(msg, sig + std::string(1, '\0')),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("64 bytes")));
  EXPECT_THAT(pub->Verify(msg, sig.substr(0, 32)), StatusIs(absl::StatusCode::kUnauthenticated));
}

// S' = S + L (L = 2^252 + 27742317777372353535851937790883648493) satisfies
// the verification equation too; RFC 8032 requires refusing S >= L.
TEST(Ed25519Test, MalleatedScalarIsRefused) {
  const Rfc8032Vector& v = kRfc8032Vectors[2];
  auto pub = Ed25519VerifyingKey::FromRaw(Hex(v.public_key));
  ASSERT_THAT(pub, IsOk());
  std::string sig = Hex(v.signature);
  const std::string l = Hex("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010");
  unsigned carry = 0;
  for (int i = 0; i < 32; ++i) {
    const unsigned sum = static_cast<uint8_t>(sig[32 + i]) + static_cast<uint8_t>(l[i]) + carry;
    sig[32 + i] = static_cast<char>(sum & 0xff);
    carry = sum >> 8;
  }
  ASSERT_EQ(carry, 0u);
  EXPECT_THAT(pub->Verify(Hex(v.message), sig), StatusIs(absl::StatusCode::kUnauthenticated));
}

std::string RandomBytes(SecureRandom* rng, size_t n) {
  std::string out(n, '\0');
  EXPECT_THAT(rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(out.data()), n)), IsOk());
  return out;
}

TEST(Ed25519Test, RandomMessagesSignAndVerifyAndEveryBitFlipFails) {
  auto rng = DeterministicRandom::FromSeed(42);
  auto key = Ed25519SigningKey::Generate(rng.get());
  auto other = Ed25519SigningKey::Generate(rng.get());
  ASSERT_THAT(key, IsOk());
  ASSERT_THAT(other, IsOk());
  auto pub = key->VerifyingKey();
  auto other_pub = other->VerifyingKey();
  ASSERT_THAT(pub, IsOk());
  ASSERT_THAT(other_pub, IsOk());
  for (size_t len : {size_t{0}, size_t{1}, size_t{2}, size_t{31}, size_t{64}, size_t{200}}) {
    SCOPED_TRACE(len);
    const std::string msg = RandomBytes(rng.get(), len);
    auto sig = key->Sign(msg);
    ASSERT_THAT(sig, IsOk());
    ASSERT_EQ(sig->size(), kEd25519SignatureSize);
    EXPECT_THAT(pub->Verify(msg, *sig), IsOk());
    EXPECT_THAT(other_pub->Verify(msg, *sig), StatusIs(absl::StatusCode::kUnauthenticated));
    for (size_t bit = 0; bit < 8 * sig->size(); ++bit) {
      std::string bad = *sig;
      bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
      ASSERT_THAT(pub->Verify(msg, bad), StatusIs(absl::StatusCode::kUnauthenticated))
          << "signature bit " << bit;
    }
    for (size_t bit = 0; bit < 8 * msg.size(); ++bit) {
      std::string bad = msg;
      bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
      ASSERT_THAT(pub->Verify(bad, *sig), StatusIs(absl::StatusCode::kUnauthenticated))
          << "message bit " << bit;
    }
    EXPECT_THAT(pub->Verify(msg + '\0', *sig), StatusIs(absl::StatusCode::kUnauthenticated));
  }
}

TEST(Ed25519Test, CopiesShareTheKeyAndMovedFromKeysFailClosed) {
  auto rng = DeterministicRandom::FromSeed(3);
  auto made = Ed25519SigningKey::Generate(rng.get());
  ASSERT_THAT(made, IsOk());
  Ed25519SigningKey copy = *made;
  auto pub = made->VerifyingKey();
  ASSERT_THAT(pub, IsOk());
  Ed25519VerifyingKey pub_copy = *pub;
  made = absl::InternalError("dropped");  // destroys the original key objects
  pub = absl::InternalError("dropped");
  auto sig = copy.Sign("hello");
  ASSERT_THAT(sig, IsOk());
  EXPECT_THAT(pub_copy.Verify("hello", *sig), IsOk());

  Ed25519SigningKey moved = std::move(copy);
  Ed25519VerifyingKey moved_pub = std::move(pub_copy);
  EXPECT_THAT(moved_pub.Verify("hello", *sig), IsOk());
  // NOLINTBEGIN(bugprone-use-after-move): the moved-from state is under test.
  EXPECT_THAT(copy.Sign("hello"), StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(copy.PrivateKeyPem(), StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(pub_copy.Verify("hello", *sig), StatusIs(absl::StatusCode::kUnauthenticated));
  // NOLINTEND(bugprone-use-after-move)
  copy = moved;  // assignment revives a moved-from key
  EXPECT_THAT(copy.Sign("hello"), ::tandem::testing::IsOkAndHolds(*sig));
}

// --- Interoperability with the openssl command line (keys as deployed). ---

class Ed25519OpenSslCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("openssl version > /dev/null 2>&1") != 0) {
      GTEST_SKIP() << "openssl CLI not installed";
    }
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("ed25519_cli_", ::testing::UnitTest::GetInstance()->random_seed(), "_",
                        reinterpret_cast<uintptr_t>(this));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  std::string Path(const char* name) const { return (dir_ / name).string(); }
  static int Run(const std::string& cmd) {
    return std::system(absl::StrCat(cmd, " > /dev/null 2>&1").c_str());
  }
  static std::string ReadFile(const std::string& path) {
    std::string out;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
      std::fclose(f);
    }
    return out;
  }
  static void WriteFile(const std::string& path, absl::string_view data) {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
    std::fclose(f);
  }
  std::filesystem::path dir_;
};

TEST_F(Ed25519OpenSslCliTest, GeneratedKeysLoadAndSignaturesInteroperate) {
  const std::string key_path = Path("ticket.key");
  const std::string pub_path = Path("ticket.pub");
  ASSERT_EQ(Run(absl::StrCat("openssl genpkey -algorithm ed25519 -out ", key_path)), 0);
  ASSERT_EQ(Run(absl::StrCat("openssl pkey -in ", key_path, " -pubout -out ", pub_path)), 0);
  auto key = Ed25519SigningKey::FromPem(ReadFile(key_path));
  ASSERT_THAT(key, IsOk());
  auto pub = Ed25519VerifyingKey::FromPem(ReadFile(pub_path));
  ASSERT_THAT(pub, IsOk());
  EXPECT_EQ(pub->Raw(), key->PublicKeyRaw());
  EXPECT_THAT(key->PublicKeyPem(), ::tandem::testing::IsOkAndHolds(ReadFile(pub_path)));

  // Ours -> openssl.
  const std::string msg = "tandem interop message";
  auto sig = key->Sign(msg);
  ASSERT_THAT(sig, IsOk());
  EXPECT_THAT(pub->Verify(msg, *sig), IsOk());
  WriteFile(Path("msg"), msg);
  WriteFile(Path("sig"), *sig);
  EXPECT_EQ(Run(absl::StrCat("openssl pkeyutl -verify -pubin -inkey ", pub_path, " -rawin -in ",
                             Path("msg"), " -sigfile ", Path("sig"))),
            0);
  WriteFile(Path("bad"), msg + "!");
  EXPECT_NE(Run(absl::StrCat("openssl pkeyutl -verify -pubin -inkey ", pub_path, " -rawin -in ",
                             Path("bad"), " -sigfile ", Path("sig"))),
            0);

  // openssl -> ours.
  ASSERT_EQ(Run(absl::StrCat("openssl pkeyutl -sign -inkey ", key_path, " -rawin -in ", Path("msg"),
                             " -out ", Path("cli.sig"))),
            0);
  const std::string cli_sig = ReadFile(Path("cli.sig"));
  EXPECT_EQ(cli_sig, *sig);  // Ed25519 is deterministic
  EXPECT_THAT(pub->Verify(msg, cli_sig), IsOk());
  EXPECT_THAT(pub->Verify(msg + "!", cli_sig), StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST_F(Ed25519OpenSslCliTest, OtherKeyTypesAndEncryptedPemsAreRefused) {
  ASSERT_EQ(Run(absl::StrCat("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ",
                             Path("ec.key"))),
            0);
  ASSERT_EQ(
      Run(absl::StrCat("openssl pkey -in ", Path("ec.key"), " -pubout -out ", Path("ec.pub"))), 0);
  ASSERT_EQ(Run(absl::StrCat("openssl genpkey -algorithm ed448 -out ", Path("ed448.key"))), 0);
  ASSERT_EQ(Run(absl::StrCat("openssl genpkey -algorithm ed25519 -aes-128-cbc -pass pass:secret",
                             " -out ", Path("enc.key"))),
            0);
  EXPECT_THAT(Ed25519SigningKey::FromPem(ReadFile(Path("ec.key"))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not Ed25519")));
  EXPECT_THAT(Ed25519VerifyingKey::FromPem(ReadFile(Path("ec.pub"))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not Ed25519")));
  EXPECT_THAT(Ed25519SigningKey::FromPem(ReadFile(Path("ed448.key"))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not Ed25519")));
  const std::string encrypted = ReadFile(Path("enc.key"));
  ASSERT_THAT(encrypted, HasSubstr("ENCRYPTED PRIVATE KEY"));
  EXPECT_THAT(Ed25519SigningKey::FromPem(encrypted), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::crypto
