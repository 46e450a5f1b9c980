#include "ml/data/text_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tandem::ml {
namespace {

struct Folder {
  const char* name;
  int label;
};
constexpr Folder kFolders[] = {{"easy-ham-1", 0}, {"easy-ham-2", 0}, {"hard-ham-1", 0},
                               {"spam-1", 1},     {"spam-2", 1}};

uint64_t Fnv1a(absl::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

std::vector<int64_t> TokenizeEmail(absl::string_view raw, const TextOptions& options) {
  // Subject line + body (everything after the first empty line).
  std::string text;
  // The header line "Subject:" (first line or after a newline).
  size_t subject = absl::StartsWith(raw, "Subject:") ? 0 : raw.find("\nSubject:");
  if (subject != absl::string_view::npos) {
    if (raw[subject] == '\n') ++subject;
    const size_t eol = raw.find('\n', subject);
    const absl::string_view line = raw.substr(
        subject + 8, eol == absl::string_view::npos ? absl::string_view::npos : eol - subject - 8);
    text.append(line.data(), line.size());
    text.push_back(' ');
  }
  const size_t body = raw.find("\n\n");
  if (body != absl::string_view::npos) {
    const absl::string_view rest = raw.substr(body + 2);
    text.append(rest.data(), rest.size());
  }

  std::vector<int64_t> ids;
  absl::flat_hash_set<int64_t> seen;
  std::string token;
  auto flush = [&] {
    if (token.size() >= 2 && token.size() <= 32) {
      const int64_t id = static_cast<int64_t>(Fnv1a(token) % static_cast<uint64_t>(options.vocab));
      if (seen.insert(id).second) ids.push_back(id);
    }
    token.clear();
  };
  for (char c : text) {
    if (static_cast<int64_t>(ids.size()) >= options.bag_size) break;
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      token.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
    } else {
      flush();
    }
  }
  if (static_cast<int64_t>(ids.size()) < options.bag_size) flush();
  if (static_cast<int64_t>(ids.size()) > options.bag_size) ids.resize(options.bag_size);
  return ids;
}

absl::StatusOr<Dataset> LoadSpamAssassin(const std::string& dir, const TextOptions& options) {
  if (options.vocab < 2 || options.bag_size < 1 || options.max_per_group < 0) {
    return absl::InvalidArgumentError("vocab >= 2, bag_size >= 1 and max_per_group >= 0 required");
  }
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, int>> files;  // path, folder index
  for (int f = 0; f < 5; ++f) {
    const fs::path folder = fs::path(dir) / kFolders[f].name;
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
      return absl::NotFoundError(absl::StrCat("SpamAssassin folder ", folder.string(),
                                              " not found: run deploy/install-deps.sh"));
    }
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
      if (e.path().extension() == ".txt") names.push_back(e.path().string());
    }
    std::sort(names.begin(), names.end());
    if (options.max_per_group > 0 && static_cast<int64_t>(names.size()) > options.max_per_group) {
      names.resize(static_cast<size_t>(options.max_per_group));
    }
    for (std::string& n : names) files.emplace_back(std::move(n), f);
  }
  Dataset d;
  d.num_classes = 2;
  d.shape = {1, 1, options.bag_size};
  d.features = Matrix::Constant(static_cast<Eigen::Index>(files.size()), options.bag_size, -1.0f);
  d.labels.reserve(files.size());
  d.groups.reserve(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    std::ifstream in(files[i].first, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", files[i].first));
    std::stringstream buf;
    buf << in.rdbuf();
    const std::vector<int64_t> ids = TokenizeEmail(buf.str(), options);
    for (size_t j = 0; j < ids.size(); ++j) {
      d.features(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) =
          static_cast<float>(ids[j]);  // exact: vocab < 2^24
    }
    d.labels.push_back(kFolders[files[i].second].label);
    d.groups.push_back(files[i].second);
  }
  return d;
}

}  // namespace tandem::ml
