// viewJson / viewTable (comm_view.h): what ferryCommViewJson and
// `ferry-topo --comm` print, on makeView shapes. The JSON is checked by a
// small strict parser (no library here) and by its expected keys and values.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <string>

#include "algorithms/comm_view.h"

namespace ferry {
namespace {

// Strict JSON syntax check: one value, then nothing but whitespace.
struct JsonCheck {
  const std::string& s;
  size_t i = 0;
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool lit(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s.compare(i, n, w) != 0) return false;
    i += n;
    return true;
  }
  bool str() {
    if (s[i] != '"') return false;
    for (++i; i < s.size() && s[i] != '"'; ++i)
      if (s[i] == '\\') ++i;
      else if (static_cast<unsigned char>(s[i]) < 0x20) return false;
    return i++ < s.size();
  }
  bool number() {
    size_t start = i;
    while (i < s.size() && std::strchr("+-0123456789.eE", s[i])) ++i;
    return i > start;
  }
  template <typename Item>
  bool list(char close, Item item) {
    ++i;
    ws();
    if (s[i] == close) return ++i, true;
    for (;;) {
      if (!item()) return false;
      ws();
      if (s[i] == close) return ++i, true;
      if (s[i++] != ',') return false;
      ws();
    }
  }
  bool value() {
    ws();
    if (i >= s.size()) return false;
    if (s[i] == '{')
      return list('}', [&] { return str() && (ws(), s[i++] == ':') && value(); });
    if (s[i] == '[') return list(']', [&] { return value(); });
    if (s[i] == '"') return str();
    return lit("true") || lit("false") || lit("null") || number();
  }
  bool whole() { return value() && (ws(), i == s.size()); }
};

bool validJson(const std::string& s) { return JsonCheck{s}.whole(); }

TEST(CommViewPrint, JsonParserSelfCheck) {
  EXPECT_TRUE(validJson("{\"a\": [1, 2.5e3, {\"b\": null}], \"c\": \"x\\\"y\"}"));
  EXPECT_FALSE(validJson("{\"a\": [1, 2}"));
  EXPECT_FALSE(validJson("{\"a\" 1}"));
  EXPECT_FALSE(validJson("{} {}"));
}

TEST(CommViewPrint, JsonTwoHosts) {
  CommView v = makeView({7, 7, 9, 9}, 4096);
  std::string j = viewJson(v, "file /tmp/a \"b\"");
  ASSERT_TRUE(validJson(j)) << j;
  for (const char* want :
       {"\"nranks\": 4", "\"hosts\": [{\"host\": 0, \"ranks\": [0, 1]}, {\"host\": 1, \"ranks\": [2, 3]}]",
        "{\"rank\": 3, \"host\": 1, \"localRank\": 1, \"rail\": 1, \"nic\": \"\"}", "\"nRails\": 2",
        "\"levels\": {\"self\": {\"latencyUs\": 1, \"bandwidthGBs\": 1, \"overheadUs\": 0.2, \"burstBytes\": 0, \"software\": false}", "\"intra\": {", "\"inter\": {",
        "\"reduceGBs\": 2", "\"oversubscription\": 1", "\"chunkBytes\": 4096", "\"allLocal\": false",
        "\"rings\": [[1, 0, 3, 2], [0, 1, 2, 3]]", "\"calibration\": \"file /tmp/a \\\"b\\\"\""})
    EXPECT_NE(j.find(want), std::string::npos) << want << " in " << j;
}

TEST(CommViewPrint, JsonShapes) {
  for (const auto& hostOf : std::vector<std::vector<uint64_t>>{{0}, {0, 0, 0}, {1, 2, 1, 2, 1, 2}, {3, 3, 4, 5, 5, 5}}) {
    CommView v = makeView(hostOf, 0, true);
    v.inter.bytesPerUs = 0;  // an unknown speed must still print valid JSON
    std::string j = viewJson(v);
    EXPECT_TRUE(validJson(j)) << j;
    EXPECT_EQ(j.find("calibration"), std::string::npos);
    EXPECT_NE(j.find("\"nranks\": " + std::to_string(hostOf.size())), std::string::npos);
  }
  EXPECT_NE(viewJson(makeView({0, 0}, 0, true)).find("\"allLocal\": true"), std::string::npos);
}

TEST(CommViewPrint, Table) {
  CommView v = makeView({7, 7, 9, 9}, 4096);
  std::string t = viewTable(v, "defaults");
  for (const char* want : {"4 ranks on 2 host(s), 2 rail(s), 2 ring(s), chunk 4096 bytes", "calibration: defaults",
                           "intra-host", "inter-host", "host 1: ranks 2 3", "ring 0: 1 -> 0 -> 3 -> 2",
                           "ring 1: 0 -> 1 -> 2 -> 3", "   3     1      1     1  -"})
    EXPECT_NE(t.find(want), std::string::npos) << want << " in\n" << t;
}

}  // namespace
}  // namespace ferry


namespace ferry {
namespace {

// atSize: cached speeds for a working set that fits, unless ranks share cores.
TEST(CommViewAtSize, CachedSpeedsOnlyWithACorePerRank) {
  CommView v = makeView({0, 0, 0, 0});
  v.self.bytesPerUs = 10000;
  v.intra.bytesPerUs = 5000;
  v.reduceBytesPerUs = 8000;
  v.cachedCopyBytesPerUs = 40000;
  v.cachedReduceBytesPerUs = 30000;
  v.cacheBytes = 1 << 20;

  CommView fits = v.atSize(128 << 10);  // 256 KiB working set: fits
  EXPECT_EQ(fits.self.bytesPerUs, 40000);
  EXPECT_EQ(fits.intra.bytesPerUs, 10000);  // a quarter: read from the other core's cache
  EXPECT_EQ(fits.reduceBytesPerUs, 30000);

  CommView large = v.atSize(1 << 20);  // 2 MiB: does not fit
  EXPECT_EQ(large.self.bytesPerUs, 10000);
  EXPECT_EQ(large.reduceBytesPerUs, 8000);

  v.oversubscription = 2;  // two ranks per core: no cached figures at any size
  CommView shared = v.atSize(8 << 10);
  EXPECT_EQ(shared.self.bytesPerUs, 10000);
  EXPECT_EQ(shared.intra.bytesPerUs, 5000);
  EXPECT_EQ(shared.reduceBytesPerUs, 8000);
}

}  // namespace
}  // namespace ferry
