// Bad templates: syntax errors at parse (one line, with the line number and
// the reason), errors while rendering, and hostile templates that must end
// with a clear error rather than hang, exhaust memory or crash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "template/template.h"

namespace tkv::tmpl {
namespace {

using json = nlohmann::ordered_json;

// The error parsing `source` gives; "" when it parses.
std::string parse_error(const std::string& source) {
  try {
    Template::parse(source, "t.jinja");
  } catch (const TemplateError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
    return e.what();
  }
  return "";
}

// The error rendering `source` gives; "" when it renders.
std::string render_error(const std::string& source, const RenderLimits& limits = {},
                         json vars = json::object()) {
  const Template t = Template::parse(source, "t.jinja");
  RenderOptions o;
  o.limits = limits;
  try {
    t.render(vars, o);
  } catch (const TemplateError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
    return e.what();
  }
  return "";
}

TEST(TemplateSyntax, ErrorsNameTheLineAndTheReason) {
  EXPECT_EQ(parse_error("a\n{% if x %}\nb"),
            "chat template t.jinja line 3: unexpected end of template, expected 'elif' or 'else' "
            "or 'endif'");
  EXPECT_EQ(parse_error("a\nb\n{{ 1 + }}"),
            "chat template t.jinja line 3: expected an expression, got '}}'");
  EXPECT_EQ(parse_error("{% for x in y %}{% endif %}"),
            "chat template t.jinja line 1: unknown tag 'endif'");
  EXPECT_EQ(parse_error("\n\n{% frobnicate %}"),
            "chat template t.jinja line 3: unknown tag 'frobnicate'");
  EXPECT_EQ(parse_error("{{ 'abc }}"), "chat template t.jinja line 1: unterminated string literal");
  EXPECT_EQ(parse_error("x\n{# never closed"),
            "chat template t.jinja line 2: unterminated comment ({# without #})");
  EXPECT_EQ(parse_error("{{ x "),
            "chat template t.jinja line 1: unterminated '{{' (no '}}' before the end)");
  EXPECT_EQ(parse_error("{% break %}"), "chat template t.jinja line 1: 'break' outside a loop");
  EXPECT_EQ(parse_error("{{ x | nosuchfilter }}"),
            "chat template t.jinja line 1: no filter named 'nosuchfilter'");
  EXPECT_EQ(parse_error("{{ x is nosuchtest }}"),
            "chat template t.jinja line 1: no test named 'nosuchtest'");
  EXPECT_EQ(parse_error("{% include 'other.jinja' %}"),
            "chat template t.jinja line 1: the 'include' tag is not supported in chat templates");
  EXPECT_EQ(
      parse_error("{{ a < b < c }}"),
      "chat template t.jinja line 1: chained comparisons (a < b < c) are not supported; use 'and'");
  EXPECT_EQ(parse_error("{{ 1 @ 2 }}"), "chat template t.jinja line 1: unexpected character '@'");
  EXPECT_EQ(parse_error("{{ 'ok' }}{% if true %}{% endif %}"), "");
}

TEST(TemplateSyntax, DeepNestingIsRefusedAtParse) {
  const std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(parse_error(parens).find("nesting deeper than"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_NE(parse_error(ifs).find("nesting deeper than"), std::string::npos);
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  EXPECT_NE(parse_error(sum + " }}").find("expression nested deeper than 400 levels"),
            std::string::npos);
  std::string attrs = "{{ x";
  for (int i = 0; i < 100000; ++i) attrs += ".a";
  EXPECT_NE(parse_error(attrs + " }}").find("expression nested deeper than 400 levels"),
            std::string::npos);
  std::string nots = "{{ ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_NE(parse_error(nots + "x }}").find("nesting deeper than"), std::string::npos);
}

TEST(TemplateRender, RaiseExceptionCarriesTheMessage) {
  const Template t =
      Template::parse("a\n{{ raise_exception('Roles must alternate: ' ~ n) }}", "t.jinja");
  try {
    t.render(json{{"n", 3}});
    FAIL() << "rendered";
  } catch (const TemplateError& e) {
    EXPECT_TRUE(e.raised());
    EXPECT_EQ(e.reason(), "Roles must alternate: 3");
    EXPECT_EQ(e.line(), 2);
    EXPECT_STREQ(e.what(), "chat template t.jinja line 2: Roles must alternate: 3");
  }
}

TEST(TemplateRender, PythonErrorsFailWithTheLine) {
  EXPECT_EQ(render_error("x\n{{ 'a' + none }}"),
            "chat template t.jinja line 2: TypeError: unsupported operand type(s) for +: 'str' and "
            "'NoneType'");
  EXPECT_EQ(render_error("{{ 'a' in none }}"),
            "chat template t.jinja line 1: TypeError: argument of type 'NoneType' is not iterable");
  EXPECT_EQ(render_error("{{ nothing.attr }}"),
            "chat template t.jinja line 1: UndefinedError: 'nothing' is undefined");
  EXPECT_EQ(render_error("{{ 'abc' | items }}"),
            "chat template t.jinja line 1: Can only get item pairs from a mapping.");
  EXPECT_EQ(render_error("{% for x in none %}{% endfor %}"),
            "chat template t.jinja line 1: TypeError: 'NoneType' object is not iterable");
  EXPECT_EQ(render_error("{% set d = {} %}{% set d.x = 1 %}"),
            "chat template t.jinja line 1: TemplateRuntimeError: cannot assign attribute on "
            "non-namespace object");
  EXPECT_EQ(render_error("{% set l = [] %}{{ l.append(1) }}"),
            "chat template t.jinja line 1: SecurityError: access to attribute 'append' of 'list' "
            "object is unsafe.");
  EXPECT_EQ(render_error("{{ 1 // 0 }}"),
            "chat template t.jinja line 1: ZeroDivisionError: integer division or modulo by zero");
  EXPECT_EQ(render_error("{{ 9223372036854775807 + 1 }}"),
            "chat template t.jinja line 1: OverflowError: integer result out of range");
}

TEST(TemplateLimits, RunawayRecursionEndsWithAnError) {
  const std::string err = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(err.find("RecursionError: nesting deeper than 200 levels"), std::string::npos) << err;
}

TEST(TemplateLimits, HugeLoopsEndWithAnError) {
  RenderLimits limits;
  limits.max_steps = 100000;
  const std::string err = render_error(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", limits);
  EXPECT_NE(err.find("the template runs more than 100000 steps"), std::string::npos) << err;
  EXPECT_NE(render_error("{{ range(1000000000) | length }}").find("Range too big"),
            std::string::npos);
}

TEST(TemplateLimits, CopyingLongStringsCountsAsWork) {
  RenderLimits limits;
  limits.max_steps = 100000;
  const std::string err = render_error(
      "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% set t = s[1:] ~ s[:5] %}{% endfor "
      "%}",
      limits);
  EXPECT_NE(err.find("the template runs more than 100000 steps"), std::string::npos) << err;
  // Reading a long string is no copy: its length, a character, a prefix test.
  EXPECT_EQ(render_error("{% set s = 'x' * 1000000 %}{% for i in range(200) %}"
                         "{{ s | length > 0 and s[0] == 'x' and s.startswith('x') }}{% endfor %}",
                         limits),
            "");
}

TEST(TemplateLimits, OutputAndStringSizesAreBounded) {
  RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  std::string err =
      render_error("{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxx' }}{% endfor %}", limits);
  EXPECT_NE(err.find("the output exceeds 1048576 bytes"), std::string::npos) << err;
  err = render_error("{{ 'x' * 10000000000 }}", limits);
  EXPECT_NE(err.find("MemoryError"), std::string::npos) << err;
  err = render_error(
      "{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% "
      "endfor %}",
      limits);
  EXPECT_NE(err.find("MemoryError"), std::string::npos) << err;
  EXPECT_EQ(render_error("{{ 'x' * 1000 }}", limits), "");
}

TEST(TemplateLimits, DeepValuesAndSelfReferenceEndWithAnError) {
  std::string err = render_error(
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor "
      "%}{{ ns.x }}");
  EXPECT_NE(err.find("ValueError: values nested deeper than 256 levels"), std::string::npos) << err;
  err = render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | string }}");
  EXPECT_NE(err.find("RecursionError"), std::string::npos) << err;
  json deep = json::array();
  for (int i = 0; i < 1000; ++i) deep = json::array({deep});
  err = render_error("{{ x | length }}", {}, json{{"x", deep}});
  EXPECT_NE(err.find("nested deeper than 256 levels"), std::string::npos) << err;
  EXPECT_EQ(render_error("{{ 1 ** 9223372036854775807 }}{{ (-1) ** 9223372036854775807 }}"), "");
  EXPECT_EQ(render_error("{{ [1, 2, 3][::-9223372036854775807] }}{{ range(0, 9223372036854775807, "
                         "4611686018427387904) }}"),
            "");
  EXPECT_NE(render_error("{{ (-9223372036854775807 - 1) | abs }}").find("OverflowError"),
            std::string::npos);
}

TEST(TemplateRender, StrftimeNowUsesTheGivenTime) {
  RenderOptions o;
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  o.now = tm;
  const Template t =
      Template::parse("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d') }}");
  EXPECT_EQ(t.render(json::object(), o), "26 Jul 2026|2026-07-26");
}

TEST(TemplateRender, UndefinedAndNoneVariablesFromJson) {
  const Template t = Template::parse(
      "[{{ missing }}][{{ nothing }}][{{ nothing is none }}][{{ missing is defined }}]");
  EXPECT_EQ(t.render(json{{"nothing", nullptr}}), "[][None][True][False]");
}

}  // namespace
}  // namespace tkv::tmpl
