#!/usr/bin/env python3
"""Prefix reuse through the OpenAI-compatible server, turbokv beside llama-server.

Runs four conversations against `turbokv serve` (and, with --llama-bin,
against llama-server on the same file, one at a time) and reports how many
prompt tokens each request reused and took to its first token:
  a) a 6-turn chat: each turn should reuse the whole conversation before it;
  b) two chats sharing a long system prompt, then diverging: the second
     should reuse the system prompt, its time to first token a fraction of
     the first's;
  c) regenerate turn 3 of the 6-turn chat: everything before it reused;
  d) b) again after the server is stopped (SIGTERM) and restarted on the
     same --cache-dir (turbokv) / the same --slot-save-path (llama-server
     keeps nothing across a restart unless a client saves slots);
  e) with --tools: an agent's tool loop, 6 requests with tool schemas, each
     the conversation so far ending with a tool result, the assistant turns
     being tool calls the client sends back (the template renders them, not
     the text the model generated): each request should reuse the previous
     request's prompt up to where the template's rendering of the new
     assistant turn departs from it (needs a template that renders tools:
     --chat-template FILE for turbokv, --jinja --chat-template-file FILE for
     llama-server).
turbokv's reuse is usage.prompt_tokens_details.cached_tokens, llama-server's
is prompt tokens minus timings.prompt_n (the tokens it processed).
A model without a chat template is served with --chat-template chatml
(llama-server falls back to chatml itself), unless --turbokv-args names one.

Usage: scripts/prefix-reuse.py -m MODEL.gguf [--turbokv BIN] [--turbokv-args ARGS]
                                [--llama-bin DIR] [--llama-args ARGS]
                                [--system-tokens N] [--turn-words N] [--tools]
                                [--reply-tokens N] [-t N] [--out FILE.md]
Python 3 standard library only.
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, argv, port, name):
        self.argv, self.port, self.name = argv, port, name
        self.log = tempfile.NamedTemporaryFile(prefix=name + "-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"prefix-reuse: {name} exited at start (log: {self.log.name})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        sys.exit(f"prefix-reuse: {name} did not become ready in 300 s (log: {self.log.name})")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def chat(self, messages, max_tokens, tools=None):
        body = {"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
                "stream": True, "stream_options": {"include_usage": True}}
        if tools:  # rendered by the template; "none": random output is not parsed for calls
            body["tools"] = tools
            body["tool_choice"] = "none"
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions",
                                     json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        t0 = time.time()
        ttft, text, usage, timings = None, "", None, None
        try:
            r = urllib.request.urlopen(req, timeout=600)
        except urllib.error.HTTPError as e:
            self.stop()
            sys.exit(f"prefix-reuse: {self.name} answered {e.code}: {e.read().decode()[:300]}")
        with r:
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                ev = json.loads(line[5:])
                if "error" in ev:
                    self.stop()
                    sys.exit(f"prefix-reuse: {self.name} failed a request of {len(messages)} "
                             f"messages: {json.dumps(ev)[:300]}")
                for ch in ev.get("choices", []):
                    piece = (ch.get("delta") or {}).get("content")
                    if piece:
                        if ttft is None:
                            ttft = time.time() - t0
                        text += piece
                usage = ev.get("usage") or usage
                timings = ev.get("timings") or timings
        if ttft is None:
            ttft = time.time() - t0
        prompt = usage["prompt_tokens"] if usage else None
        if timings and "prompt_n" in timings:  # llama-server
            cached = (prompt - timings["prompt_n"]) if prompt is not None else None
            processed = timings["prompt_n"]
        else:
            details = (usage or {}).get("prompt_tokens_details") or {}
            cached = details.get("cached_tokens", 0)
            processed = prompt - cached if prompt is not None else None
        return {"text": text, "prompt": prompt, "cached": cached, "processed": processed,
                "ttft": ttft, "completion": (usage or {}).get("completion_tokens")}


REPLY_TOKENS = 0  # --reply-tokens: every reply's max_tokens (0: 16 in a and c, 8 elsewhere)

WORDS = ("river stone lantern orchard violet copper meadow harbor whisper canyon ember "
         "glacier saffron thunder willow marble falcon quartz timber velvet").split()


def system_prompt(n_words):
    return "You are a careful assistant. " + " ".join(
        f"{WORDS[i % len(WORDS)]}-{i}" for i in range(n_words))


def conversation_a(srv, system, rows, turn_words):
    msgs = [{"role": "system", "content": system}]
    turns = []
    before = 0
    for turn in range(6):
        filler = " ".join(f"{WORDS[(turn * 3 + i) % len(WORDS)]}{i}" for i in range(turn_words))
        msgs.append({"role": "user",
                     "content": f"Turn {turn + 1}: describe item {turn * 7}. Notes: {filler}"})
        r = srv.chat(msgs, REPLY_TOKENS or 16)
        rows.append((srv.name, "a", f"turn {turn + 1}", r, before))
        msgs.append({"role": "assistant", "content": r["text"]})
        before = r["prompt"] + (r["completion"] or 0)
        turns.append(list(msgs))
    return turns


def conversation_c(srv, turns, rows):
    # turns[1] ends with turn 2's assistant reply; turn 3's user message is
    # the next one: regenerate turn 3's answer from there.
    history = turns[2][:-1]
    r = srv.chat(history, REPLY_TOKENS or 16)
    rows.append((srv.name, "c", "regenerate turn 3", r, None))


def conversation_b(srv, system, rows, tag, label_suffix=""):
    for who in ("first", "second"):
        msgs = [{"role": "system", "content": system},
                {"role": "user", "content": f"I am the {who} user{label_suffix}: say hello."}]
        r = srv.chat(msgs, REPLY_TOKENS or 8)
        rows.append((srv.name, tag, f"{who} chat{label_suffix}", r, None))


TOOLS = [
    {"type": "function", "function": {
        "name": "search", "description": "Search the web and return the top results.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "read_page", "description": "Read a web page.",
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}},
                       "required": ["url"]}}},
]


def conversation_e(srv, system, rows):
    msgs = [{"role": "system", "content": system},
            {"role": "user", "content": "When was the first transatlantic cable laid?"}]
    before = 0
    for step in range(6):
        r = srv.chat(msgs, REPLY_TOKENS or 8, TOOLS)
        rows.append((srv.name, "e", f"tool step {step + 1}", r, before or None))
        before = r["prompt"]
        name, arg = (("search", "query"), ("read_page", "url"))[step % 2]
        msgs.append({"role": "assistant", "content": "", "tool_calls": [{
            "id": f"call_{step}", "type": "function",
            "function": {"name": name, "arguments": json.dumps({arg: f"cable history {step}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{step}",
                     "content": " ".join(f"{WORDS[(step * 5 + i) % len(WORDS)]}{step}"
                                         for i in range(60))})


def run_engine(name, argv_of, system, rows, turn_words, tools=False):
    port = free_port()
    srv = Server(argv_of(port), port, name)
    try:
        turns = conversation_a(srv, system, rows, turn_words)
        conversation_c(srv, turns, rows)
        conversation_b(srv, system.replace("careful", "patient"), rows, "b")
        if tools:
            conversation_e(srv, system.replace("careful", "diligent"), rows)
    finally:
        srv.stop()
    port = free_port()
    srv = Server(argv_of(port), port, name)
    try:
        conversation_b(srv, system.replace("careful", "patient"), rows, "d", " after restart")
    finally:
        srv.stop()


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def has_chat_template(turbokv, model):
    """Whether turbokv finds a chat template in the model (`turbokv template`
    renders one message; a model without one fails saying so)."""
    r = subprocess.run([turbokv, "template", "-m", model, "--messages", "-"],
                       input='[{"role": "user", "content": "x"}]', capture_output=True, text=True)
    if r.returncode == 0:
        return True
    if "no chat template" in r.stderr:
        return False
    sys.exit(f"prefix-reuse: {turbokv} template failed: {r.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--turbokv", default="build/release/apps/turbokv/turbokv")
    ap.add_argument("--turbokv-args", default="", help="more turbokv serve arguments")
    ap.add_argument("--llama-bin", default="")
    ap.add_argument("--llama-args", default="", help="more llama-server arguments")
    ap.add_argument("--system-tokens", type=int, default=3000,
                    help="about this many tokens of shared system prompt (default 3000)")
    ap.add_argument("--turn-words", type=int, default=0,
                    help="filler words in each turn's message (long turns put turn 3 far back)")
    ap.add_argument("--tools", action="store_true",
                    help="also run e), a tool loop (the template must render tools)")
    ap.add_argument("--reply-tokens", type=int, default=0,
                    help="max_tokens of every reply (llama-server --jinja fails a request whose "
                         "random output its format parser rejects; 1 avoids most)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    global REPLY_TOKENS
    REPLY_TOKENS = a.reply_tokens
    if not os.path.exists(a.model):
        sys.exit(f"prefix-reuse: no such model file: {a.model}")
    tk_args = a.turbokv_args.split()
    if "--chat-template" not in tk_args and not has_chat_template(a.turbokv, a.model):
        tk_args += ["--chat-template", "chatml"]
    system = system_prompt(a.system_tokens // 3)
    rows = []
    work = tempfile.mkdtemp(prefix="prefix-reuse-")
    try:
        tk_cache = os.path.join(work, "turbokv-cache")
        run_engine("turbokv", lambda port: [a.turbokv, "serve", "-m", a.model, "--port", str(port),
                                            "-t", str(a.threads), "--cache-dir", tk_cache,
                                            "-c", "16384"] + tk_args,
                   system, rows, a.turn_words, a.tools)
        if a.llama_bin:
            slots = os.path.join(work, "llama-slots")
            os.makedirs(slots)
            run_engine("llama-server",
                       lambda port: [os.path.join(a.llama_bin, "llama-server"), "-m", a.model,
                                     "--port", str(port), "-t", str(a.threads), "-np", "1",
                                     "-c", "16384", "--slot-save-path", slots]
                       + a.llama_args.split(),
                       system, rows, a.turn_words, a.tools)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    cpu = sh("lscpu | sed -n 's/^Model name: *//p'")
    out = ["# prefix reuse through the server", "",
           f"- command: `{' '.join(sys.argv)}`",
           f"- machine: {cpu}, {os.cpu_count()} CPUs",
           f"- commit: {sh('git rev-parse --short=12 HEAD')}",
           f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
           f"- model: {os.path.basename(a.model)}, threads {a.threads}", "",
           "| engine | case | request | prompt tokens | reused | processed | conversation before | TTFT s |",
           "|---|---|---|---|---|---|---|---|"]
    for engine, case, label, r, before in rows:
        out.append(f"| {engine} | {case} | {label} | {r['prompt']} | {r['cached']} | "
                   f"{r['processed']} | {'' if before is None else before} | {r['ttft']:.3f} |")
    text = "\n".join(out) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
