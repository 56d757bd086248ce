#include "server/http_cors.h"

#include <httplib.h>

#include <algorithm>
#include <sstream>

#include "common/error.h"
#include "server/api_request.h"
#include "server/api_response.h"

namespace tkv::server {
namespace {

constexpr const char* kAllowMethods = "GET, POST, OPTIONS";
// What the official clients send (OpenAI's and Anthropic's SDKs add their
// x-stainless-* headers; browsers ask for them by name).
constexpr const char* kDefaultAllowHeaders =
    "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta, "
    "OpenAI-Organization, OpenAI-Project";
constexpr const char* kMaxAge = "600";  // seconds a browser may cache a preflight

// scheme://host[:port], nothing after: what a browser sends as Origin.
bool is_origin(const std::string& o) {
  const size_t scheme = o.find("://");
  if (scheme == std::string::npos || scheme == 0) return false;
  const std::string rest = o.substr(scheme + 3);
  return !rest.empty() && rest.find_first_of("/?# ") == std::string::npos;
}

}  // namespace

CorsPolicy CorsPolicy::parse(const std::string& spec) {
  CorsPolicy p;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item == "*") {
      p.any_ = true;
    } else if (item.empty()) {
      fail("--cors: an empty origin in '", spec, "'");
    } else {
      // A browser's Origin has no trailing slash; one in the flag is forgiven.
      if (item.size() > 1 && item.back() == '/') item.pop_back();
      if (!is_origin(item))
        fail("--cors: '", item,
             "' is not an origin (scheme://host[:port], e.g. http://localhost:3000)");
      p.origins_.push_back(item);
    }
  }
  if (!p.enabled()) fail("--cors: no origin given");
  return p;
}

bool CorsPolicy::allows(const std::string& origin) const {
  if (origin.empty()) return false;
  return any_ || std::find(origins_.begin(), origins_.end(), origin) != origins_.end();
}

void CorsPolicy::decorate(const httplib::Request& req, httplib::Response& res) const {
  const std::string origin = req.get_header_value("Origin");
  if (!enabled() || !allows(origin)) return;
  // Pages may read the header that says a field was ignored.
  res.set_header("Access-Control-Expose-Headers", "X-Turbokv-Warning");
  if (any_) {
    res.set_header("Access-Control-Allow-Origin", "*");
    return;
  }
  res.set_header("Access-Control-Allow-Origin", origin);
  res.set_header("Access-Control-Allow-Credentials", "true");
  res.set_header("Vary", "Origin");
}

bool CorsPolicy::answer_preflight(const httplib::Request& req, httplib::Response& res) const {
  if (!enabled() || req.method != "OPTIONS" || !req.has_header("Origin") ||
      !req.has_header("Access-Control-Request-Method"))
    return false;
  const std::string origin = req.get_header_value("Origin");
  if (!allows(origin)) {
    res.status = 403;
    res.set_content(
        to_json_text(error_json(make_api_error(
            403, "Cross-origin requests from '" + origin + "' are not allowed (see --cors).", "",
            "origin_not_allowed"))),
        "application/json");
    return true;
  }
  res.status = 204;
  decorate(req, res);
  res.set_header("Access-Control-Allow-Methods", kAllowMethods);
  const std::string asked = req.get_header_value("Access-Control-Request-Headers");
  res.set_header("Access-Control-Allow-Headers", asked.empty() ? kDefaultAllowHeaders : asked);
  res.set_header("Access-Control-Max-Age", kMaxAge);
  return true;
}

}  // namespace tkv::server
