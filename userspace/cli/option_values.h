// What each command-line option that takes a value wants, so that one given none reads as a
// sentence naming the option as it was typed, what it wants and an example ("-d needs a value:
// a number of seconds (e.g. -d 10)"), never CLI11's "--duration: 1 required TEXT missing".
// Given none covers both the option last on the line and the option followed by another
// option, which CLI11 would take as its value ("-d -a", "-o -- python3 app.py").
#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pbp {

// The check of --group-by (pybpfprof and pybpfprof merge), as a sentence that says what each
// grouping does, not CLI11's "foo not in {process,pod}".
CLI::Validator group_by_check();

// --help as a terminal shows it: option descriptions wrapped at 100 columns under their column
// (CLI11 2.1 prints each on one line, up to 300 characters), and, for a command whose
// description already gives its usage (own_usage), no second "Usage:" line of CLI11's.
std::shared_ptr<CLI::Formatter> help_formatter(bool own_usage);

class OptionValues {
public:
    // opt takes a value: what it is ("a number of seconds") and one for the example ("10").
    // Returns opt, for CLI11's chained calls.
    CLI::Option* add(CLI::Option* opt, std::string what, std::string example);

    // The one-line error for e, thrown by app parsing args (the words after the program's
    // name, as given to app.parse): the sentence above when an option was given no value
    // (CLI11 fails on what follows from that too), else CLI11's text and where the help is
    // ("; see pybpfprof --help").
    std::string parse_error(const CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args,
                            const std::string& program) const;

    // After app parsed args: an option that took another of app's options (or the -- before a
    // command) as its value, as the sentence above; "" when none did.
    std::string value_taken_from_an_option(const CLI::App& app, const std::vector<std::string>& args,
                                           const std::string& program) const;

private:
    struct Wanted {
        std::string what, example;
    };
    // "-d needs a value[ before -a]: a number of seconds (e.g. -d 10)".
    std::string needs_a_value(const CLI::Option& opt, const std::string& typed, const std::string& before,
                              const std::string& program) const;
    std::map<const CLI::Option*, Wanted> wanted_;
};

}  // namespace pbp
