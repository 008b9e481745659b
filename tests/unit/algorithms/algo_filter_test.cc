// NCCL_ALGO / NCCL_PROTO parsing (algo_filter.h) in every syntax form NCCL
// accepts, the errors that must fail communicator creation, and selection
// through the parsed filter (including the fallback when it allows nothing
// Ferry can run).
#include <gtest/gtest.h>

#include <string>

#include "algorithms/algo_filter.h"
#include "algorithms/algorithm.h"
#include "algorithms/builders.h"
#include "algorithms/tuner.h"

namespace ferry {
namespace {

constexpr CollKind kAR = CollKind::kAllReduce, kBC = CollKind::kBroadcast,
                   kRD = CollKind::kReduce, kAG = CollKind::kAllGather,
                   kRS = CollKind::kReduceScatter;
constexpr CollKind kNamed[] = {kAR, kBC, kRD, kAG, kRS};

CollFilter algo(const std::string& v) {
  Result<CollFilter> f = parseAlgoFilter(v);
  EXPECT_TRUE(f.isOk()) << v << ": " << f.status().message();
  return f.isOk() ? f.value() : CollFilter();
}

// The error for `v`; it must be invalidUsage and name `token`.
void expectError(const std::string& v, const std::string& token, bool proto = false) {
  Result<CollFilter> f = proto ? parseProtoFilter(v) : parseAlgoFilter(v);
  ASSERT_FALSE(f.isOk()) << v;
  EXPECT_EQ(f.status().code(), Code::kInvalidUsage) << v;
  const std::string& m = f.status().message();
  EXPECT_NE(m.find(proto ? "NCCL_PROTO" : "NCCL_ALGO"), std::string::npos) << m;
  EXPECT_NE(m.find("\"" + token + "\""), std::string::npos) << v << " -> " << m;
}

TEST(AlgoFilter, EmptyAllowsEverything) {
  for (const char* v : {"", "  ", ";", "^"}) {
    CollFilter f = algo(v);
    EXPECT_TRUE(f.unrestricted()) << v;
    for (CollKind k : kNamed) EXPECT_TRUE(f.allows(k, "ring") && f.allows(k, "direct")) << v;
  }
  CollFilter def;
  EXPECT_TRUE(def.unrestricted());
  EXPECT_TRUE(def.allows(kAR, "anything"));
}

// Ferry's extension: only an "AlltoAll:" clause restricts AlltoAll (and
// so ferryAlltoAllv); NCCL's unprefixed list leaves it alone.
TEST(AlgoFilter, AlltoAllOnlyByItsOwnClause) {
  constexpr CollKind kA2A = CollKind::kAllToAll;
  CollFilter plain = algo("ring");
  EXPECT_TRUE(plain.allows(kA2A, "rail") && plain.allows(kA2A, "direct"));
  EXPECT_FALSE(plain.allows(kAR, "direct"));
  CollFilter only = algo("AlltoAll:direct");
  EXPECT_TRUE(only.allows(kA2A, "direct"));
  EXPECT_FALSE(only.allows(kA2A, "rail"));
  EXPECT_TRUE(only.allows(kAR, "tree"));
  CollFilter both = algo("ring;alltoall:^direct");
  EXPECT_TRUE(both.allows(kA2A, "rail"));
  EXPECT_FALSE(both.allows(kA2A, "direct"));
  expectError("AlltoAllv:rail", "AlltoAllv");
  // Selection follows it on a rail-shaped view.
  CommView v = makeView({0, 0, 1, 1});
  for (const char* name : {"rail", "direct"}) {
    CollArgs a{kA2A, 0, 4, 0, 1000, 4, false};
    Result<Choice> c = chooseAlgorithm(a, v, algo(std::string("AlltoAll:") + name));
    ASSERT_TRUE(c.isOk());
    EXPECT_STREQ(c.value().algo->name, name);
  }
}

TEST(AlgoFilter, ListAppliesToEveryCollective) {
  CollFilter f = algo("Ring,Tree");
  EXPECT_FALSE(f.unrestricted());
  for (CollKind k : kNamed) {
    EXPECT_TRUE(f.allows(k, "ring"));
    EXPECT_TRUE(f.allows(k, "TREE"));
    EXPECT_FALSE(f.allows(k, "direct"));
    EXPECT_FALSE(f.allows(k, "PAT"));
  }
  EXPECT_FALSE(f.allows(kAR, "nonsense"));  // outside the vocabulary
}

TEST(AlgoFilter, CaretExcludes) {
  CollFilter f = algo("^direct");
  for (CollKind k : kNamed) {
    EXPECT_FALSE(f.allows(k, "direct"));
    EXPECT_TRUE(f.allows(k, "ring"));
    EXPECT_TRUE(f.allows(k, "NVLSTree"));
  }
  CollFilter g = algo("^Tree,ring");
  EXPECT_FALSE(g.allows(kAR, "ring"));
  EXPECT_TRUE(g.allows(kAR, "direct"));
}

TEST(AlgoFilter, PerCollectiveClauses) {
  CollFilter f = algo("allreduce:ring;broadcast:ring");
  EXPECT_TRUE(f.allows(kAR, "ring"));
  EXPECT_FALSE(f.allows(kAR, "direct"));
  EXPECT_TRUE(f.allows(kBC, "ring"));
  EXPECT_FALSE(f.allows(kBC, "tree"));
  // Collectives with no clause keep everything.
  EXPECT_TRUE(f.allows(kRD, "direct"));
  EXPECT_TRUE(f.allows(kAG, "tree"));
  // A global first clause, then one collective replaced (NCCL's example).
  CollFilter g = algo("ring,collnetdirect;allreduce:tree,collnetdirect");
  EXPECT_TRUE(g.allows(kAR, "tree"));
  EXPECT_FALSE(g.allows(kAR, "ring"));
  EXPECT_TRUE(g.allows(kRS, "ring"));
  EXPECT_FALSE(g.allows(kRS, "tree"));
  CollFilter h = algo("AllReduce:^direct;ReduceScatter:^ring");
  EXPECT_FALSE(h.allows(kAR, "direct"));
  EXPECT_TRUE(h.allows(kAR, "ring"));
  EXPECT_FALSE(h.allows(kRS, "ring"));
  EXPECT_TRUE(h.allows(kAG, "ring"));
}

TEST(AlgoFilter, UnnameableCollectivesAreNeverRestricted) {
  CollFilter f = algo("ring");
  for (CollKind k : {CollKind::kAllToAll, CollKind::kGather, CollKind::kScatter,
                     CollKind::kSendRecv})
    EXPECT_TRUE(f.allows(k, "direct"));
}

TEST(AlgoFilter, CaseAndBlanksDoNotMatter) {
  CollFilter f = algo("  ALLREDUCE : ^ Direct , tReE ;\tbroadCAST:RING ; ");
  EXPECT_FALSE(f.allows(kAR, "direct"));
  EXPECT_FALSE(f.allows(kAR, "tree"));
  EXPECT_TRUE(f.allows(kAR, "Ring"));
  EXPECT_TRUE(f.allows(kBC, "ring"));
  EXPECT_FALSE(f.allows(kBC, "direct"));
  // Empty items are skipped, as NCCL's strtok skips them.
  CollFilter g = algo("ring,,");
  EXPECT_TRUE(g.allows(kAR, "ring"));
  EXPECT_FALSE(g.allows(kAR, "direct"));
}

TEST(AlgoFilter, EveryNcclNameIsAccepted) {
  for (const char* n : {"Tree", "Ring", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT",
                        "collnetdirect", "nvls", "pat", "Direct"})
    EXPECT_TRUE(parseAlgoFilter(n).isOk()) << n;
  // Every registry name is in the vocabulary, or the filter could never allow it.
  for (const Algorithm& a : algorithmRegistry()) {
    CollFilter f = algo(a.name);
    EXPECT_TRUE(f.allows(kAR, a.name)) << a.name;
  }
}

TEST(AlgoFilter, ErrorsNameTheBadToken) {
  expectError("bogus", "bogus");
  expectError("ring,Bogus", "Bogus");
  expectError("^ring, nope ", "nope");
  expectError("allreduce:ring;broadcast:splat", "splat");
  expectError("gather:ring", "gather");         // not a prefix NCCL (or Ferry) knows
  expectError("allreduc:ring", "allreduc");
  expectError("allreduce:ring;tree", "tree");   // only the first clause may omit the prefix
  expectError("allreduce:", "allreduce:");
  expectError("allreduce: ^ ring;broadcast:  ", "broadcast:");
  expectError("allreduce:ring:tree", "allreduce:ring:tree");
}

TEST(ProtoFilter, SyntaxAndErrors) {
  for (const char* v : {"", "Simple", "LL,LL128", "^LL128", "^LL128;allreduce:LL128", "simple",
                        " ll128 , SIMPLE "}) {
    Result<CollFilter> f = parseProtoFilter(v);
    EXPECT_TRUE(f.isOk()) << v << ": " << f.status().message();
  }
  Result<CollFilter> f = parseProtoFilter("^LL128;allreduce:LL128");
  ASSERT_TRUE(f.isOk());
  EXPECT_TRUE(f.value().allows(kBC, "Simple"));
  EXPECT_FALSE(f.value().allows(kBC, "LL128"));
  EXPECT_TRUE(f.value().allows(kAR, "ll128"));
  EXPECT_FALSE(f.value().allows(kAR, "simple"));
  expectError("LL256", "LL256", true);
  expectError("ring", "ring", true);
  expectError("reduce:LL;Simple", "Simple", true);
}

// Selection through the parsed filter: what it allows, and the fallback
// when it allows nothing Ferry can run.
std::string pick(CollKind kind, size_t count, const std::string& v) {
  CollArgs a{kind, 0, 4, 0, count, 8, false};
  Result<Schedule> s = selectSchedule(a, makeView(std::vector<uint64_t>(4, 0), 1 << 16), algo(v));
  EXPECT_TRUE(s.isOk()) << v;
  return s.isOk() ? s.value().algorithm : "";
}

TEST(AlgoFilter, SelectionFollowsTheFilter) {
  EXPECT_EQ(pick(kAR, 16, ""), "direct");  // small AllReduce: direct first
  EXPECT_EQ(pick(kAR, 16, "^direct"), "recdbl");  // the next cheapest
  EXPECT_EQ(pick(kAR, 16, "^direct,recdbl,rabenseifner"), "ring");
  EXPECT_EQ(pick(kAR, 16, "allreduce:ring;broadcast:ring"), "ring");
  EXPECT_EQ(pick(kAR, 16, "broadcast:ring"), "direct");
  EXPECT_EQ(pick(kBC, 16, "allreduce:ring"), "bintree");  // small Broadcast: 2 binomial hops
  EXPECT_EQ(pick(kBC, 16, "broadcast:ring"), "ring");
  // Only algorithms Ferry lacks, or every one excluded: the first that works.
  EXPECT_EQ(pick(kAR, 16, "PAT"), "direct");
  EXPECT_EQ(pick(kAR, 1 << 20, "PAT"), "ring");
  // NCCL's Tree is Ferry's double binary tree (registry name "tree").
  EXPECT_EQ(pick(kAR, 1 << 20, "Tree"), "tree");
  EXPECT_EQ(pick(kBC, 16, "^ring,bintree"), "bintree");
  EXPECT_EQ(pick(CollKind::kAllToAll, 16, "ring"), "direct");
}

// The cluster suite forces every algorithm by the list in tests/CMakeLists.txt:
// a new registry entry must be added there too.
TEST(AlgoRegistry, ClusterSuiteListsEveryAlgorithm) {
  std::string names;
  for (const Algorithm& a : algorithmRegistry()) names += (names.empty() ? "" : ",") + std::string(a.name);
  EXPECT_EQ(names, FERRY_ALL_ALGOS);
}

}  // namespace
}  // namespace ferry
