#include "template/renderer.h"

#include <algorithm>

namespace tkv::tmpl {

const Value* Frame::lookup(std::string_view name) const {
  for (const Frame* f = this; f; f = f->parent.get()) {
    for (const auto& [k, v] : f->vars)
      if (k == name) return &v;
  }
  return nullptr;
}

void Frame::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

Renderer::DepthGuard::DepthGuard(Renderer& r) : r_(r) {
  if (++r_.depth_ > r_.options_.limits.max_depth) {
    --r_.depth_;
    fail_render("RecursionError: nesting deeper than " +
                std::to_string(r_.options_.limits.max_depth) + " levels (macro recursion?)");
  }
}

Renderer::Renderer(const RenderOptions& options, std::shared_ptr<Frame> globals)
    : options_(options), globals_(std::move(globals)) {}

Renderer::~Renderer() {
  for (const Value& ns : namespaces_) ns.mutable_dict().items.clear();
}

Value Renderer::make_namespace() {
  namespaces_.push_back(Value::name_space());
  return namespaces_.back();
}

std::string Renderer::render(const Body& body) {
  std::string out;
  out_ = &out;
  exec(body, std::make_shared<Frame>(globals_));
  return out;
}

void Renderer::check_size(size_t bytes) const {
  if (bytes > options_.limits.max_output_bytes ||
      produced_ + bytes > options_.limits.max_output_bytes * 2)
    fail_render("MemoryError: the template builds more than " +
                std::to_string(options_.limits.max_output_bytes) + " bytes of text");
}

void Renderer::step() {
  // Building text is work too: a step per 256 bytes of strings made, so a
  // loop that copies a long string each time ends like any long loop.
  if (++steps_ + (string_bytes_made() - bytes_at_start_) / 256 > options_.limits.max_steps)
    fail_render("the template runs more than " + std::to_string(options_.limits.max_steps) +
                " steps (an endless or huge loop?)");
}

void Renderer::emit(std::string_view text) {
  produced_ += text.size();
  if (produced_ > options_.limits.max_output_bytes)
    fail_render("the output exceeds " + std::to_string(options_.limits.max_output_bytes) +
                " bytes");
  out_->append(text);
}

std::string Renderer::capture(const Body& body, const std::shared_ptr<Frame>& frame) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec(body, frame);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Renderer::Flow Renderer::exec(const Body& body, const std::shared_ptr<Frame>& frame) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s, frame);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  line_ = s.line;
  step();
  switch (s.k) {
    case Stmt::K::kText:
      emit(s.text);
      break;
    case Stmt::K::kOutput:
      emit(eval(*s.expr, frame).to_string());
      break;
    case Stmt::K::kIf:
      return exec_if(s, frame);
    case Stmt::K::kFor:
      return exec_for(s, frame);
    case Stmt::K::kSet:
    case Stmt::K::kSetBlock:
      exec_set(s, frame);
      break;
    case Stmt::K::kMacro:
      frame->set(s.text, macro(s, frame, s.text));
      break;
    case Stmt::K::kCallBlock:
      exec_call_block(s, frame);
      break;
    case Stmt::K::kFilterBlock: {
      Value saved = block_input_;
      block_input_ = Value::string(capture(s.body, frame));
      const Value v = eval(*s.filter, frame);
      block_input_ = saved;
      emit(v.to_string());
      break;
    }
    case Stmt::K::kWith: {
      auto inner = std::make_shared<Frame>(frame);
      for (size_t i = 0; i < s.targets.size(); ++i)
        inner->set(s.targets[i], eval(*s.values[i], frame));
      return exec(s.body, inner);
    }
    case Stmt::K::kBlock:
      return exec(s.body, frame);
    case Stmt::K::kBreak:
      return Flow::kBreak;
    case Stmt::K::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec_if(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  for (const auto& [cond, body] : s.branches) {
    if (cond) line_ = cond->line;
    if (!cond || eval(*cond, frame).truthy()) return exec(body, frame);
  }
  return Flow::kNormal;
}

void Renderer::bind(Frame& frame, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    frame.set(targets[0], v);
    return;
  }
  const std::vector<Value> parts = iterate_value(v);
  if (parts.size() != targets.size())
    fail_render("ValueError: cannot unpack " + std::to_string(parts.size()) + " values into " +
                std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < targets.size(); ++i) frame.set(targets[i], parts[i]);
}

