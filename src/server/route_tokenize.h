// llama-server's tokenizer routes, on the served model's vocabulary:
//   POST /tokenize    {"content": TEXT, "add_special": false,
//                      "parse_special": true, "with_pieces": false}
//                     -> {"tokens": [ID, ...]}, or with pieces
//                     [{"id": ID, "piece": TEXT or [BYTE, ...]}, ...]
//                     (bytes where the piece is not valid UTF-8)
//   POST /detokenize  {"tokens": [ID, ...]} -> {"content": TEXT}
//                     (control tokens spelled out)
// A chat prompt's ids are what POST /apply-template's prompt gives with
// add_special true (the vocabulary's BOS) and parse_special true.
#pragma once

#include <httplib.h>

#include <string>

#include "server/http_generation.h"

namespace tkv::server {

void handle_tokenize(GenerationRoutes& routes, const std::string& body, httplib::Response& res);
void handle_detokenize(GenerationRoutes& routes, const std::string& body, httplib::Response& res);

}  // namespace tkv::server
