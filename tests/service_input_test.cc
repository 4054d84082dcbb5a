// Unit tests of the HTTP service's input handling without a server: the body decoder's limits for
// every content encoding (a gzip bomb is cut off at the limit), the bearer-token check, token files
// with CRLF line ends, and the request parser's refusals (duplicate keys, empty text, an id twice
// in a batch) and verbatim metadata.
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "service/http_input.h"
#include "service/request_parser.h"

namespace neardup::service {
namespace {

// `data` compressed as gzip (window_bits 16 + 15) or zlib deflate (15).
std::string Compress(const std::string& data, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Feeds `data` in pieces of `piece` bytes; returns the first error or Finish().
Status Feed(BodyDecoder& decoder, const std::string& data, size_t piece) {
  for (size_t i = 0; i < data.size(); i += piece) {
    Status s = decoder.Append(data.data() + i, std::min(piece, data.size() - i));
    if (!s.ok()) return s;
  }
  return decoder.Finish();
}

TEST(BodyDecoderTest, IdentityStopsAtTheLimit) {
  BodyDecoder decoder;
  ASSERT_TRUE(decoder.Init("", 1000).ok());
  Status s = Feed(decoder, std::string(1001, 'x'), 100);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_LE(decoder.body().size(), 1000u);
  BodyDecoder exact;
  ASSERT_TRUE(exact.Init("identity", 1000).ok());
  EXPECT_TRUE(Feed(exact, std::string(1000, 'x'), 7).ok());
  EXPECT_EQ(exact.body().size(), 1000u);
}

TEST(BodyDecoderTest, GzipAndDeflateAreInflated) {
  const std::string text = R"({"id":"a","fingerprint":"00000000000000ff"})";
  for (auto [encoding, bits] : {std::pair{"gzip", 31}, {"X-GZIP", 31}, {"deflate", 15}}) {
    BodyDecoder decoder;
    ASSERT_TRUE(decoder.Init(encoding, 1 << 20).ok());
    ASSERT_TRUE(Feed(decoder, Compress(text, bits), 3).ok()) << encoding;
    EXPECT_EQ(decoder.body(), text) << encoding;
  }
}

TEST(BodyDecoderTest, GzipBombIsCutOffAtTheLimitNotInflated) {
  // 64 MiB of zeros compress to ~64 KiB; the decoder must stop at the 1 MiB limit.
  const std::string bomb = Compress(std::string(64u << 20, '\0'), 31);
  ASSERT_LT(bomb.size(), 1u << 20);
  BodyDecoder decoder;
  ASSERT_TRUE(decoder.Init("gzip", 1u << 20).ok());
  Status s = Feed(decoder, bomb, 4096);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_LE(decoder.body().size(), 1u << 20);
  // Everything after the first error fails too.
  EXPECT_FALSE(decoder.Append("x", 1).ok());
}

TEST(BodyDecoderTest, DamagedAndTruncatedStreamsAreErrors) {
  const std::string gz = Compress(std::string(10000, 'a'), 31);
  BodyDecoder truncated;
  ASSERT_TRUE(truncated.Init("gzip", 1 << 20).ok());
  Status s = Feed(truncated, gz.substr(0, gz.size() / 2), 50);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  BodyDecoder garbage;
  ASSERT_TRUE(garbage.Init("gzip", 1 << 20).ok());
  s = Feed(garbage, "this is not gzip at all", 5);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  BodyDecoder trailing;
  ASSERT_TRUE(trailing.Init("gzip", 1 << 20).ok());
  s = Feed(trailing, gz + "junk", 1000);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

TEST(BodyDecoderTest, UnknownEncodingIsUnsupported) {
  BodyDecoder decoder;
  EXPECT_EQ(decoder.Init("br", 100).code(), StatusCode::kUnsupported);
  EXPECT_EQ(decoder.Init("gzip, gzip", 100).code(), StatusCode::kUnsupported);
}

TEST(RequestHeadTest, FramingRulesOfRfc9112) {
  using Fields = std::vector<HeaderField>;
  auto status = [](int version, const Fields& fields, std::string_view raw = "") {
    const std::optional<HeadRefusal> refusal = CheckRequestHead(version, fields, raw);
    return refusal.has_value() ? refusal->status : 0;
  };
  EXPECT_EQ(status(11, {{"Host", "x"}, {"Content-Length", "12"}}), 0);
  EXPECT_EQ(status(11, {{"Host", "x"}, {"Transfer-Encoding", "Chunked"}}), 0);
  EXPECT_EQ(status(10, {}), 0);  // HTTP/1.0 needs no Host
  EXPECT_EQ(status(11, {}), 400);
  EXPECT_EQ(status(11, {{"Host", "a"}, {"host", "b"}}), 400);
  EXPECT_EQ(status(10, {{"Host", "a"}, {"Host", "a"}}), 400);
  for (const char* length : {"-1", "+44", "0x2c", "44, 44", "4 4", "", " "}) {
    EXPECT_EQ(status(11, {{"Host", "x"}, {"Content-Length", length}}), 400) << length;
  }
  EXPECT_EQ(status(11, {{"Host", "x"}, {"Content-Length", "4"}, {"content-length", "4"}}), 400);
  EXPECT_EQ(status(11, {{"Host", "x"}, {"Content-Length", "4"}, {"Transfer-Encoding", "chunked"}}),
            400);
  EXPECT_EQ(status(11, {{"Host", "x"}, {"Transfer-Encoding", "chunked, gzip"}}), 400);
  EXPECT_EQ(status(11, {{"Host", "x"}, {"Transfer-Encoding", "identity"}}), 400);
  EXPECT_EQ(status(11, {{"Host", "x"}, {"Transfer-Encoding", "chunked, chunked"}}), 400);
  EXPECT_EQ(status(11, {{"Host", "x"}, {"Transfer-Encoding", "gzip, chunked"}}), 501);
  EXPECT_EQ(
      status(11, {{"Host", "x"}, {"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}}),
      501);
  EXPECT_EQ(status(10, {{"Transfer-Encoding", "chunked"}}), 400);
  EXPECT_EQ(status(11, {{"Host", "x"}}, "GET / HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n"), 400);
  EXPECT_EQ(status(11, {{"Host", "x"}}, "GET / HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\r\n"), 0);
}

TEST(RequestTargetTest, DecodedOnceEachParameterOnceValidUtf8) {
  auto target = ParseRequestTarget("/v1/documents/a%2Fb%20c?id=x+y&k=3&empty=&flag");
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(target->path, "/v1/documents/a/b c");
  EXPECT_EQ(target->Param("id"), "x y");
  EXPECT_EQ(target->Param("k"), "3");
  EXPECT_EQ(target->Param("empty"), "");
  EXPECT_EQ(target->Param("flag"), "");
  EXPECT_FALSE(target->Param("missing").has_value());
  EXPECT_EQ(ParseRequestTarget("/%E4%B8%AD")->path, "/\xE4\xB8\xAD");
  for (const char* bad : {"/v1/query?k=3&k=4", "/a%", "/a%4", "/a%4G", "/a%ff", "/a%C3%28",
                          "/?id=%00", "/?id=%ff", "*", "x/healthz", ""}) {
    auto refused = ParseRequestTarget(bad);
    EXPECT_FALSE(refused.ok()) << bad;
  }
  EXPECT_EQ(ParseRequestTarget("http://example.com:8080/healthz?a=1")->path, "/healthz");
  EXPECT_EQ(ParseRequestTarget("HTTP://example.com")->path, "/");
  EXPECT_NE(ParseRequestTarget("/q?k=3&k=4").status().message().find("k: given more than once"),
            std::string::npos);
}

TEST(TokenCheckerTest, BearerSchemeIsCaseInsensitiveAndTokenExact) {
  TokenChecker checker("s3cret");
  EXPECT_TRUE(checker.Matches("Bearer s3cret"));
  EXPECT_TRUE(checker.Matches("bearer s3cret"));
  EXPECT_TRUE(checker.Matches("BEARER   s3cret "));
  EXPECT_FALSE(checker.Matches("Bearer s3cre"));
  EXPECT_FALSE(checker.Matches("Bearer s3cret2"));
  EXPECT_FALSE(checker.Matches("Bearer S3cret"));
  EXPECT_FALSE(checker.Matches("Basic s3cret"));
  EXPECT_FALSE(checker.Matches("s3cret"));
  EXPECT_FALSE(checker.Matches("Bearer"));
  EXPECT_FALSE(checker.Matches(""));
}

TEST(TokenFileTest, CrlfIsStrippedAndReported) {
  bool stripped = false;
  Result<std::string> token = TokenFromFileContents("s3cret\r\n", &stripped);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, "s3cret");
  EXPECT_TRUE(stripped);
  token = TokenFromFileContents("s3cret\nsecond line\n", &stripped);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, "s3cret");
  EXPECT_FALSE(stripped);
  token = TokenFromFileContents("s3cret", &stripped);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, "s3cret");
  EXPECT_FALSE(TokenFromFileContents("\n", &stripped).ok());
  EXPECT_FALSE(TokenFromFileContents("two words\n", &stripped).ok());
  EXPECT_FALSE(TokenFromFileContents("", &stripped).ok());
}

TEST(RequestParserTest, DuplicateKeysAreRefusedAtAnyDepth) {
  RequestLimits limits;
  Result<AddRequest> r =
      ParseAddRequest(R"({"id":"a","id":"b","fingerprint":"00000000000000ff"})", limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate key \"id\""), std::string::npos);
  r = ParseAddRequest(
      R"({"documents":[{"id":"a","fingerprint":"00000000000000ff","metadata":{"x":1,"x":2}}]})",
      limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("documents[0].metadata: duplicate key \"x\""),
            std::string::npos)
      << r.status().message();
  Result<QueryRequest> q =
      ParseQueryRequest(R"({"fingerprint":"00000000000000ff","k":1,"k":2})", limits);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("duplicate key \"k\""), std::string::npos);
}

TEST(RequestParserTest, EmptyTextIsRefusedNamingTheField) {
  RequestLimits limits;
  Result<AddRequest> r = ParseAddRequest(R"({"documents":[{"id":"a","text":""}]})", limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("documents[0].text: must not be empty"), std::string::npos);
  EXPECT_FALSE(ParseQueryRequest(R"({"text":""})", limits).ok());
  EXPECT_FALSE(
      ParseQueryParams(std::nullopt, std::string(), std::nullopt, std::nullopt, limits).ok());
  EXPECT_FALSE(ParseCheckRequest(R"({"id":"a","text":""})", limits).ok());
}

TEST(RequestParserTest, AnIdTwiceInOneBatchIsRefused) {
  RequestLimits limits;
  Result<AddRequest> r = ParseAddRequest(
      R"({"documents":[{"id":"a","fingerprint":"00000000000000ff"},)"
      R"({"id":"b","fingerprint":"00000000000000ff"},{"id":"a","fingerprint":"00000000000000fe"}]})",
      limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("documents[2].id: \"a\" repeats documents[0].id"),
            std::string::npos)
      << r.status().message();
}

TEST(RequestParserTest, MetadataIsKeptVerbatim) {
  RequestLimits limits;
  Result<AddRequest> r = ParseAddRequest(
      "{\"documents\":[{\"id\":\"a\",\"fingerprint\":\"00000000000000ff\",\"metadata\": { \"x\" : "
      "1.0e5, \"s\": \"\\u00e9\" } },{\"metadata\":\"t\\\"x\",\"id\":\"b\",\"fingerprint\":"
      "\"00000000000000ff\"},{\"id\":\"c\",\"fingerprint\":\"00000000000000ff\",\"metadata\":null}]"
      "}",
      limits);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->documents.size(), 3u);
  EXPECT_EQ(r->documents[0].metadata_json, R"({ "x" : 1.0e5, "s": "\u00e9" })");
  EXPECT_EQ(r->documents[1].metadata_json, R"("t\"x")");
  EXPECT_EQ(r->documents[2].metadata_json, "");
  Result<CheckRequest> c = ParseCheckRequest(
      R"({"id":"a","fingerprint":"00000000000000ff","metadata":{"n":2.50},"k":1})", limits);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->document.metadata_json, R"({"n":2.50})");
  // The limit applies to the verbatim text.
  limits.max_metadata_bytes = 8;
  r = ParseAddRequest(R"({"id":"a","fingerprint":"00000000000000ff","metadata":{"a":  1}})",
                      limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("metadata: 9 bytes exceeds"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace neardup::service
