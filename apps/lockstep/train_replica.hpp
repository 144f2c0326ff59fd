// `lockstep train` under mpirun: MPI, the dist::Replica, and the hooks the
// run calls (train::ReplicaRun). Outside mpirun nothing here runs and MPI is
// never started (docs/DISTRIBUTED.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/dist/comm.hpp"
#include "lockstep/dist/replica.hpp"
#include "lockstep/train/run.hpp"

namespace lockstep::cli {

struct ReplicaFlags {
  std::int64_t guard_every = 1;  // --guard-every
  double timeout_s = 120;        // --replica-timeout
};

class TrainReplica {
 public:
  // Null when this process was not launched by mpirun. Throws when it was but
  // cannot be a replica (a build without MPI), or on a refused handshake.
  static std::unique_ptr<TrainReplica> start_if_launched(const std::string& device, int threads,
                                                         const ReplicaFlags& flags);
  const train::ReplicaRun& run() const { return run_; }
  int rank() const { return launch_.rank; }
  // A failure only some replicas may see: say it, then end every replica.
  [[noreturn]] void abort(const std::string& message, int code);

 private:
  TrainReplica(const dist::Launch& launch, const std::string& device, int threads, const ReplicaFlags& flags);
  dist::Launch launch_;
  dist::MpiSession mpi_;
  std::unique_ptr<dist::Replica> replica_;
  train::ReplicaRun run_;
};

}  // namespace lockstep::cli
