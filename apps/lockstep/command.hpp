// A subcommand of the lockstep CLI that lives in its own file
// (apps/lockstep/cmd_<name>.cpp). main.cpp lists the factories below, adds
// each command to the app, and runs the one the user chose. A command's
// run() returns the process's exit status: 0 on success, 1 on an error while
// working, 2 on bad input (a flag, a file), each with one clear line on stderr.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

namespace lockstep::cli {

class Command {
 public:
  virtual ~Command() = default;
  // Registers the subcommand and its flags; keeps the CLI::App* it created.
  virtual void add(CLI::App& app) = 0;
  virtual int run() = 0;
  bool chosen() const { return cmd_ != nullptr && cmd_->parsed(); }

 protected:
  CLI::App* cmd_ = nullptr;
};

// One factory per file-level command (each defined in its cmd_<name>.cpp).
// Add yours here and to the list in main.cpp's make_commands().
std::unique_ptr<Command> make_generate_command();  // cmd_generate.cpp
std::unique_ptr<Command> make_chat_command();      // cmd_chat.cpp
std::unique_ptr<Command> make_inspect_command();
std::unique_ptr<Command> make_convert_command();
std::unique_ptr<Command> make_tokenize_command();  // cmd_tokenize.cpp
std::unique_ptr<Command> make_merge_command();     // cmd_merge.cpp
std::unique_ptr<Command> make_finetune_command();  // cmd_finetune.cpp

}  // namespace lockstep::cli
