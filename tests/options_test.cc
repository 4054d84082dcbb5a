// Tests of the option registry (neardup/options.h): its defaults are the structs' defaults, values
// are checked and named as the user spelled them, the fingerprint-options string keeps its form,
// and a store's recorded options are validated.
#include "neardup/options.h"

#include <gtest/gtest.h>

#include "neardup/server.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace neardup {
namespace {

TEST(OptionRegistryTest, NamesAreUniqueAndDefaultsAreTheStructsDefaults) {
  std::set<std::string> names;
  for (const OptionSpec& spec : AllOptions()) {
    EXPECT_TRUE(names.insert(spec.key).second) << spec.key;
    EXPECT_EQ(FindOption(spec.key), &spec);
    if (spec.flag != nullptr) {
      EXPECT_EQ(FindFlag(spec.flag), &spec) << spec.flag;
      if (std::string(spec.flag) != spec.key) {
        EXPECT_TRUE(names.insert(spec.flag).second);
      }
    }
    EXPECT_NE(spec.help, nullptr);
    EXPECT_TRUE(spec.type != OptionType::kChoice || spec.choices != nullptr) << spec.key;
  }
  // A default the command line shows is what the library does when the option is not given.
  const DedupOptions defaults;
  StoreOptions store_defaults;
  for (const OptionSpec& spec : AllOptions()) {
    if (spec.default_text == nullptr || spec.flag == nullptr) continue;
    const std::string shown = spec.default_text;
    if (shown == "auto" || shown == "threshold") continue;  // derived from other options
    SCOPED_TRACE(spec.key);
    OptionValues values;
    ASSERT_TRUE(values.SetText(spec.flag, shown).ok());
    if (spec.scope & kServerScope) continue;  // ServerDefaultsAreTheRegistrysAndEachIsApplied
    if (spec.scope & kStoreScope) {
      StoreOptions set;
      // The window of group commit means something with --sync group only.
      if (values.Has("group_commit_ms")) {
        ASSERT_TRUE(values.SetText("sync", "group").ok());
      }
      ASSERT_TRUE(values.ApplyTo(&set).ok());
      EXPECT_EQ(set.sync_mode,
                values.Has("group_commit_ms") ? SyncMode::kGroupCommit : store_defaults.sync_mode);
      EXPECT_EQ(set.group_commit_interval_ms, store_defaults.group_commit_interval_ms);
      EXPECT_EQ(set.verify_checksums_on_open, store_defaults.verify_checksums_on_open);
      EXPECT_EQ(set.indexed_k, values.Has("indexed_k") ? std::optional<int>(3) : std::nullopt);
      EXPECT_EQ(set.memtable_limit, store_defaults.memtable_limit);
      EXPECT_EQ(set.wal_flush_bytes, store_defaults.wal_flush_bytes);
      EXPECT_EQ(set.expected_size, store_defaults.expected_size);
      EXPECT_EQ(set.memory_budget.ToString(), store_defaults.memory_budget.ToString());
      continue;
    }
    DedupOptions set;
    ASSERT_TRUE(values.ApplyTo(&set).ok());
    EXPECT_EQ(FingerprintOptionsToString(set.fingerprint),
              FingerprintOptionsToString(defaults.fingerprint));
    EXPECT_EQ(set.k, defaults.k);
    EXPECT_EQ(set.lsh.threshold, defaults.lsh.threshold);
    EXPECT_EQ(set.lsh.bucket_window, defaults.lsh.bucket_window);
    EXPECT_EQ(set.candidates, defaults.candidates);
    EXPECT_EQ(set.keep, defaults.keep);
    EXPECT_EQ(set.threads, defaults.threads);
    EXPECT_EQ(set.reader.id_field, defaults.reader.id_field);
    EXPECT_EQ(set.reader.text_field, defaults.reader.text_field);
    EXPECT_EQ(set.containment_threshold, defaults.containment_threshold);
    EXPECT_EQ(set.containment_min_shingles, defaults.containment_min_shingles);
    EXPECT_EQ(set.containment_min_ratio, defaults.containment_min_ratio);
    EXPECT_EQ(set.boilerplate_options.min_documents, defaults.boilerplate_options.min_documents);
  }
}

TEST(OptionRegistryTest, ValuesAreCheckedAndNamedAsGiven) {
  OptionValues keywords(OptionNaming::kKeyword), flags(OptionNaming::kFlag);
  EXPECT_EQ(keywords.Set("shingle", int64_t{0}).message(), "shingle must be in [1, 16], got 0");
  EXPECT_EQ(flags.SetText("shingle", "0").message(), "--shingle must be in [1, 16], got 0");
  EXPECT_EQ(flags.SetText("shingle", "two").message(),
            "--shingle: expected a whole number, got \"two\"");
  EXPECT_EQ(keywords.Set("shingle", std::string("2")).message(),
            "shingle: expected a whole number");
  EXPECT_EQ(keywords.Set("tokenizer", std::string("words")).message(),
            "tokenizer: expected one of auto,jieba,icu,char, got \"words\"");
  EXPECT_EQ(keywords.Set("bits", int64_t{96}).message(), "bits must be one of 64,128, got 96");
  EXPECT_EQ(keywords.Set("colour", true).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(keywords.Set("threads", int64_t{-1}).message(),
            "threads must be 0 (all cores) to 65536, got -1");
  // Keys that are no flag are not user options, but a negated switch's key is, in its own sense.
  EXPECT_FALSE(keywords.Set("sublinear_tf", false).ok());
  OptionValues positive;
  ASSERT_TRUE(positive.Set("nfkc", false).ok());
  ASSERT_TRUE(positive.Set("boilerplate", true).ok());
  DedupOptions set;
  ASSERT_TRUE(positive.ApplyTo(&set).ok());
  EXPECT_FALSE(set.fingerprint.normalize.nfkc);
  EXPECT_TRUE(set.boilerplate);
  // A command-line-only negation ("!no_boilerplate") is no keyword.
  EXPECT_EQ(FindFlag("no_boilerplate"), nullptr);
  // The old spelling works and errors use it.
  EXPECT_EQ(keywords.Set("verify", 2.0).message(), "verify must be in [0, 1], got 2");
  ASSERT_TRUE(flags.SetText("max_distance", "9").ok());
  DedupOptions options;
  EXPECT_EQ(flags.ApplyTo(&options).message(),
            "--max-distance must be in [0, 8] for 64-bit fingerprints");
  // A negated switch turns its key off.
  OptionValues switches;
  ASSERT_TRUE(switches.Set("no_nfkc", true).ok());
  ASSERT_TRUE(switches.Set("keep_markup", true).ok());
  FingerprintOptions fingerprint;
  ASSERT_TRUE(switches.ApplyTo(&fingerprint).ok());
  EXPECT_FALSE(fingerprint.normalize.nfkc);
  EXPECT_FALSE(fingerprint.normalize.strip_markup);
  EXPECT_TRUE(fingerprint.normalize.case_fold);
  auto in_force = FingerprintOptionsInForce(fingerprint);
  EXPECT_EQ(std::get<bool>(in_force.at("no_nfkc")), true);
  EXPECT_EQ(std::get<bool>(in_force.at("no_casefold")), false);
  EXPECT_EQ(std::get<int64_t>(in_force.at("shingle")), 2);
  EXPECT_EQ(std::get<std::string>(in_force.at("tokenizer")), "auto");
}

TEST(OptionRegistryTest, ProfilesAndCrossChecks) {
  OptionValues yanyiwu;
  ASSERT_TRUE(yanyiwu.Set("profile", std::string("yanyiwu")).ok());
  ASSERT_TRUE(yanyiwu.Set("top_k", int64_t{7}).ok());
  FingerprintOptions options;
  ASSERT_TRUE(yanyiwu.ApplyTo(&options).ok());
  FingerprintOptions expected = YanyiwuSimhashOptions(7);
  EXPECT_EQ(FingerprintOptionsToString(options), FingerprintOptionsToString(expected));
  ASSERT_TRUE(yanyiwu.Set("tokenizer", std::string("icu")).ok());
  EXPECT_EQ(yanyiwu.ApplyTo(&options).message(), "tokenizer: not an option of the yanyiwu profile");

  OptionValues dedup(OptionNaming::kFlag);
  ASSERT_TRUE(dedup.SetText("bands", "5").ok());
  DedupOptions d;
  EXPECT_EQ(dedup.ApplyTo(&d).message(),
            "--bands and --rows must be given together, bands in [1, 1024] and rows in [1, 64]");
  ASSERT_TRUE(dedup.SetText("rows", "2").ok());
  ASSERT_TRUE(dedup.SetText("keep", "field:score").ok());
  ASSERT_TRUE(dedup.SetText("in_memory", "1").ok());
  ASSERT_TRUE(dedup.ApplyTo(&d).ok());
  EXPECT_EQ(d.lsh.parameters, (LshParameters{5, 2}));
  EXPECT_EQ(d.keep, KeepPolicy::kField);
  EXPECT_EQ(d.keep_field, "score");
  EXPECT_FALSE(d.spill);
}

TEST(OptionStringTest, OneFormWrittenAndRead) {
  FingerprintOptions options;
  EXPECT_EQ(FingerprintOptionsToString(options),
            "profile=neardup bits=64 hash=xxh3 tokenizer=auto shingle=2 ngram=4 weighting=tf "
            "sublinear_tf=1 top_k=0 drop_single_char_words=0 drop_stop_words=0 jieba_hmm=1 idf= "
            "jieba_dir= strip_markup=1 nfkc=1 case_fold=1 t2s=1 fold_whitespace=1 opencc_config=");
  options.features.idf_path = "/data/my idf%=.txt";
  options.features.tokenizer = Tokenizer::kCharNgram;
  options.normalize.case_fold = false;
  const std::string text = FingerprintOptionsToString(options);
  auto parsed = ParseFingerprintOptions(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(FingerprintOptionsToString(*parsed), text);
  EXPECT_EQ(parsed->features.idf_path, "/data/my idf%=.txt");
  auto pairs = ParseOptionString(text);
  ASSERT_TRUE(pairs.ok());
  EXPECT_EQ(pairs->at("idf"), "/data/my idf%=.txt");  // unescaped
  EXPECT_EQ(pairs->at("case_fold"), "0");
  EXPECT_FALSE(ParseFingerprintOptions("shingle=x").ok());
  EXPECT_FALSE(ParseFingerprintOptions("colour=red").ok());
  EXPECT_FALSE(ParseFingerprintOptions("idf=%4").ok());
  EXPECT_FALSE(ParseFingerprintOptions("tokenizer").ok());
}

TEST(OptionStringTest, StoreOptionsFromTheRecordedStringAndGivenOnes) {
  FingerprintOptions recorded;
  recorded.features.char_ngram_size = 5;
  const std::string text = FingerprintOptionsToString(recorded);
  OptionValues none;
  auto same = FingerprintOptionsForStore("s", text, 64, none);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->features.char_ngram_size, 5);
  OptionValues repeat(OptionNaming::kFlag);
  ASSERT_TRUE(repeat.SetText("ngram", "5").ok());
  EXPECT_TRUE(FingerprintOptionsForStore("s", text, 64, repeat).ok());
  OptionValues other(OptionNaming::kFlag);
  ASSERT_TRUE(other.SetText("ngram", "4").ok());
  auto refused = FingerprintOptionsForStore("s", text, 64, other);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("ngram=5, not ngram=4 (--ngram)"), std::string::npos)
      << refused.status().message();
  OptionValues wide;
  ASSERT_TRUE(wide.Set("bits", int64_t{128}).ok());
  EXPECT_EQ(FingerprintOptionsForStore("s", "", 64, wide).status().message(),
            "s: the store holds 64-bit fingerprints, not bits 128");
}

TEST(OptionRegistryTest, TheRuleOfANewStore) {
  StoreOptions untouched;
  ASSERT_TRUE(OptionValues().ApplyTo(&untouched).ok());
  EXPECT_FALSE(untouched.rule.has_value());  // an existing store keeps its own
  EXPECT_FALSE(untouched.lsh.has_value());
  OptionValues simhash;
  ASSERT_TRUE(simhash.Set("rule", std::string("simhash")).ok());
  StoreOptions bare;
  ASSERT_TRUE(simhash.ApplyTo(&bare).ok());
  EXPECT_EQ(bare.rule, StoreRule::kSimHash);
  ASSERT_TRUE(simhash.Set("threshold", 0.7).ok());
  EXPECT_EQ(simhash.ApplyTo(&bare).message(),
            "threshold, bands, rows and bucket_window set the dedup rule, not rule simhash");
  OptionValues dedup(OptionNaming::kFlag);
  ASSERT_TRUE(dedup.SetText("threshold", "0.7").ok());
  ASSERT_TRUE(dedup.SetText("bucket_window", "16").ok());
  StoreOptions rule;
  ASSERT_TRUE(dedup.ApplyTo(&rule).ok());
  EXPECT_EQ(rule.rule, StoreRule::kDedup);
  ASSERT_TRUE(rule.lsh.has_value());
  EXPECT_EQ(rule.lsh->threshold, 0.7);
  EXPECT_EQ(rule.lsh->bucket_window, 16u);
  EXPECT_FALSE(rule.lsh->parameters.has_value());  // chosen by the store from the threshold
  EXPECT_EQ(OptionValues().Set("rule", std::string("minhash")).code(),
            StatusCode::kInvalidArgument);
}

// `neardup serve`'s flags are the registry's server options: their defaults are
// ServerOptions{}'s, and each one given sets its field (none is declared but not applied).
TEST(OptionRegistryTest, ServerDefaultsAreTheRegistrysAndEachIsApplied) {
  auto fields = [](const service::ServerOptions& o) {
    return std::vector<std::string>{o.host,
                                    std::to_string(o.port),
                                    std::to_string(o.threads),
                                    std::to_string(o.workers),
                                    std::to_string(o.auth_reads),
                                    std::to_string(o.max_body_bytes),
                                    std::to_string(o.max_query_body_bytes),
                                    std::to_string(o.max_response_bytes),
                                    std::to_string(o.max_buffered_bytes),
                                    std::to_string(o.malloc_arenas),
                                    std::to_string(o.limits.max_batch),
                                    std::to_string(o.request_timeout_seconds),
                                    std::to_string(o.idle_timeout_seconds),
                                    std::to_string(o.max_connections),
                                    std::to_string(o.shutdown_timeout_seconds)};
  };
  const std::vector<std::string> defaults = fields(service::ServerOptions());
  int server_options = 0;
  for (const OptionSpec& spec : AllOptions()) {
    if (!(spec.scope & kServerScope)) continue;
    // The token's two sources (no default) set one field: TheTokenComesFromOneSource.
    if (std::string_view(spec.key) == "token" || std::string_view(spec.key) == "token_file") {
      continue;
    }
    SCOPED_TRACE(spec.key);
    ++server_options;
    OptionValues values(OptionNaming::kFlag);
    if (spec.type == OptionType::kBool) {
      ASSERT_TRUE(values.Set(spec.flag, false).ok());
    } else {
      ASSERT_NE(spec.default_text, nullptr);
      ASSERT_TRUE(values.SetText(spec.flag, spec.default_text).ok());
    }
    service::ServerOptions set;
    ASSERT_TRUE(service::ApplyServerOptions(values, &set).ok());
    EXPECT_EQ(fields(set), defaults);
    // Another value (in range) changes exactly one field.
    OptionValues other(OptionNaming::kFlag);
    if (spec.type == OptionType::kBool) {
      ASSERT_TRUE(other.Set(spec.flag, true).ok());
    } else if (spec.type == OptionType::kString) {
      ASSERT_TRUE(other.Set(spec.flag, std::string("0.0.0.0")).ok());
    } else {
      ASSERT_TRUE(other.Set(spec.flag, static_cast<int64_t>(spec.min) + 7).ok());
    }
    ASSERT_TRUE(service::ApplyServerOptions(other, &set).ok());
    const std::vector<std::string> changed = fields(set);
    int differing = 0;
    for (size_t i = 0; i < changed.size(); ++i) differing += changed[i] != defaults[i];
    EXPECT_EQ(differing, 1);
  }
  EXPECT_EQ(server_options, static_cast<int>(defaults.size()));
  OptionValues bad(OptionNaming::kFlag);
  EXPECT_EQ(bad.SetText("timeout", "0").message(), "--timeout must be in [1, 3600], got 0");
  EXPECT_EQ(bad.SetText("workers", "-1").message(),
            "--workers must be 0 (all cores) to 65536, got -1");
}

TEST(OptionRegistryTest, TheTokenComesFromOneSource) {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("options_test_token_" + std::to_string(getpid())))
          .string();
  {
    std::ofstream out(file, std::ios::binary);
    out << "s3cret\r\nsecond line\n";
  }
  OptionValues values(OptionNaming::kFlag);
  ASSERT_TRUE(values.SetText("token_file", file).ok());
  service::ServerOptions set;
  ASSERT_TRUE(service::ApplyServerOptions(values, &set).ok());
  EXPECT_EQ(set.token, "s3cret");  // the first line, its CRLF line end stripped
  OptionValues both(OptionNaming::kFlag);
  ASSERT_TRUE(both.SetText("token_file", file).ok());
  ASSERT_TRUE(both.SetText("token", "other").ok());
  EXPECT_EQ(service::ApplyServerOptions(both, &set).message(),
            "give --token-file or --token, not both");
  std::filesystem::remove(file);
  OptionValues missing(OptionNaming::kKeyword);
  ASSERT_TRUE(missing.SetText("token_file", file).ok());
  const Status unreadable = service::ApplyServerOptions(missing, &set);
  EXPECT_EQ(unreadable.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unreadable.message().find(file), std::string::npos) << unreadable.message();
  OptionValues token(OptionNaming::kFlag);
  ASSERT_TRUE(token.SetText("token", "abc").ok());
  ASSERT_TRUE(service::ApplyServerOptions(token, &set).ok());
  EXPECT_EQ(set.token, "abc");
}

