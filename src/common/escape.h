// Bytes from a file or from the user, shown safely: in error messages, in
// `inspect` and `tokenize` output, and stored in JSON (which must be UTF-8).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tkv {

// Bytes as one printable line: valid UTF-8 passes through; control
// characters (C0, DEL, C1), backslash, '"' and bytes that are not valid UTF-8
// become escapes (\n, \t, \", \\, \xNN). Every message that quotes bytes
// read from a file (keys, names, strings, magic numbers) goes through it.
std::string escape_bytes(std::string_view bytes);

// True when `bytes` is valid UTF-8 (no overlong forms, surrogates or code
// points above U+10FFFF).
bool is_valid_utf8(std::string_view bytes);

// Appends code point `cp` (at most U+10FFFF) to `out` in UTF-8.
void append_utf8(std::string& out, uint32_t cp);

// Lowercase hex, two digits a byte, and back (nullopt for anything that is
// not an even number of hex digits).
std::string to_hex(std::string_view bytes);
std::optional<std::string> from_hex(std::string_view hex);

}  // namespace tkv
