// Executes a Program: scopes (Jinja2's: a for-loop iteration, a macro call
// and a with block are scopes of their own, if is not), output, limits.
// Filters, tests, methods and globals live in builtins.cc / filters.cc.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/ast.h"
#include "template/template.h"
#include "template/value.h"

namespace tkv::tmpl {

struct Frame {
  explicit Frame(std::shared_ptr<Frame> p) : parent(std::move(p)) {}
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;
  const Value* lookup(std::string_view name) const;
  void set(const std::string& name, Value v);
};

class Renderer {
 public:
  Renderer(const RenderOptions& options, std::shared_ptr<Frame> globals);
  // Empties the namespaces it made: a namespace may hold itself (or a list
  // holding it), and the cycle would keep it alive after the render.
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string render(const Body& body);
  int line() const { return line_; }
  const RenderOptions& options() const { return options_; }

  // Called by builtins.
  Value call(const Value& callee, const Args& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  void check_size(size_t bytes) const;  // a string of this size may be built
  void step();                          // one unit of work against max_steps
  Value make_namespace();               // an empty namespace, emptied again at the end

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec(const Body& body, const std::shared_ptr<Frame>& frame);
  Flow exec(const Stmt& s, const std::shared_ptr<Frame>& frame);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Frame>& frame);
  Flow exec_if(const Stmt& s, const std::shared_ptr<Frame>& frame);
  void exec_set(const Stmt& s, const std::shared_ptr<Frame>& frame);
  void exec_call_block(const Stmt& s, const std::shared_ptr<Frame>& frame);
  std::string capture(const Body& body, const std::shared_ptr<Frame>& frame);
  void emit(std::string_view text);

  Value eval(const Expr& e, const std::shared_ptr<Frame>& frame);
  Value eval_binary(const Expr& e, const std::shared_ptr<Frame>& frame);
  Value eval_call(const Expr& e, const std::shared_ptr<Frame>& frame);
  Args eval_args(const Expr& e, size_t first, const std::shared_ptr<Frame>& frame);
  Value macro(const Stmt& m, const std::shared_ptr<Frame>& closure, const std::string& name);
  Value call_macro(const Stmt& m, const std::shared_ptr<Frame>& closure, const Args& args);
  std::vector<Value> iterate(const Value& v);
  void bind(Frame& frame, const std::vector<std::string>& targets, const Value& v);

  struct DepthGuard {
    explicit DepthGuard(Renderer& r);
    ~DepthGuard() { --r_.depth_; }
    Renderer& r_;
  };

  const RenderOptions& options_;
  std::shared_ptr<Frame> globals_;
  std::string* out_ = nullptr;
  size_t produced_ = 0;
  uint64_t steps_ = 0;
  uint64_t bytes_at_start_ = string_bytes_made();
  int depth_ = 0;
  int line_ = 0;
  Value block_input_;  // the body of a {% filter %} block
  // Frames that macros and call blocks close over: kept here (the callables
  // hold weak references) so that a macro stored in its own frame is no cycle.
  std::vector<std::shared_ptr<Frame>> closures_;
  std::vector<Value> namespaces_;
};

// Python-style arithmetic and comparison on two values (op: + - * / // % ** ~).
Value binary_op(Renderer& r, const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// Elements of a value the way a for loop sees them (dict: its keys).
std::vector<Value> iterate_value(const Value& v);

// Whether a filter / test of that name exists (the parser refuses others).
bool known_filter(const std::string& name);
bool known_test(const std::string& name);
Value apply_filter(Renderer& r, const std::string& name, const Value& v, const Args& args);
bool apply_test(Renderer& r, const std::string& name, const Value& v, const Args& args);
// A method of a string, dict or list, bound to it ("strip", "get", "items"...);
// undefined when the object has none by that name.
Value method(const Value& obj, const std::string& name);
// range, namespace, dict, raise_exception, strftime_now.
void add_globals(Frame& globals);

}  // namespace tkv::tmpl
