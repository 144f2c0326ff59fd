// The replicas' transport: how lockstep finds out it was launched by mpirun,
// and the few collectives the replicas use, each under a deadline.
//
// A single-process run never touches MPI: launch_from_env() reads only the
// environment mpirun sets (OMPI_COMM_WORLD_SIZE, PMIX_RANK, ...), and only a
// launch of two or more processes starts MPI (MpiSession). A build without MPI
// (LOCKSTEP_HAVE_MPI unset) still runs single-process and refuses to be a
// replica, saying so.
//
// Every collective is made of non-blocking point-to-point messages polled
// against a deadline, so a replica that never sends (dead, stalled, or a
// message lost on the way) ends the wait with ReplicaTimeout naming it: never
// a hang (seed 001's "roster-gradient stall" is the bug this avoids).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockstep::dist {

// What the launcher says about this process.
struct Launch {
  bool under_launcher = false;  // an mpirun (OpenMPI/PMIx) environment was found
  int rank = 0, world = 1;
};
Launch launch_from_env();

// A wait that ran past its deadline; `ranks` are the replicas not heard from.
class ReplicaTimeout : public std::runtime_error {
 public:
  ReplicaTimeout(const std::string& what, std::vector<int> ranks)
      : std::runtime_error(what), ranks_(std::move(ranks)) {}
  const std::vector<int>& ranks() const { return ranks_; }

 private:
  std::vector<int> ranks_;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every replica's block into `buf`: block r is bytes [offset[r], offset[r] + bytes[r]),
  // this replica's own block already in place. Waits at most `timeout_s`; then throws
  // ReplicaTimeout naming the replicas whose blocks did not arrive (`what` says what was
  // awaited). `withhold_from`: test faults only, peers this replica does not send to.
  virtual void all_gather(std::byte* buf, const std::vector<std::size_t>& offset,
                          const std::vector<std::size_t>& bytes, double timeout_s, const std::string& what,
                          const std::vector<int>& withhold_from = {}) = 0;
  // `bytes` bytes at `buf` from replica `root` to each replica in `to` (into their `buf`).
  virtual void send_from(int root, const std::vector<int>& to, std::byte* buf, std::size_t bytes, double timeout_s,
                         const std::string& what) = 0;
  // Ends every replica of the job now (MPI_Abort): the exit for a failure only
  // some replicas see (a timeout, an error while saving).
  [[noreturn]] virtual void abort(int code) = 0;
  std::string host_name() const;
};

// Starts MPI for a launch of world >= 2 (MPI_Init_thread, FUNNELED: only the
// main thread calls MPI; OpenMP's threads never do) and finalizes it when
// destroyed. Throws std::runtime_error when lockstep was built without MPI.
class MpiSession {
 public:
  explicit MpiSession(const Launch& launch);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  Comm& comm() { return *comm_; }
  // Whether this build can be a replica at all.
  static bool available();

 private:
  std::unique_ptr<Comm> comm_;
};

// Helpers over all_gather.
// Each replica's string (lengths first, then the bytes).
std::vector<std::string> gather_strings(Comm& c, const std::string& mine, double timeout_s, const std::string& what);
// The same number of 64-bit words from every replica: out[r * words + i].
std::vector<std::uint64_t> gather_words(Comm& c, const std::vector<std::uint64_t>& mine, double timeout_s,
                                        const std::string& what);

}  // namespace lockstep::dist
