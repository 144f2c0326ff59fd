// lockstep's version and the version of its numeric contract.
#pragma once

namespace lockstep {

// NUMERIC_SPEC_VERSION names the set of canonical expressions (DESIGN.md §1,
// docs/NUMERICS.md): the association order of every reduction, the polynomial
// and range reduction of every elementary function, every quantization formula.
// It changes whenever any of them changes, so two builds that print the same
// NUMERIC_SPEC_VERSION compute the same bits. Golden hashes in the tests pin it:
// a change of expression without a bump fails them; replicas of different
// versions refuse to train together.
inline constexpr int NUMERIC_SPEC_VERSION = 1;

}  // namespace lockstep
