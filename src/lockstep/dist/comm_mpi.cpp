// The MPI transport (OpenMPI). Compiled to a refusal when lockstep is built
// without MPI, so a single-process build needs nothing of it.
#include "lockstep/dist/comm.hpp"

#include <chrono>
#include <thread>

#include <fmt/format.h>

#ifdef LOCKSTEP_HAVE_MPI
#include <mpi.h>
#endif

namespace lockstep::dist {

#ifdef LOCKSTEP_HAVE_MPI
namespace {

// Messages larger than this go in pieces (MPI counts are int).
constexpr std::size_t kPiece = std::size_t{1} << 30;

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(fmt::format("{} failed: {}", call, msg));
}

class MpiComm final : public Comm {
 public:
  MpiComm() {
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_gather(std::byte* buf, const std::vector<std::size_t>& offset, const std::vector<std::size_t>& bytes,
                  double timeout_s, const std::string& what, const std::vector<int>& withhold_from) override {
    const int tag = next_tag();
    std::vector<MPI_Request> reqs;
    std::vector<int> source;  // the peer a receive request waits for; -1 for sends
    const auto me = static_cast<std::size_t>(rank_);
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      post(buf + offset[static_cast<std::size_t>(q)], bytes[static_cast<std::size_t>(q)], q, tag, true, reqs, source);
    }
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      bool withheld = false;
      for (int w : withhold_from) withheld = withheld || w == q;
      if (!withheld) post(buf + offset[me], bytes[me], q, tag, false, reqs, source);
    }
    wait(reqs, source, timeout_s, what);
  }

  void send_from(int root, const std::vector<int>& to, std::byte* buf, std::size_t bytes, double timeout_s,
                 const std::string& what) override {
    const int tag = next_tag();
    std::vector<MPI_Request> reqs;
    std::vector<int> source;
    bool mine = false;
    for (int q : to) {
      if (rank_ == root && q != root) post(buf, bytes, q, tag, false, reqs, source);
      mine = mine || q == rank_;
    }
    if (mine && rank_ != root) post(buf, bytes, root, tag, true, reqs, source);
    wait(reqs, source, timeout_s, what);
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  // Every replica makes the same calls in the same order, so a counter names
  // a call on all of them; MPI keeps messages of one (source, tag) in order.
  int next_tag() {
    const int t = tag_;
    tag_ = tag_ >= 30000 ? 1 : tag_ + 1;
    return t;
  }
  static void post(std::byte* p, std::size_t n, int peer, int tag, bool recv, std::vector<MPI_Request>& reqs,
                   std::vector<int>& source) {
    std::size_t done = 0;
    do {
      const auto piece = static_cast<int>(std::min(kPiece, n - done));
      MPI_Request r = MPI_REQUEST_NULL;
      if (recv) {
        check(MPI_Irecv(p + done, piece, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r), "MPI_Irecv");
      } else {
        check(MPI_Isend(p + done, piece, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r), "MPI_Isend");
      }
      reqs.push_back(r);
      source.push_back(recv ? peer : -1);
      done += static_cast<std::size_t>(piece);
    } while (done < n);
  }
  // Polls until every request completes or the deadline passes. The first
  // milliseconds yield the core between polls, later ones sleep: a replica
  // waiting for a slow peer must not take the CPU that peer needs.
  void wait(std::vector<MPI_Request>& reqs, const std::vector<int>& source, double timeout_s,
            const std::string& what) {
    if (reqs.empty()) return;
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    for (;;) {
      int done = 0;
      check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (done) return;
      const auto now = Clock::now();
      if (now >= deadline) break;
      if (now - start < std::chrono::milliseconds(20)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    std::vector<int> missing;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (source[i] < 0 || reqs[i] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
      if (!flag) {
        bool seen = false;
        for (int m : missing) seen = seen || m == source[i];
        if (!seen) missing.push_back(source[i]);
        MPI_Cancel(&reqs[i]);  // the buffer may go away: the receive must not land in it
        MPI_Request_free(&reqs[i]);
      }
    }
    std::string names;
    for (int m : missing) names += fmt::format("{}replica {}", names.empty() ? "" : ", ", m);
    if (names.empty()) names = "a peer (sends did not complete)";
    throw ReplicaTimeout(fmt::format("{}: nothing from {} within {:g} s (--replica-timeout): stopping the run rather "
                                     "than waiting forever",
                                     what, names, timeout_s),
                         missing);
  }

  int rank_ = 0, size_ = 1, tag_ = 1;
};

}  // namespace

bool MpiSession::available() { return true; }

MpiSession::MpiSession(const Launch&) {
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (turned into exceptions above), not an abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  comm_ = std::make_unique<MpiComm>();
}

MpiSession::~MpiSession() {
  comm_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

#else  // built without MPI

bool MpiSession::available() { return false; }

MpiSession::MpiSession(const Launch& launch) {
  throw std::runtime_error(fmt::format(
      "launched as replica {} of {} by mpirun, but this lockstep was built without MPI: install libopenmpi-dev "
      "(scripts/setup.sh) and rebuild, or run one process without mpirun",
      launch.rank, launch.world));
}
MpiSession::~MpiSession() = default;

#endif

}  // namespace lockstep::dist