Renderer::Flow Renderer::exec_for(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  std::vector<Value> items = iterate_value(eval(*s.expr, frame));
  if (s.filter) {
    std::vector<Value> kept;
    for (Value& v : items) {
      step();
      auto probe = std::make_shared<Frame>(frame);
      bind(*probe, s.targets, v);
      if (eval(*s.filter, probe).truthy()) kept.push_back(std::move(v));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, frame);
  const int64_t n = int64_t(items.size());
  for (int64_t i = 0; i < n; ++i) {
    step();
    auto inner = std::make_shared<Frame>(frame);
    Value loop = Value::dict();
    Dict& d = loop.mutable_dict();
    d.set(Value::string("index"), Value::integer(i + 1));
    d.set(Value::string("index0"), Value::integer(i));
    d.set(Value::string("revindex"), Value::integer(n - i));
    d.set(Value::string("revindex0"), Value::integer(n - i - 1));
    d.set(Value::string("first"), Value::boolean(i == 0));
    d.set(Value::string("last"), Value::boolean(i == n - 1));
    d.set(Value::string("length"), Value::integer(n));
    d.set(Value::string("depth"), Value::integer(1));
    d.set(Value::string("depth0"), Value::integer(0));
    if (i > 0) d.set(Value::string("previtem"), items[size_t(i - 1)]);
    if (i + 1 < n) d.set(Value::string("nextitem"), items[size_t(i + 1)]);
    d.set(Value::string("cycle"), Value::callable("cycle", [i](Renderer&, const Args& a) {
            if (a.positional.empty()) fail_render("TypeError: no items for cycling given");
            return a.positional[size_t(i) % a.positional.size()];
          }));
    inner->set("loop", std::move(loop));
    bind(*inner, s.targets, items[size_t(i)]);
    if (exec(s.body, inner) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Renderer::exec_set(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  Value v;
  if (s.k == Stmt::K::kSetBlock) {
    v = Value::string(capture(s.body, frame));
    if (s.filter) {
      Value saved = block_input_;
      block_input_ = v;
      v = eval(*s.filter, frame);
      block_input_ = saved;
    }
  } else {
    v = eval(*s.expr, frame);
  }
  if (s.attr.empty()) {
    bind(*frame, s.targets, v);
    return;
  }
  const Value* ns = frame->lookup(s.targets[0]);
  if (!ns || ns->kind() != Kind::kNamespace)
    fail_render("TemplateRuntimeError: cannot assign attribute on non-namespace object");
  ns->mutable_dict().set(Value::string(s.attr), std::move(v));
}

Value Renderer::macro(const Stmt& m, const std::shared_ptr<Frame>& closure,
                      const std::string& name) {
  // The renderer keeps the defining frame alive (the callable holds a weak
  // reference: the frame holds the callable); the program outlives the render.
  closures_.push_back(closure);
  const Stmt* def = &m;
  std::weak_ptr<Frame> frame = closure;
  return Value::callable(name, [def, frame](Renderer& r, const Args& a) {
    return r.call_macro(*def, frame.lock(), a);
  });
}

Value Renderer::call_macro(const Stmt& m, const std::shared_ptr<Frame>& closure, const Args& args) {
  DepthGuard guard(*this);
  step();
  auto frame = std::make_shared<Frame>(closure);
  std::vector<Value> varargs;
  for (size_t i = m.params.size(); i < args.positional.size(); ++i)
    varargs.push_back(args.positional[i]);
  Value kwargs = Value::dict();
  for (const auto& keyword : args.keywords) {
    const std::string& k = keyword.first;
    const Value& v = keyword.second;
    const bool is_param =
        std::any_of(m.params.begin(), m.params.end(), [&](const Param& p) { return p.name == k; });
    if (k == "caller") {
      frame->set("caller", v);
    } else if (!is_param) {
      kwargs.mutable_dict().set(Value::string(k), v);
    }
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    const Param& p = m.params[i];
    const Value* given = args.get(i, p.name);
    if (given) {
      frame->set(p.name, *given);
    } else if (p.default_value) {
      frame->set(p.name, eval(*p.default_value, frame));
    } else {
      frame->set(p.name, Value::undefined("'" + p.name + "' is undefined"));
    }
  }
  frame->set("varargs", Value::list(std::move(varargs)));
  frame->set("kwargs", std::move(kwargs));
  const int saved_line = line_;
  std::string text = capture(m.body, frame);
  line_ = saved_line;
  return Value::string(std::move(text));
}

void Renderer::exec_call_block(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  const Stmt* def = &s;
  closures_.push_back(frame);
  std::weak_ptr<Frame> weak = frame;
  Value caller = Value::callable("caller", [def, weak](Renderer& r, const Args& a) {
    return r.call_macro(*def, weak.lock(), a);
  });
  const Expr& call = *s.expr;
  Value callee = eval(*call.args[0], frame);
  Args args = eval_args(call, 1, frame);
  args.keywords.emplace_back("caller", std::move(caller));
  emit(this->call(callee, args).to_string());
}

Value Renderer::call(const Value& callee, const Args& args) {
  if (callee.is_undefined()) fail_render("UndefinedError: " + callee.str());
  if (callee.kind() != Kind::kCallable)
    fail_render("TypeError: '" + callee.type_name() + "' object is not callable");
  step();
  return callee.callable_ref().fn(*this, args);
}

Args Renderer::eval_args(const Expr& e, size_t first, const std::shared_ptr<Frame>& frame) {
  Args a;
  for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i], frame));
  for (const auto& [k, v] : e.kwargs) a.keywords.emplace_back(k, eval(*v, frame));
  return a;
}

}  // namespace tkv::tmpl
