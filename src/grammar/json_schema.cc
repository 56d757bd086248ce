#include "grammar/json_schema.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/grammar.h"

namespace tkv::grammar {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;
constexpr int64_t kMaxCount = 1000;  // minItems, maxItems, minLength, maxLength

// The primitive rules, after llama.cpp's json-schema-to-grammar.
const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> rules = {
      {"space", R"(| " " | "\n"{1,2} [ \t]{0,20})"},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))"},
      {"string", R"("\"" char* "\"" space)"},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
      {"decimal-part", R"([0-9]{1,16})"},
      {"number", R"("-"? integral-part ("." decimal-part)? ([eE] [-+]? integral-part)? space)"},
      {"integer", R"("-"? integral-part space)"},
      {"boolean", R"(("true" | "false") space)"},
      {"null", R"("null" space)"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object",
       R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)"},
      {"array", R"("[" space ( value ("," space value)* )? "]" space)"},
      {"date",
       R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))"},
      {"time",
       R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"date-time", R"(date "T" time)"},
      {"uuid",
       R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
  };
  return rules;
}

// What each primitive uses (added along with it).
const std::map<std::string, std::vector<std::string>>& primitive_deps() {
  static const std::map<std::string, std::vector<std::string>> deps = {
      {"string", {"char", "space"}},
      {"number", {"integral-part", "decimal-part", "space"}},
      {"integer", {"integral-part", "space"}},
      {"boolean", {"space"}},
      {"null", {"space"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"string", "value", "space"}},
      {"array", {"value", "space"}},
      {"date-time", {"date", "time"}},
  };
  return deps;
}

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {
      "title",      "description", "default",   "examples", "$schema", "$id",        "$comment",
      "deprecated", "readOnly",    "writeOnly", "strict",   "$defs",   "definitions"};
  return k;
}

const std::set<std::string>& keywords() {
  static const std::set<std::string> k = {
      "type",      "properties",  "required", "additionalProperties",
      "enum",      "const",       "anyOf",    "oneOf",
      "items",     "prefixItems", "minItems", "maxItems",
      "minLength", "maxLength",   "pattern",  "format",
      "$ref",      "nullable"};
  return k;
}

std::string literal(const std::string& text) {
  return gbnf_literal(text);
}

class Compiler {
 public:
  Compiler(const Json& root, const std::string& prefix) : root_(root), prefix_(prefix) {
    defined_.insert(prefix_ + "root");
  }

  std::string compile() {
    const std::string expr = visit(root_, "root", "#", 0);
    std::string out = prefix_ + "root ::= " + expr + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void error(const std::string& what, const std::string& path) {
    fail("json schema: ", one_line(what), " at ", one_line(path));
  }

  std::string use(const std::string& primitive) {
    if (defined_.insert(primitive).second) {
      rules_.emplace_back(primitive, primitives().at(primitive));
      const auto it = primitive_deps().find(primitive);
      if (it != primitive_deps().end())
        for (const std::string& d : it->second) use(d);
    }
    return primitive;
  }

  // A new rule named after `hint` (letters, digits and '-' only, unique).
  std::string add_rule(const std::string& hint, const std::string& body) {
    const std::string name = reserve(hint);
    rules_.emplace_back(name, body);
    return name;
  }
  std::string reserve(const std::string& hint) {
    std::string base;
    for (char c : hint.substr(0, 40))
      base +=
          ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) ? c : '-';
    if (base.empty()) base = "r";
    std::string name = prefix_ + base;
    for (int i = 1; primitives().count(name) || !defined_.insert(name).second; ++i)
      name = prefix_ + base + "-" + std::to_string(i);
    return name;
  }

  static int64_t count(const Json& s, const char* key, int64_t fallback, const std::string& path) {
    const auto it = s.find(key);
    if (it == s.end()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      error(std::string("'") + key + "' must be a non-negative integer", path);
    if (it->get<int64_t>() > kMaxCount)
      error(std::string("'") + key + "' over " + std::to_string(kMaxCount) + " is not supported",
            path);
    return it->get<int64_t>();
  }

  static void check_keywords(const Json& s, const std::string& path) {
    for (const auto& [key, value] : s.items())
      if (!keywords().count(key) && !annotations().count(key))
        error("unsupported keyword '" + key + "'", path);
  }

  std::string visit(const Json& s, const std::string& name, const std::string& path, int depth) {
    if (depth > kMaxDepth) error("nested deeper than " + std::to_string(kMaxDepth), path);
    if (s.is_boolean()) {
      if (!s.get<bool>()) error("the schema 'false' matches nothing", path);
      return use("value");
    }
    if (!s.is_object()) error("a schema must be an object or a boolean", path);
    check_keywords(s, path);
    std::string expr = visit_object_schema(s, name, path, depth);
    if (s.contains("nullable") && s["nullable"] == true)
      expr = "( " + expr + " | " + use("null") + " )";
    return expr;
  }

  std::string visit_object_schema(const Json& s, const std::string& name, const std::string& path,
                                  int depth) {
    if (s.contains("$ref")) return visit_ref(s["$ref"], path, depth);
    if (s.contains("const")) return literal(s["const"].dump()) + " " + use("space");
    if (s.contains("enum")) return visit_enum(s["enum"], path);
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) return visit_alternatives(s[key], name, path + "/" + key, depth);
    if (!s.contains("type")) {
      if (s.contains("properties") || s.contains("additionalProperties"))
        return visit_typed(s, "object", name, path, depth);
      if (s.contains("items") || s.contains("prefixItems"))
        return visit_typed(s, "array", name, path, depth);
      return use("value");
    }
    const Json& type = s["type"];
    if (type.is_string()) return visit_typed(s, type.get<std::string>(), name, path, depth);
    if (!type.is_array() || type.empty())
      error("'type' must be a type name or a non-empty list of them", path);
    std::string alts;
    for (const Json& t : type) {
      if (!t.is_string()) error("'type' lists something that is not a type name", path);
      alts += (alts.empty() ? "" : " | ") + visit_typed(s, t.get<std::string>(), name, path, depth);
    }
    return "( " + alts + " )";
  }

