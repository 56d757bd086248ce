#include "server/http_routes.h"

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

}  // namespace tkv::server
