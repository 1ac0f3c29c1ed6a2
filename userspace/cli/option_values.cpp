#include "cli/option_values.h"

#include <algorithm>
#include <sstream>

namespace pbp {

namespace {

// "duration" of "--duration" and of "--duration=10".
std::string long_name_of(const std::string& word) {
    const size_t eq = word.find('=');
    return word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
}

// CLI11 makes the option take the next word as its value: it needs one (not a flag, nor an
// optional value).
bool wants_a_value(const CLI::Option& o) { return std::min(o.get_type_size_min(), o.get_items_expected_min()) > 0; }

// The option of app whose value the word after 'word' is, and how word names it ("-d" in
// "-qd", "--duration" in "--duration" or "--duration="), as CLI11 reads words; nullptr when
// word is no such option (a flag, a value, an option with its value attached: -d10,
// --duration=10).
const CLI::Option* takes_the_next_word(const CLI::App& app, const std::string& word, std::string& typed) {
    if (word.size() < 2 || word[0] != '-' || word == "--") return nullptr;
    if (word[1] == '-') {
        const size_t eq = word.find('=');
        if (eq != std::string::npos && eq + 1 < word.size()) return nullptr;  // --name=value
        const std::string name = long_name_of(word);
        for (const CLI::Option* o : app.get_options())
            if (o->check_lname(name) && wants_a_value(*o)) {
                typed = "--" + name;
                return o;
            }
        return nullptr;
    }
    // -abc: flags, the last of which may take the next word as its value.
    for (size_t i = 1; i < word.size(); i++) {
        const CLI::Option* opt = nullptr;
        for (const CLI::Option* o : app.get_options())
            if (o->check_sname(std::string(1, word[i]))) opt = o;
        if (!opt) return nullptr;
        if (wants_a_value(*opt)) {
            if (i + 1 != word.size()) return nullptr;  // -d10: the rest is its value
            typed = std::string("-") + word[i];
            return opt;
        }
    }
    return nullptr;
}

// word is one of app's options as a user would type it in an option's place: "-a", "--all-python",
// "--duration=5", or the "--" that starts the command.
bool is_an_option_of(const CLI::App& app, const std::string& word) {
    if (word == "--") return true;
    if (word.size() < 2 || word[0] != '-') return false;
    if (word[1] == '-') {
        const std::string name = long_name_of(word);
        for (const CLI::Option* o : app.get_options())
            if (o->check_lname(name)) return true;
        return false;
    }
    if (word.size() != 2) return false;  // "-3", "-x.json": values that may well be meant
    for (const CLI::Option* o : app.get_options())
        if (o->check_sname(std::string(1, word[1]))) return true;
    return false;
}

}  // namespace

CLI::Validator group_by_check() {
    return CLI::Validator(
        [](std::string& v) -> std::string {
            if (v == "process" || v == "pod") return "";
            return v + " is not a grouping; choose process (one profile per process, the default) or pod (one per "
                       "Kubernetes pod)";
        },
        "");  // (no description: --help's type name says process|pod)
}

namespace {

// Each line of text longer than width cut at its last spaces before width (a line's own
// breaks are kept).
std::string wrap_long_lines(const std::string& text, size_t width) {
    std::string out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        while (line.size() > width) {
            size_t cut = line.rfind(' ', width);
            if (cut == std::string::npos || cut == 0) break;
            out += line.substr(0, cut) + "\n";
            line = line.substr(cut + 1);
        }
        out += line + "\n";
    }
    if (!text.empty() && text.back() != '\n' && !out.empty()) out.pop_back();
    return out;
}

class HelpFormatter : public CLI::Formatter {
public:
    explicit HelpFormatter(bool own_usage) : own_usage_(own_usage) {}
    std::string make_description(const CLI::App* app) const override {
        return wrap_long_lines(CLI::Formatter::make_description(app), kWidth);
    }
    std::string make_footer(const CLI::App* app) const override {
        return wrap_long_lines(CLI::Formatter::make_footer(app), kWidth);
    }
    std::string make_usage(const CLI::App* app, std::string name) const override {
        return own_usage_ ? std::string() : CLI::Formatter::make_usage(app, std::move(name));
    }
    // Wrapped at word boundaries; CLI11's format_help indents each line after a newline to the
    // description's column.
    std::string make_option_desc(const CLI::Option* opt) const override {
        const std::string desc = CLI::Formatter::make_option_desc(opt);
        const size_t width = kWidth > get_column_width() + 20 ? kWidth - get_column_width() : 40;
        std::string out, line;
        std::istringstream words(desc);
        for (std::string w; words >> w;) {
            if (!line.empty() && line.size() + 1 + w.size() > width) {
                out += line + "\n";
                line.clear();
            }
            line += (line.empty() ? "" : " ") + w;
        }
        return out + line;
    }

private:
    static constexpr size_t kWidth = 100;
    bool own_usage_;
};

}  // namespace