  std::string visit_typed(const Json& s, const std::string& type, const std::string& name,
                          const std::string& path, int depth) {
    if (type == "object") return visit_object(s, name, path, depth);
    if (type == "array") return visit_array(s, name, path, depth);
    if (type == "string") return visit_string(s, name, path);
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") {
      for (const char* k :
           {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
        if (s.contains(k)) error(std::string("unsupported keyword '") + k + "'", path);
      return use(type);
    }
    error("unsupported type '" + type + "'", path);
  }

  std::string visit_enum(const Json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) error("'enum' must be a non-empty array", path);
    std::string alts;
    for (const Json& v : values) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
    return "( " + alts + " ) " + use("space");
  }

  std::string visit_alternatives(const Json& list, const std::string& name, const std::string& path,
                                 int depth) {
    if (!list.is_array() || list.empty()) error("must be a non-empty array", path);
    std::string alts;
    for (size_t i = 0; i < list.size(); ++i)
      alts += (alts.empty() ? "" : " | ") + visit(list[i], name + "-" + std::to_string(i),
                                                  path + "/" + std::to_string(i), depth + 1);
    return "( " + alts + " )";
  }

  std::string visit_ref(const Json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) error("'$ref' must be a string", path);
    const std::string r = ref.get<std::string>();
    if (leading_refs_.contains(r))
      error("'$ref' '" + r + "' comes back to itself before any text (a loop that matches nothing)",
            path);
    if (const auto it = refs_.find(r); it != refs_.end()) return it->second;
    const Json* target = nullptr;
    std::string hint = "root";
    if (r == "#") {
      target = &root_;
    } else {
      for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        const std::string p = prefix;
        if (r.compare(0, p.size(), p) != 0) continue;
        const std::string key = p.substr(2, p.size() - 3);
        hint = r.substr(p.size());
        if (root_.contains(key) && root_[key].is_object() && root_[key].contains(hint))
          target = &root_[key][hint];
      }
    }
    if (!target)
      error("'$ref' '" + r + "' is not supported (only #, #/$defs/NAME and #/definitions/NAME)",
            path);
    const std::string rule = reserve("ref-" + hint);
    refs_.emplace(r, rule);  // before the target: it may refer to itself
    const size_t at = rules_.size();
    leading_refs_.insert(r);
    const std::string body = visit(*target, hint, r, depth + 1);
    leading_refs_.erase(r);
    rules_.insert(rules_.begin() + std::ptrdiff_t(at), {rule, body});
    return rule;
  }

  std::string visit_string(const Json& s, const std::string& name, const std::string& path) {
    const std::string q = R"("\"")";
    if (s.contains("format")) {
      const Json& f = s["format"];
      if (!f.is_string()) error("'format' must be a string", path);
      const std::string fmt = f.get<std::string>();
      if (fmt != "date" && fmt != "time" && fmt != "date-time" && fmt != "uuid")
        error("format '" + fmt + "' is not supported (date, time, date-time, uuid are)", path);
      return q + " " + use(fmt) + " " + q + " " + use("space");
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) error("'pattern' must be a string", path);
      const std::string body = pattern_to_gbnf(s["pattern"].get<std::string>());
      return q + " " + add_rule(name + "-pattern", body) + " " + q + " " + use("space");
    }
    const int64_t min = count(s, "minLength", 0, path);
    const int64_t max = count(s, "maxLength", -1, path);
    if (max >= 0 && max < min) error("'maxLength' below 'minLength'", path);
    use("string");
    if (min == 0 && max < 0) return "string";
    const std::string reps = max < 0 ? "{" + std::to_string(min) + ",}"
                             : min == max
                                 ? "{" + std::to_string(min) + "}"
                                 : "{" + std::to_string(min) + "," + std::to_string(max) + "}";
    return q + " char" + reps + " " + q + " " + use("space");
  }

  std::string visit_array(const Json& s, const std::string& name, const std::string& path,
                          int depth) {
    const AfterText after_bracket(*this);
    const std::string open = R"("[" )" + use("space"), close = R"("]" )" + use("space");
    const std::string comma = R"("," )" + use("space");
    if (s.contains("prefixItems")) {
      const Json& prefix = s["prefixItems"];
      if (!prefix.is_array()) error("'prefixItems' must be an array", path);
      if (s.contains("items") && s["items"] != false)
        error("'items' next to 'prefixItems' is not supported (only items: false)", path);
      std::string body = open;
      for (size_t i = 0; i < prefix.size(); ++i)
        body += (i ? " " + comma + " " : " ") + visit(prefix[i], name + "-" + std::to_string(i),
                                                      path + "/prefixItems/" + std::to_string(i),
                                                      depth + 1);
      return add_rule(name, body + " " + close);
    }
    std::string item = use("value");
    if (s.contains("items")) item = visit(s["items"], name + "-item", path + "/items", depth + 1);
    const int64_t min = count(s, "minItems", 0, path);
    const int64_t max = count(s, "maxItems", -1, path);
    if (max >= 0 && max < min) error("'maxItems' below 'minItems'", path);
    if (max == 0) return add_rule(name, open + " " + close);
    const std::string more_min = std::to_string(std::max<int64_t>(min - 1, 0));
    const std::string reps =
        max < 0 ? "{" + more_min + ",}" : "{" + more_min + "," + std::to_string(max - 1) + "}";
    std::string list = item + " ( " + comma + " " + item + " )" + reps;
    if (min == 0) list = "( " + list + " )?";
    return add_rule(name, open + " " + list + " " + close);
  }

  std::string visit_object(const Json& s, const std::string& name, const std::string& path,
                           int depth) {
    const AfterText after_brace(*this);
    const bool listed = s.contains("properties");
    const Json extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(false);
    if (!listed && extra == true) return use("object");
    if (!listed && !s.contains("additionalProperties")) return use("object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) error("'required' must be an array", path);
      for (const Json& r : s["required"]) {
        if (!r.is_string()) error("'required' lists something that is not a name", path);
        required.insert(r.get<std::string>());
      }
    }
    std::vector<std::pair<std::string, bool>> items;  // key-value rule, required
    if (listed) {
      const Json& props = s["properties"];
      if (!props.is_object()) error("'properties' must be an object", path);
      for (const auto& [key, sub] : props.items()) {
        const std::string value =
            visit(sub, name + "-" + key, path + "/properties/" + key, depth + 1);
        items.emplace_back(add_rule(name + "-" + key + "-kv", literal(nlohmann::json(key).dump()) +
                                                                  " " + use("space") + " \":\" " +
                                                                  use("space") + " " + value),
                           required.count(key) > 0);
        required.erase(key);
      }
    }
    if (!required.empty())
      error("'required' names '" + *required.begin() + "', not a property", path);
    std::string extra_kv;
    if (extra != false) {
      const std::string value = extra == true ? use("value")
                                              : visit(extra, name + "-additional",
                                                      path + "/additionalProperties", depth + 1);
      extra_kv =
          add_rule(name + "-additional-kv", use("string") + " \":\" " + use("space") + " " + value);
    }
    return add_rule(name, R"("{" )" + use("space") + " " + members(items, extra_kv, name) +
                              R"( "}" )" + use("space"));
  }

  // The members in order, each optional one skippable, commas only between
  // members: first_k (nothing written yet) and after_k (something was).
  std::string members(const std::vector<std::pair<std::string, bool>>& items,
                      const std::string& extra_kv, const std::string& name) {
    const std::string comma = R"("," )" + use("space");
    std::string after = extra_kv.empty() ? "" : "( " + comma + " " + extra_kv + " )*";
    std::string first = extra_kv.empty() ? "" : "( " + extra_kv + " " + after + " )?";
    for (size_t k = items.size(); k-- > 0;) {
      const auto& [kv, req] = items[k];
      const std::string after_next = after.empty() ? "" : " " + after;
      const std::string next_first =
          req ? kv + after_next : kv + after_next + " | " + (first.empty() ? "\"\"" : first);
      if (k > 0)
        after =
            add_rule(name + "-after", comma + " " + kv + after_next +
                                          (req ? "" : " | " + (after.empty() ? "\"\"" : after)));
      first = add_rule(name + "-first", next_first);
    }
    return first;
  }

  const Json& root_;
  const std::string prefix_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> defined_;
  std::map<std::string, std::string> refs_;
  // The refs being expanded with no text matched since each began: one of
  // them again would make its rule left-recursive (`a ::= a | ...`).
  std::set<std::string> leading_refs_;
  // An object's or array's content comes after its bracket: refs met
  // there are past text, whatever is open around them.
  struct AfterText {
    explicit AfterText(Compiler& c) : c(c), saved(std::exchange(c.leading_refs_, {})) {}
    ~AfterText() { c.leading_refs_ = std::move(saved); }
    Compiler& c;
    std::set<std::string> saved;
  };
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const std::string& prefix) {
  for (char c : prefix)
    TKV_CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-');
  return Compiler(schema, prefix).compile();
}

std::string json_object_gbnf() {
  return json_schema_to_gbnf(Json::parse(R"({"type": "object"})"));
}

}  // namespace tkv::grammar
