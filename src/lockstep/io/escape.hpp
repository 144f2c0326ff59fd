// Names and bytes from files, made safe for a one-line message.
#pragma once

#include <string>
#include <string_view>

namespace lockstep::io {

// Text safe to print on one line: printable ASCII as is (and well-formed
// UTF-8 sequences), every other byte as \xNN, a backslash as two. A key
// holding a NUL byte prints whole, "a\x00b", never cut short.
std::string escape_bytes(std::string_view s);

}  // namespace lockstep::io