// The store's sync, group-commit window and checksum switch are registry options: one set of
// values (every|group|none) for `serve`, `index add` and Python's Store, one check of the window.
TEST(OptionRegistryTest, HowAStoreSyncsAndOpens) {
  OptionValues group(OptionNaming::kFlag);
  ASSERT_TRUE(group.SetText("sync", "group").ok());
  ASSERT_TRUE(group.SetText("group_commit_ms", "7").ok());
  ASSERT_TRUE(group.Set("no_verify", true).ok());
  StoreOptions set;
  ASSERT_TRUE(group.ApplyTo(&set).ok());
  EXPECT_EQ(set.sync_mode, SyncMode::kGroupCommit);
  EXPECT_EQ(set.group_commit_interval_ms, 7);
  EXPECT_FALSE(set.verify_checksums_on_open);
  OptionValues none(OptionNaming::kKeyword);
  ASSERT_TRUE(none.Set("sync", std::string("none")).ok());
  ASSERT_TRUE(none.Set("verify_checksums", true).ok());  // Python's keyword, positive sense
  ASSERT_TRUE(none.ApplyTo(&set).ok());
  EXPECT_EQ(set.sync_mode, SyncMode::kNone);
  EXPECT_TRUE(set.verify_checksums_on_open);
  // The window of another sync mode, given or the caller's default, is refused naming both.
  OptionValues window(OptionNaming::kFlag);
  ASSERT_TRUE(window.SetText("sync", "every").ok());
  ASSERT_TRUE(window.SetText("group_commit_ms", "5").ok());
  StoreOptions every;
  EXPECT_EQ(window.ApplyTo(&every).message(),
            "--group-commit-ms is the window of --sync group, not of --sync every");
  OptionValues alone(OptionNaming::kKeyword);
  ASSERT_TRUE(alone.SetText("group_commit_ms", "5").ok());
  StoreOptions serve_default;
  serve_default.sync_mode = SyncMode::kGroupCommit;
  EXPECT_TRUE(alone.ApplyTo(&serve_default).ok());
  StoreOptions add_default;  // every
  EXPECT_FALSE(alone.ApplyTo(&add_default).ok());
  OptionValues bad(OptionNaming::kFlag);
  EXPECT_EQ(bad.SetText("sync", "sometimes").message(),
            "--sync: expected one of every,group,none, got \"sometimes\"");
  EXPECT_EQ(bad.SetText("group_commit_ms", "1001").message(),
            "--group-commit-ms must be in [0, 1000], got 1001");
  // One parser of memory budgets, at once: a bad one is refused when given.
  EXPECT_TRUE(bad.SetText("memory_budget", "640M").ok());
  EXPECT_TRUE(bad.SetText("memory_budget", "128/fp").ok());
  EXPECT_TRUE(bad.SetText("memory_budget", "64e9").ok());
  EXPECT_NE(bad.SetText("memory_budget", "lots").message().find("--memory-budget: "),
            std::string::npos);
  // indexed_k: the planner's range (bits/4, `neardup plan`), a store's at most 15.
  OptionValues k(OptionNaming::kFlag);
  ASSERT_TRUE(k.SetText("indexed_k", "20").ok());
  StoreOptions store;
  EXPECT_EQ(k.ApplyTo(&store).message(), "--indexed-k must be in [0, 15] for a store, got 20");
  EXPECT_FALSE(k.SetText("indexed_k", "33").ok());
}

}  // namespace
}  // namespace neardup