std::shared_ptr<CLI::Formatter> help_formatter(bool own_usage) { return std::make_shared<HelpFormatter>(own_usage); }

CLI::Option* OptionValues::add(CLI::Option* opt, std::string what, std::string example) {
    wanted_[opt] = {std::move(what), std::move(example)};
    return opt;
}

std::string OptionValues::needs_a_value(const CLI::Option& opt, const std::string& typed, const std::string& before,
                                        const std::string& program) const {
    std::string s = typed + " needs a value" + (before.empty() ? "" : " before " + before);
    auto it = wanted_.find(&opt);
    if (it == wanted_.end()) return s + " (" + opt.get_type_name() + "); see " + program + " --help";
    return s + ": " + it->second.what + " (e.g. " + typed + " " + it->second.example + ")";
}

std::string OptionValues::parse_error(const CLI::App& app, const CLI::ParseError& e,
                                      const std::vector<std::string>& args, const std::string& program) const {
    // CLI11 ran out of words for an option: it is the last word.
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && !args.empty()) {
        std::string typed;
        if (const CLI::Option* opt = takes_the_next_word(app, args.back(), typed))
            return needs_a_value(*opt, typed, "", program);
    }
    // An option that took the next option as its value fails CLI11's checks in its stead: that
    // value's check, or the option that lost its place required ("--label -o x.html a.pbp").
    if (std::string s = value_taken_from_an_option(app, args, program); !s.empty()) return s;
    // An option of one value given twice ("-d 2 -d 3": CLI11's "At Most 1 required but received 2").
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e))
        for (const CLI::Option* opt : app.get_options()) {
            if (!opt->nonpositional() || !wants_a_value(*opt) || opt->get_items_expected_max() != 1 ||
                opt->results().size() < 2)
                continue;
            std::string name = opt->get_name(false, true), values;
            std::replace(name.begin(), name.end(), ',', '/');
            for (const std::string& v : opt->results()) values += (values.empty() ? "" : ", ") + v;
            return name + " was given " + std::to_string(opt->results().size()) + " times (" + values +
                   "); give it once";
        }
    return std::string(e.what()) + "; see " + program + " --help";
}

std::string OptionValues::value_taken_from_an_option(const CLI::App& app, const std::vector<std::string>& args,
                                                     const std::string& program) const {
    for (const CLI::Option* opt : app.get_options()) {
        if (!opt->nonpositional() || !wants_a_value(*opt)) continue;  // a command's words are its own
        for (const std::string& value : opt->results()) {
            if (!is_an_option_of(app, value)) continue;
            // Named as it was typed: the word before that value that gave it to this option.
            std::string typed;
            for (size_t i = 0; i + 1 < args.size() && typed.empty(); i++) {
                std::string t;
                if (args[i + 1] == value && takes_the_next_word(app, args[i], t) == opt) typed = t;
            }
            if (typed.empty()) {
                typed = opt->get_name(false, true);
                std::replace(typed.begin(), typed.end(), ',', '/');
            }
            return needs_a_value(*opt, typed, value, program);
        }
    }
    return "";
}

}  // namespace pbp
