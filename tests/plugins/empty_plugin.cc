// Test library that loads fine but exports no ncclNetPlugin_v* symbol.
extern "C" __attribute__((visibility("default"))) int ferrytestNotAPlugin() { return 42; }
