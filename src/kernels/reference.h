// Internal: plain scalar implementations of the kernels, one element at a
// time through the scalar conversions of convert.cc. They define the
// semantics documented in reduce.h; tests check every vector table against
// them bit for bit. Too slow for real use.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/reduce.h"

namespace ferry::kernels::ref {

void reduce2(void* dst, void* dst2, const void* a, const void* b, size_t count, DType t, Op op);
void reduceScaled(void* dst, void* dst2, const void* a, const void* b, size_t count, DType t,
                  const Scalar& s);
void scale(void* dst, const void* src, size_t count, DType t, const Scalar& s);
void divide(void* dst, const void* src, size_t count, DType t, uint64_t n);

}  // namespace ferry::kernels::ref
