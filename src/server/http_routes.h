// The routes beside chat and text completions, registered by the HTTP
// front end (http_server.cc) with its body reader:
//   GET  /v1/models/{id}              the served model, or 404 (OpenAI's shape)
//   POST /v1/responses                route_responses.h
//   POST /v1/messages                 route_messages.h
//   POST /v1/messages/count_tokens    route_messages.h
//   POST /apply-template              a chat body -> {"prompt": the rendered
//                                     chat template}, as llama-server answers it
//   POST /tokenize, /detokenize       route_tokenize.h
#pragma once

#include <httplib.h>

#include <string>

#include "server/http_generation.h"
#include "server/route_messages.h"
#include "server/route_responses.h"
#include "server/route_tokenize.h"

namespace tkv::server {

// GET /v1/models/{id}: {"id", "object": "model", "created", "owned_by"} for
// the served model's id; any other id is a 404 (code model_not_found).
void handle_model(GenerationRoutes& routes, const std::string& id, httplib::Response& res);

// POST /apply-template: the prompt the chat template renders for a chat
// completions body (its messages, chat_template_kwargs and reasoning_effort;
// add_generation_prompt true unless the kwargs say otherwise); the 501 of
// chat requests when the model has no template.
void handle_apply_template(GenerationRoutes& routes, const std::string& body,
                           httplib::Response& res);

// `with_body(handle)` makes a handler that reads the request's body and
// calls handle(body, res, close_delimited).
template <class WithBody>
void add_other_routes(httplib::Server& http, GenerationRoutes& routes, WithBody with_body) {
  http.Get(R"(/v1/models/(.+))", [&routes](const httplib::Request& req, httplib::Response& res) {
    handle_model(routes, req.matches[1].str(), res);
  });
  http.Post("/v1/responses",
            with_body([&routes](const std::string& body, httplib::Response& res, bool close) {
              handle_responses(routes, body, res, close);
            }));
  http.Post("/v1/messages",
            with_body([&routes](const std::string& body, httplib::Response& res, bool close) {
              handle_messages(routes, body, res, close);
            }));
  http.Post("/v1/messages/count_tokens",
            with_body([&routes](const std::string& body, httplib::Response& res, bool) {
              handle_count_tokens(routes, body, res);
            }));
  http.Post("/apply-template",
            with_body([&routes](const std::string& body, httplib::Response& res, bool) {
              handle_apply_template(routes, body, res);
            }));
  http.Post("/tokenize", with_body([&routes](const std::string& body, httplib::Response& res,
                                             bool) { handle_tokenize(routes, body, res); }));
  http.Post("/detokenize", with_body([&routes](const std::string& body, httplib::Response& res,
                                               bool) { handle_detokenize(routes, body, res); }));
}

}  // namespace tkv::server
