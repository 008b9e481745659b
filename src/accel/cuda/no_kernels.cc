// Built instead of the embedded fatbin when nvcc is not found: the CUDA
// backend then refuses reductions on device memory by name.
#include <cstddef>

namespace ferry::accel {
alignas(64) extern const unsigned char kReduceFatbin[] = {0};
extern const size_t kReduceFatbinSize = 0;
}  // namespace ferry::accel
