// Reads the character vectors stored in an R package's lazy-load database
// (data/Rdata.rdb). That is where Debian's r-cran-janeaustenr keeps Jane
// Austen's six novels, one vector element per line of text: lockstep's
// embedded English corpus, taken at set-up time from a Debian package (no R
// needed, no download at run time).
//
// The .rdb file is a concatenation of blobs, each a 4-byte big-endian length
// (of the uncompressed data) followed by a zlib stream holding one object in
// R's XDR serialization format, version 2 or 3 ("X\n" header).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lockstep::data {

// One deserialized character vector (STRSXP). NA elements become "".
using CharacterVector = std::vector<std::string>;

// Parses one R XDR serialization holding a character vector.
// Throws std::runtime_error naming `what` and the byte offset on malformed input.
CharacterVector parse_r_character_vector(std::span<const std::uint8_t> bytes,
                                         const std::string& what = "R serialization");

// Splits an .rdb file's bytes into blobs, inflates each and parses it as a
// character vector. Throws std::runtime_error naming `what` and the offset.
std::vector<CharacterVector> parse_rdb(std::span<const std::uint8_t> bytes,
                                       const std::string& what = "rdb");

// Reads `path` and parses it as above.
std::vector<CharacterVector> read_rdb(const std::string& path);

}  // namespace lockstep::data
