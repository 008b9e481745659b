// Inputs whose reductions are exact for every datatype and op, so results can
// be compared bit for bit (as nccl-tests does): every input is a small
// non-negative integer, sums stay below the largest integer the type holds
// exactly, products are powers of two within the type's range. Only avg on
// floating types is compared with a tolerance (one unit in the last place of
// the exact quotient), because sum/n must round.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::perf {

// ncclDataType_t and ncclRedOp_t values (int8=0 ... f8e5m2=11; sum=0 ... avg=4).
constexpr int kOpSum = 0, kOpProd = 1, kOpMax = 2, kOpMin = 3, kOpAvg = 4;
constexpr int kOpNone = -1;  // data movement: any values

size_t typeSize(int type);

// Rank `rank`'s input at element i (an integer, or a power of two for prod).
uint64_t inputValue(uint64_t seed, int type, int op, int nranks, int rank, size_t i);

// Stores the exact value v (representable by construction) as type at dst.
void encode(uint64_t v, int type, void* dst);
// The exact value of the element of type at src.
double decode(int type, const void* src);

// Fills count elements of rank's input.
void fillInputs(void* buf, size_t count, uint64_t seed, int type, int op, int nranks, int rank);

// The expected reduction over all ranks of element i, written to dst.
void expectedReduce(uint64_t seed, int type, int op, int nranks, size_t i, void* dst);

// Whether got (one element of type) matches the expected element exp.
bool matches(int type, int op, int nranks, const void* got, const void* exp, uint64_t seed,
             size_t i);

}  // namespace ferry::perf
