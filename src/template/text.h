// Python's str methods on UTF-8 text, as templates call them. Case
// mapping covers ASCII letters only; other characters keep their case.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tkv::tmpl::text {

bool is_space(char c);
// chars empty (None): whitespace.
std::string strip(std::string_view s, std::string_view chars, bool left, bool right,
                  bool chars_given);
// sep not given: runs of whitespace. maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view s, std::string_view sep, bool sep_given,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, std::string_view sep, bool sep_given,
                                int64_t maxsplit);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// Python's str.find in code points; -1 when absent.
int64_t find(std::string_view s, std::string_view sub, bool reverse);
int64_t count(std::string_view s, std::string_view sub);

}  // namespace tkv::tmpl::text
