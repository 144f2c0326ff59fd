// Deterministic English-like text for the data and training tests: paragraphs
// of 40 words from a small Austen vocabulary, sentences of 11 words, paragraphs
// separated by a blank line. `seed` picks the word sequence.
#pragma once

#include <string>

namespace lockstep::test {

inline std::string sample_text(int paragraphs, unsigned seed) {
  static const char* words[] = {"the", "of", "and", "to", "a", "in", "was", "her", "she", "he", "not", "be",
                                "that", "it", "his", "had", "as", "with", "for", "you", "Elizabeth", "Darcy"};
  std::string s;
  unsigned x = seed;
  for (int p = 0; p < paragraphs; ++p) {
    for (int w = 0; w < 40; ++w) {
      x = x * 1103515245u + 12345u;
      s += words[(x >> 16) % 22];
      s += (w % 11 == 10) ? ".\n" : " ";
    }
    s += "\n\n";
  }
  return s;
}

}  // namespace lockstep::test
