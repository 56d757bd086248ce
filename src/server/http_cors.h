// Cross-origin requests from browsers (`turbokv serve --cors ORIGIN[,...]`),
// off unless origins are given:
//   - a preflight (OPTIONS with Origin and Access-Control-Request-Method)
//     from an allowed origin is answered 204 with Access-Control-Allow-
//     Origin, -Methods, -Headers and -Max-Age, before the API key is asked
//     for (browsers send none on a preflight); from another origin, 403;
//   - every response to an allowed origin carries Access-Control-Allow-
//     Origin (and Vary: Origin), so a page can read it, and exposes
//     X-Turbokv-Warning;
//   - `*` allows any origin and is sent as `*`: credentials (cookies, HTTP
//     auth) are then never allowed, as the Fetch standard requires; a named
//     origin is echoed with Access-Control-Allow-Credentials: true.
#pragma once

#include <string>
#include <vector>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tkv::server {

class CorsPolicy {
 public:
  CorsPolicy() = default;  // off
  // "https://a.example,http://localhost:3000" or "*"; tkv::Error naming a
  // bad entry (empty, not scheme://host[:port], a path).
  static CorsPolicy parse(const std::string& spec);

  bool enabled() const { return any_ || !origins_.empty(); }
  bool allows(const std::string& origin) const;

  // A preflight answered (true), or not one (false: the request goes on).
  bool answer_preflight(const httplib::Request& req, httplib::Response& res) const;
  // Adds the Access-Control-Allow-* headers to a response for an allowed
  // Origin.
  void decorate(const httplib::Request& req, httplib::Response& res) const;

 private:
  bool any_ = false;
  std::vector<std::string> origins_;
};

}  // namespace tkv::server
