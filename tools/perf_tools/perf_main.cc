// One binary per collective; CMake sets FERRY_PERF_COLL ("all_reduce", ...).
#include "tools/perf_tools/perf_runner.h"

int main(int argc, char** argv) { return ferry::perf::perfMain(FERRY_PERF_COLL, argc, argv); }
