// libFuzzer target for the store's file readers (segments, write-ahead log, MANIFEST): a small
// valid store is built once; each input damages one of its files (overwrites it, or XORs bytes
// in at chosen offsets), then the store is opened with and without checksum verification,
// queried and closed, and RecoverStore runs over the damage. Every outcome must be a Status:
// never a crash, an out-of-bounds read or another sanitizer report.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "neardup/store.h"

namespace {

namespace fs = std::filesystem;

struct Template {
  fs::path dir;
  fs::path work;
  std::vector<std::string> files;  // names of the store's files (not LOCK)
};

Template* Build() {
  auto* t = new Template();
  // tmpfs when there is one: the store fsyncs, and fsync on a busy disk costs milliseconds.
  static std::string made;
  for (const char* parent : {"/dev/shm", "/tmp"}) {
    std::string path = std::string(parent) + "/neardup_store_fuzz_XXXXXX";
    if (::mkdtemp(path.data()) != nullptr) {
      made = path;
      break;
    }
  }
  if (made.empty()) std::abort();
  std::atexit([] { std::filesystem::remove_all(made); });
  const char* root = made.c_str();
  if (root == nullptr) std::abort();
  t->dir = fs::path(root) / "template";
  t->work = fs::path(root) / "work";
  neardup::StoreOptions options;
  options.rule = neardup::StoreRule::kSimHash;  // bare fingerprints
  options.sync_mode = neardup::SyncMode::kNone;
  auto store = neardup::DocumentStore::Open(t->dir.string(), options);
  if (!store.ok()) std::abort();
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto add = [&](int i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const std::string id = "doc-" + std::to_string(i);
    (void)(*store)->Add({id, neardup::Fingerprint::From64(x), R"({"i":1})"});
  };
  for (int i = 0; i < 300; ++i) add(i);
  (void)(*store)->Flush();  // a segment
  for (int i = 300; i < 340; ++i) add(i);
  (void)(*store)->Remove("doc-3");  // log records after the segment
  // Leave the log unflushed: destroy without Close() would flush; copy the directory instead.
  fs::copy(t->dir, t->dir.string() + ".open", fs::copy_options::recursive);
  (void)(*store)->Close();
  fs::remove_all(t->dir);
  fs::rename(t->dir.string() + ".open", t->dir);
  for (const auto& entry : fs::directory_iterator(t->dir)) {
    const std::string name = entry.path().filename().string();
    if (name != "LOCK") t->files.push_back(name);
  }
  std::sort(t->files.begin(), t->files.end());
  if (t->files.empty()) std::abort();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Template* t = Build();
  if (size < 2) return 0;
  fs::remove_all(t->work);
  fs::copy(t->dir, t->work, fs::copy_options::recursive);
  const fs::path target = t->work / t->files[data[0] % t->files.size()];
  const uint8_t mode = data[1];
  const uint8_t* rest = data + 2;
  const size_t rest_size = size - 2;
  if (mode & 1) {
    // Replace the file with the input.
    std::ofstream(target, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(rest), static_cast<std::streamsize>(rest_size));
  } else {
    // XOR bytes at offsets: pairs of (16-bit offset, byte).
    std::string bytes;
    {
      std::ifstream in(target, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (!bytes.empty()) {
      for (size_t i = 0; i + 2 < rest_size; i += 3) {
        const size_t offset = (size_t(rest[i]) << 8 | rest[i + 1]) % bytes.size();
        bytes[offset] = static_cast<char>(bytes[offset] ^ rest[i + 2]);
      }
      if (mode & 4) bytes.resize(bytes.size() * (rest_size % 7) / 7);  // and truncate
      std::ofstream(target, std::ios::binary | std::ios::trunc)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
  }
  neardup::StoreOptions options;
  options.rule = neardup::StoreRule::kSimHash;  // bare fingerprints
  options.create_if_missing = false;
  options.sync_mode = neardup::SyncMode::kNone;
  options.compaction_trigger = 0;
  options.verify_checksums_on_open = (mode & 2) == 0;
  {
    auto store = neardup::DocumentStore::Open(t->work.string(), options);
    if (store.ok()) {
      uint64_t q = 0;
      for (size_t i = 0; i < rest_size && i < 8; ++i) q = q << 8 | rest[i];
      for (int k : {0, 3, 5, 64}) (void)(*store)->Search(neardup::Fingerprint::From64(q), k, 50);
      (void)(*store)->Get("doc-1");
      (void)(*store)->Get("doc-320");
      (void)(*store)->Stats();
      (void)(*store)->Close();
    }
  }
  if (mode & 8) (void)neardup::RecoverStore(t->work.string());
  return 0;
}
