// Writes the seed inputs of the fuzz targets into DIR/<target>/ (the
// corpus kept in tests/fuzz/corpus/ was made with it):
//   make_seeds DIR
// Seeds are small valid inputs, so that the fuzzers start from files that
// reach deep into each parser instead of being rejected at the first byte.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "session_fuzz.h"

namespace fs = std::filesystem;

namespace {

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) tkv::fail("cannot write ", (dir / name).string());
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const fs::path root(argv[1]);
  try {
    // gguf: a whole (tiny) llama model as synth writes it.
    tkv::model::SynthSpec spec;
    spec.preset = "fuzz";
    spec.n_embd = 32;
    spec.n_layers = 1;
    spec.n_heads = 2;
    spec.n_kv_heads = 1;
    spec.head_dim = 16;
    spec.n_ff = 64;
    spec.n_vocab = 260;
    tkv::gguf::GgufWriter w;
    tkv::model::build_synth_model(spec, {}, w);
    const std::vector<uint8_t> model = w.to_bytes();
    put(root / "gguf", "seed-tiny-llama", std::string(model.begin(), model.end()));

    // session: an f16 and a k4v2 cache with pages, sinks and a residual ring.
    for (uint8_t sel : {uint8_t(0), uint8_t(1)}) {
      auto cache = tkv::fuzz::make_session_cache(sel);
      tkv::fuzz::fill_session_cache(*cache, 90, 7);
      const std::string tmp = (fs::temp_directory_path() / "turbokv-seed-session").string();
      cache->save(tmp, tkv::fuzz::kSessionFingerprint);
      put(root / "session", sel ? "seed-v2-k4v2" : "seed-v2-f16",  // session format 2

          std::string(1, char(sel)) + read_all(tmp));
      fs::remove(tmp);
    }

    // tokenizer: selector byte (vocabulary, add_special 0x40, parse_special 0x80), then text.
    const std::vector<std::string> texts = {
        "Hello world, this is a test.",
        "<|im_start|>user\nhi there<|im_end|>\n<s>[INST] x [/INST]",
        "h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82 tab\there",
        "12345 3.14159 0x1f  --flag=value\r\n",
        "   leading spaces and\n\n\nnewlines   ",
        "\xff\xfe invalid \xc3 utf-8 \x80"};
    for (size_t i = 0; i < texts.size(); ++i)
      put(root / "tokenizer", "seed-" + std::to_string(i),
          std::string(1, char(i * 37 + (i % 2 ? 0xc0 : 0x00))) + texts[i]);

    // template: Jinja source, then 0 and the variables as JSON (or none:
    // the target's default conversation).
    const std::string conv =
        R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"q"},)"
        R"({"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}],)"
        R"("tools":[{"type":"function","function":{"name":"f","parameters":{"b":[1.5,true,null]}}}],)"
        R"("add_generation_prompt":true,"enable_thinking":false})";
    const std::vector<std::string> templates = {
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        std::string(
            "{{ bos_token }}{%- for m in messages if m.role != 'system' -%}\n  {{- loop.index }}:"
            "{{ m.content | trim | upper }}{% if not loop.last %},{% endif %}\n{%- else %}none{% "
            "endfor %}"),
        std::string(
            "{% set ns = namespace(n=0) %}{% for k, v in tools[0].function.parameters.items() %}"
            "{% set ns.n = ns.n + 1 %}{{ k }}={{ v | tojson(indent=2) }}{% endfor %}{{ ns.n }}") +
            '\0' + conv,
        std::string(
            "{% macro f(x, d='-') %}[{{ x ~ d }}]{% endmacro %}{{ f(1) }}{{ f('a', d=2) }}"
            "{% call f(3) %}c{% endcall %}{{ raise_exception('stop') if messages | length > 5 }}") +
            '\0' + conv,
        std::string(
            "{# c #}{% raw %}{{ x }}{% endraw %}{{ 'a b'.split() | join(',') }}{{ [3,1,2] | sort }}"
            "{{ {'b':1,'a':2} | dictsort }}{{ 7 // 2 }}{{ 1.5e3 }}{{ 'x'[::-1] }}{{ none is none "
            "}}"),
        std::string("{%- if enable_thinking is defined and not enable_thinking "
                    "-%}<think>\n\n</think>{%- endif -%}"
                    "{{ strftime_now('%Y-%m-%d') }}{% for i in range(3) %}{% if i == 1 %}{% break "
                    "%}{% endif %}"
                    "{{ i }}{% endfor %}") +
            '\0' + conv,
    };
    for (size_t i = 0; i < templates.size(); ++i)
      put(root / "template", "seed-" + std::to_string(i), templates[i]);

    // server_request: request bodies (both parsers read every input).
    const std::vector<std::string> requests = {
        R"({"model":"m","messages":[{"role":"system","content":"Be terse."},)"
        R"({"role":"user","content":"Hi"}],"max_tokens":16,"temperature":0.7,"top_p":0.9,)"
        R"("top_k":40,"min_p":0.05,"seed":42,"stop":["\n\n","END"],"stream":true,)"
        R"("stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":2})",
        R"({"messages":[{"role":"developer","content":[{"type":"text","text":"a"},)"
        R"({"type":"image_url","image_url":{"url":"x"}}]},{"role":"assistant","content":null}],)"
        R"("tools":[],"n":1,"presence_penalty":0,"user":"u","metadata":{"k":"v"}})",
        R"({"model":"m","prompt":"Once upon a time","max_tokens":8,"logprobs":3,"echo":false,)"
        R"("stop":"\n","frequency_penalty":0.0,"seed":-1})",
        R"({"prompt":[[1,2,3]],"stream":false,"best_of":1,"suffix":"","temperature":0})",
        R"({"prompt":["caf\u00e9 \ud83d\ude42"],"max_completion_tokens":1e3,"x":[{"y":null}]})",
        R"({"messages":[{"role":"tool","content":"x","tool_call_id":"1"}],"response_format":)"
        R"({"type":"json_object"},"logit_bias":{"5":1}})"};
    for (size_t i = 0; i < requests.size(); ++i)
      put(root / "server_request", "seed-" + std::to_string(i), requests[i]);

    // gbnf and json_schema: grammars and schemas using every construct.
    const std::vector<std::string> grammars = {
        "root ::= \"{\" ws pair (\",\" ws pair)* \"}\"  # an object\n"
        "pair ::= [a-z_]+ \":\" ws ( \"true\" | \"false\" | num )\n"
        "num ::= \"-\"? [0-9]{1,3} (\".\" [0-9]+)?\nws ::= [ \\t\\n]*\n",
        "root ::= (\n  [^\"\\\\\\x00-\\x1F] | \"\\u00e9\\U0001F600\"\n){2,} . item?\n"
        "item ::= \"(\" root \")\" | [\\[\\]\\-]{,4}\n"};
    for (size_t i = 0; i < grammars.size(); ++i)
      put(root / "gbnf", "seed-" + std::to_string(i), grammars[i]);
    const std::vector<std::string> schemas = {
        R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":8},)"
        R"("n":{"type":["integer","null"]},"x":{"type":"number"},"ok":{"type":"boolean"},)"
        R"("tags":{"type":"array","items":{"enum":["a",1,null]},"minItems":1,"maxItems":3},)"
        R"("t":{"type":"array","prefixItems":[{"const":{"k":[1]}},{"type":"null"}],"items":false}},)"
        R"("required":["name"],"additionalProperties":{"type":"string","format":"date-time"}})",
        R"({"$defs":{"node":{"anyOf":[{"type":"string","pattern":"^[A-Z]{2}-\\d+(x|yz)?$"},)"
        R"({"type":"array","items":{"$ref":"#/$defs/node"}}]}},"$ref":"#/$defs/node",)"
        R"("title":"t","description":"d"})",
        R"({"oneOf":[{"type":"string","format":"uuid"},{"type":"object","nullable":true}]})"};
    for (size_t i = 0; i < schemas.size(); ++i)
      put(root / "json_schema", "seed-" + std::to_string(i), schemas[i]);

    // reply_parser: the first byte is family (low 3 bits) | reasoning 8 |
    // tools 16 | prompt opens reasoning 32 | piece size - 1 (top 2 bits).
    auto reply = [](int head, const std::string& text) {
      return std::string(1, char(head)) + text;
    };
    const std::vector<std::string> replies = {
        reply(1 | 8 | 16,
              "<think>\nA.\n</think>\n\nHi <tool_call>\n{\"name\": \"f\", "
              "\"arguments\": {\"a\": [1, \"\u00e9\"]}}\n</tool_call>"),
        reply(2 | 8 | 16 | 32 | 64,
              "plan\n</think>\n<tool_call>\n<function=f>\n<parameter=n>\n42\n</parameter>\n"
              "<parameter=s>\ntext\n</parameter>\n</function>\n</tool_call>"),
        reply(3 | 16, R"(<|python_tag|>{"name": "f", "parameters": {"q": "\"}"}})"),
        reply(4 | 16 | 128, R"(ok[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[CALL_ID]x[ARGS]{})"),
        reply(5 | 16, R"(<|channel|>analysis<|message|>t<|end|><|start|>assistant<|channel|>)"
                      R"(commentary to=functions.f <|constrain|>json<|message|>{"a":1}<|call|>)"),
        reply(6 | 8 | 16,
              "<think>x</think><\uff5ctool\u2581calls\u2581begin\uff5c>"
              "<\uff5ctool\u2581call\u2581begin\uff5c>function<\uff5ctool\u2581sep\uff5c>f"
              "\n```json\n{}\n```<\uff5ctool\u2581call\u2581end\uff5c>"
              "<\uff5ctool\u2581calls\u2581end\uff5c>"),
        reply(7 | 8 | 16,
              R"(<|channel>thought)"
              "\n"
              R"(h<channel|><|tool_call>call:f{a:<|"|>x<|"|>,b:[1,true],c:{d:null}}<tool_call|>)"),
    };
    for (size_t i = 0; i < replies.size(); ++i)
      put(root / "reply_parser", "seed-" + std::to_string(i), replies[i]);
  } catch (const tkv::Error& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
