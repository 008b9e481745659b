// Shared state of the UCX network (see ucx_net.h for the design).
//
// Connection setup: listen() opens a TCP socket on the device's address and
// puts that address in the handle. connect()/accept() trade UCP worker
// addresses over it (they are too large for the 128-byte handle), the sender
// creates a UCP endpoint to the receiver's worker, and the receiver assigns
// the connection a tag unique in its worker. The socket stays open as a
// liveness channel: its EOF tells either side that the peer went away, on any
// UCX transport (shared-memory transports notice a dead peer only slowly).
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nccl_net.h>

#include "transports/netucx/ucx_api.h"

namespace ferry::ucx {

// ---- logging: the logger given to init when there is one (NCCL's, when we
// are a plugin), Ferry's log otherwise.
void setLogger(ncclDebugLogger_t logger);
void logWarn(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void logInfo(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
#define UCX_WARN(...) ::ferry::ucx::logWarn(__FILE__, __LINE__, __VA_ARGS__)
#define UCX_INFO(...) ::ferry::ucx::logInfo(__FILE__, __LINE__, __VA_ARGS__)

// ---- devices
struct Device {
  std::string name;      // interface name
  std::string addr;      // SockAddr packed (SockAddr::kPackedBytes bytes), port 0
  std::string pciPath;   // realpath of /sys/class/net/<if>/device, "" if virtual
  int speedMbps = 10000;
};
// The process-wide device list (found once); error text in *err when empty.
const std::vector<Device>& devices(std::string* err);

// ---- per-communicator context: one UCP context + worker.
struct Context {
  std::mutex mu;  // the worker is SERIALIZED: one caller at a time
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  std::vector<uint8_t> workerAddr;
  uint64_t commId = 0;
  uint64_t nextTag = 1;
  int liveComms = 0;
  // UCX found no transport able to detect peer failures (e.g. UCX_TLS=sm in
  // 1.13): endpoints go without UCX error handling; the side channel remains.
  bool noPeerErrMode = false;
  // A peer of this context failed. UCX 1.13 (assertions on, as Debian ships
  // it) can abort in ucp_worker_destroy when an internal endpoint still holds
  // a wireup message for a dead peer (fixed upstream, openucx/ucx#8175), so
  // finalize then keeps the worker and context (a process-wide list holds them).
  bool peerFailed = false;
};
// Drive the worker until it reports no more work (bounded).
void progress(Context* ctx);

// ---- the TCP side channel
struct Channel {
  int fd = -1;
  std::vector<uint8_t> out;  // bytes still to send
  size_t sent = 0;
  std::vector<uint8_t> in;   // bytes received so far
  void close();
  // Send what is pending; *done when all of `out` has gone.
  ncclResult_t flush(bool* done);
  // Receive one hello message (header + worker address); *done when complete.
  ncclResult_t readHello(bool* done);
  // True once the peer closed or reset the connection.
  bool peerClosed();
};

constexpr uint32_t kMagic = 0x46554358;  // "FUCX"
constexpr uint32_t kVersion = 1;
constexpr uint8_t kReadyByte = 0x52;  // connector → acceptor: endpoint wired up
// Tag bit of the handshake ping (connection tags are small counters).
constexpr uint64_t kPingTagBit = 1ull << 63;
struct Hello {
  uint32_t magic;
  uint32_t version;
  uint64_t tag;       // receiver → sender: the connection's tag
  uint32_t addrLen;   // worker address bytes that follow
  uint32_t pad;
};
void putHello(Channel* ch, uint64_t tag, const std::vector<uint8_t>& addr);
// Parse a complete hello in ch->in; error if malformed.
ncclResult_t parseHello(const Channel& ch, uint64_t* tag, std::vector<uint8_t>* addr);

// ---- requests and communicators
constexpr int kMaxRequests = NCCL_NET_MAX_REQUESTS;
struct Comm;
struct Request {
  Comm* comm = nullptr;
  bool used = false;
  bool done = false;
  bool isRecv = false;
  ucs_status_t status = UCS_OK;
  size_t size = 0;       // bytes sent, or bytes received once done
  void* ucpReq = nullptr;
};

struct Comm {
  Comm() {
    for (Request& r : reqs) r.comm = this;
  }
  Context* ctx = nullptr;
  bool isSend = false;
  Channel ch;
  uint64_t tag = 0;
  ucp_ep_h ep = nullptr;       // send side only
  void* pingReq = nullptr;     // while connecting: the handshake ping
  bool epFailed = false;       // UCX reported the endpoint broken
  ucs_status_t epStatus = UCS_OK;
  bool peerGone = false;       // the side channel saw EOF
  int64_t peerGoneMs = 0;
  int64_t lastCheckMs = 0;
  bool warned = false;
  Request reqs[kMaxRequests];
};

struct ListenComm {
  Context* ctx = nullptr;
  int dev = 0;
  int listenFd = -1;
  Comm* pending = nullptr;  // accepted socket, hello exchange in progress
  bool replied = false;
};

// The listen handle. The connector's copy also keeps its connect progress,
// since connect() is called again with the same handle until it finishes.
struct Handle {
  uint32_t magic;
  uint32_t stage;       // connector: 0 start, 1 TCP connecting, 2 hellos, 3 wireup, 4 ready sent
  uint8_t addr[28];     // SockAddr::pack() of the listener
  uint32_t pad;
  Comm* inProgress;     // connector: the send comm being built
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE);

// Creates the endpoint of a send comm to the receiver's worker.
ncclResult_t createEndpoint(Comm* comm, const std::vector<uint8_t>& remoteAddr);
// Free a comm that has no endpoint or UCX request (failed handshakes).
void dropComm(Comm* c);

int64_t nowMs();

// ---- the v11 entry points (ucx_*.cc)
ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
ncclResult_t finalize(void* ctx);
ncclResult_t setNetAttr(void* ctx, ncclNetAttr_v11_t* attr);
ncclResult_t numDevices(int* ndev);
ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props);
ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm);
ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v11_t** sendDevComm);
ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** recvDevComm);
ncclResult_t closeListen(void* listenComm);
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t deregMr(void* comm, void* mhandle);
ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request);
ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request);
ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                    void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t closeSend(void* sendComm);
ncclResult_t closeRecv(void* recvComm);

}  // namespace ferry::ucx
