#include "server/http_routes.h"

#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "server/api_response.h"

namespace tkv::server {

void handle_model(GenerationRoutes& routes, const std::string& id, httplib::Response& res) {
  if (routes.draining()) return send_unavailable(res, "The server is shutting down.");
  const ServedModel& model = routes.model();
  if (id != model.id) {
    // OpenAI answers an unknown model so: a 404 of type invalid_request_error.
    ApiError e =
        make_api_error(404, "The model '" + id + "' does not exist.", "model", "model_not_found");
    e.type = "invalid_request_error";
    return send_api_error(res, e);
  }
  Json j;
  j["id"] = model.id;
  j["object"] = "model";
  j["created"] = model.created;
  j["owned_by"] = "turbokv";
  res.set_content(to_json_text(j), "application/json");
}

void handle_apply_template(GenerationRoutes& routes, const std::string& body,
                           httplib::Response& res) {
  if (routes.draining()) return send_unavailable(res, "The server is shutting down.");
  std::variant<GenerationRequest, ApiError> parsed = parse_chat_request(body);
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_api_error(res, *error);
  const GenerationRequest& request = std::get<GenerationRequest>(parsed);
  const ServedModel& model = routes.model();
  if (!model.chat_template) return send_api_error(res, no_chat_template());
  std::string prompt;
  try {
    prompt = model.chat_template->render_chat(request.messages, /*add_generation_prompt=*/true,
                                              template_variables(request));
  } catch (const Error& e) {
    return send_api_error(res,
                          make_api_error(400,
                                         str("The chat template (", model.chat_template->name(),
                                             ") cannot render these messages: ", e.what()),
                                         "messages"));
  }
  res.status = 200;
  res.set_content(nlohmann::ordered_json{{"prompt", prompt}}.dump(
                      -1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

}  // namespace tkv::server
