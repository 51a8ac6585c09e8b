"""The inspector panel's cost, each figure beside a peer in the same run.

1. Kernel side: decode tokens/s of the same greedy turn through `Chat.send` alone and through `ChatWidget.ask`
   (the relay thread batching events every 40 ms and JSON-encoding them as the comm would), alternating.
2. A session: `--session-turns` turns (20) of `--session-tokens` tokens (48) each through `ChatWidget.ask`, with
   everything the kernel sends the front end counted as the comm would carry it (the custom messages and the
   traits' updates, JSON as jupyter_client packs it, buffers included), the static copy's display updates beside
   it, what a view that opens afterwards gets (a page reload: the widget's state, then whatever the view asks for),
   and the panel's memory in the kernel: what tracemalloc holds that was allocated with the panel's code on the
   stack (its traits, rows, the events it keeps, accounts, the static copy), and the process's RSS growth.
3. Browser side (Debian's chromium, headless, through Playwright): the harness page (js/test/harness.html) streams
   a 500-token answer in 40 ms batches while a requestAnimationFrame loop records frame gaps; then the heatmap of
   an n × n float16 matrix, n = 1,000, 2,000 and 4,000, our renderer (`data-render-ms`) against a straightforward
   per-pixel renderer (float16 decoded and coloured pixel by pixel, no lookup table) on the same data.

    python benchmarks/bench_panel.py [--runs 3] [--tokens 200] [--skip-kernel] [--skip-browser]
                                     [--session-turns 20] [--session-tokens 48] [--skip-session] [--tiny]

`--tiny` runs the kernel parts on the tests' tiny random model instead of the default one (SmolLM2-135M).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PROMPT = "Write a short story about a lighthouse keeper and a storm."
QUESTIONS = (
    "What is the capital of France?", "Name three fruits.", "Why is the sky blue?", "What is 12 times 7?",
    "Write a haiku about the sea.", "Who wrote Hamlet?", "What do bees make?", "How many legs has a spider?",
    "Give me a synonym for happy.", "What is the boiling point of water?",
)  # fmt: skip

FRAMES = """
window.__frames = []; let last = performance.now();
const tick = (t) => { window.__frames.push(t - last); last = t;
  if (!document.body || document.body.getAttribute('data-done') !== '1') requestAnimationFrame(tick); };
requestAnimationFrame(tick);
"""

NAIVE = """([n]) => {
  const bits = new Uint16Array(n * n);
  for (let r = 0; r < n; r++) for (let c = 0; c <= r; c++) bits[r * n + c] = 0x2000 + ((r * 31 + c * 17) % 0x1c00);
  const started = performance.now();
  const canvas = document.createElement('canvas'); canvas.width = n; canvas.height = n;
  const ctx = canvas.getContext('2d'); const image = ctx.createImageData(n, n); const px = image.data;
  const half = (h) => { const s = h >> 15 ? -1 : 1, e = (h >> 10) & 31, f = h & 1023;
    if (e === 0) return s * 2 ** -14 * (f / 1024);
    return e === 31 ? (f ? NaN : s * Infinity) : s * 2 ** (e - 15) * (1 + f / 1024); };
  let max = 0; for (let i = 0; i < bits.length; i++) max = Math.max(max, half(bits[i]));
  for (let i = 0; i < bits.length; i++) {
    const v = Math.sqrt(half(bits[i]) / max);
    px[4 * i] = 255 - 200 * v; px[4 * i + 1] = 255 - 120 * v; px[4 * i + 2] = 255 - 60 * v; px[4 * i + 3] = 255;
  }
  ctx.putImageData(image, 0, 0);
  return performance.now() - started;
}"""


def kernel_side(runs: int, tokens: int, model: Any = None) -> dict:
    from jupyter_chatflow.frontends.panel.widget import ChatWidget
    from jupyter_chatflow.pipeline.chat import Chat

    chat = Chat(session="bench-panel", new=True, persist=False, model=model)
    panel = ChatWidget(chat)
    sent: list[int] = []
    panel.send = lambda content, buffers=None: sent.append(len(json.dumps(content)))  # type: ignore[method-assign]
    options = {"temperature": 0.0, "max_tokens": tokens, "ignore_eos": True, "memory": False}
    rates: dict[str, list[float]] = {"Chat.send": [], "ChatWidget.ask": []}
    chat.send(PROMPT, **options).events()  # compile and warm up
    for _ in range(runs):
        chat.reset()
        rates["Chat.send"].append(chat.send(PROMPT, **options).terminal().tokens_per_s)
        chat.reset()
        sent.clear()
        response = panel.ask(PROMPT, **options)
        panel.wait()
        rates["ChatWidget.ask"].append(response.terminal().tokens_per_s)
    return {"rates": {k: statistics.median(v) for k, v in rates.items()}, "messages": len(sent),
            "bytes": sum(sent)}  # fmt: skip


class Wire:
    """What a widget sends its front end, counted as the comm carries it: each message's JSON as jupyter_client
    packs it (UTF-8, default separators) plus its binary buffers, by kind ("events", "turns", …)."""

    def __init__(self, widget: Any):
        self.messages: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        send = widget._send

        def counted(msg: dict, buffers: list | None = None) -> None:
            size = len(json.dumps(msg, ensure_ascii=False, allow_nan=False).encode("utf8", "surrogateescape"))
            size += sum(len(memoryview(b).cast("B")) for b in buffers or [])
            kind = msg["content"].get("type", "?") if msg["method"] == "custom" else ",".join(sorted(msg["state"]))
            self.messages[kind] += 1
            self.bytes[kind] += size
            if kind == "events" and msg["content"].get("account"):  # (of which: the turn's account)
                self.messages["events: account"] += 1
                self.bytes["events: account"] += len(json.dumps(msg["content"]["account"], ensure_ascii=False).encode())
            send(msg, buffers)

        widget._send = counted


class CopyDisplay:
    """A display handle that counts the static copy's updates (each carries the whole copy to the front end)."""

    def __init__(self) -> None:
        self.updates = self.bytes = 0

    def update(self, data: dict, metadata: dict | None = None, raw: bool = False) -> None:
        self.updates += 1
        self.bytes += len(json.dumps({"data": data, "metadata": metadata or {}}, ensure_ascii=False).encode())


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def session_side(turns: int, tokens: int, model: Any = None) -> dict:
    """`turns` turns through one panel: the traffic to its front end, what a reloaded view gets, its memory."""
    from jupyter_chatflow.frontends.panel.widget import ChatWidget
    from jupyter_chatflow.pipeline.chat import Chat

    options = {"temperature": 0.0, "max_tokens": tokens, "memory": False}
    chat = Chat(session="bench-panel-session", new=True, persist=False, model=model)
    chat.send("Hello", **options).events()  # load and compile before anything is counted
    chat.new_session()
    rss = _rss_mib()
    tracemalloc.start(64)
    panel = ChatWidget(chat)
    wire, copy = Wire(panel), CopyDisplay()
    panel._displays.append(copy)
    started, answered = time.perf_counter(), 0
    for k in range(turns):
        answered += len(panel.ask(QUESTIONS[k % len(QUESTIONS)], **options).terminal().text)
        panel.wait()
    took = time.perf_counter() - started
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    mine = snapshot.filter_traces([tracemalloc.Filter(True, "*/frontends/panel/*", all_frames=True)])
    held = sum(stat.size for stat in mine.statistics("filename"))
    session = {"messages": dict(wire.messages), "bytes": dict(wire.bytes)}  # (before the reload's, below)
    state = panel.get_state()
    reload = {"messages": 1, "bytes": len(json.dumps(state, ensure_ascii=False).encode())}  # the state a view gets
    fetched = Wire(panel)
    rows = state.get("turns", [])
    if rows and "events" not in rows[0]:  # the view asks for each turn's events by id
        for row in rows:
            panel._on_message(panel, {"type": "fetch", "turn_id": row["turn_id"], "after": -1}, [])
        reload["messages"] += sum(v for k, v in fetched.messages.items() if ":" not in k)
        reload["bytes"] += sum(v for k, v in fetched.bytes.items() if ":" not in k)
    return {"turns": turns, "seconds": took, "answer_chars": answered, **session, "copy_updates": copy.updates,
            "copy_bytes": copy.bytes, "reload": reload, "panel_bytes_held": held,
            "rss_growth_mib": _rss_mib() - rss}  # fmt: skip


def browser_side() -> dict:
    from playwright.sync_api import sync_playwright

    subprocess.run(["node", "build.mjs", "--harness"], cwd=ROOT / "js", check=True)
    handler = functools.partial(_Quiet, directory=str(ROOT))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/js/test/harness.html"
    out: dict = {"heatmap_ms": {}, "naive_ms": {}}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            for n in (1000, 2000, 4000):
                page = browser.new_page(viewport={"width": 1280, "height": 1400})
                page.add_init_script(FRAMES)
                page.goto(f"{base}?n={n}")
                page.wait_for_selector("body[data-done='1']", timeout=120_000)
                if n == 1000:
                    gaps = page.evaluate("window.__frames")[5:]
                    out["frames"] = {"count": len(gaps), "p50_ms": statistics.median(gaps),
                                     "p95_ms": sorted(gaps)[int(0.95 * len(gaps))], "max_ms": max(gaps),
                                     "over_50ms": sum(g > 50 for g in gaps)}  # fmt: skip
                    out["tokens"] = page.locator("[data-testid=token]").count()
                page.click("[data-testid=tab-attention]")
                page.click("[data-testid=attention-show]")
                page.wait_for_selector("[data-testid=heatmap][data-render-ms]", timeout=60_000)
                out["heatmap_ms"][n] = float(page.get_attribute("[data-testid=heatmap]", "data-render-ms"))
                out["naive_ms"][n] = page.evaluate(NAIVE, [n])
                page.close()
            browser.close()
    finally:
        server.shutdown()
    return out


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--skip-kernel", action="store_true")
    parser.add_argument("--skip-browser", action="store_true")
    parser.add_argument("--session-turns", type=int, default=20)
    parser.add_argument("--session-tokens", type=int, default=48)
    parser.add_argument("--skip-session", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="the kernel parts on the tests' tiny random model")
    args = parser.parse_args()
    model = None
    if args.tiny:
        from jupyter_chatflow import load_model
        from jupyter_chatflow.testing import write_tiny_gguf

        model = load_model(write_tiny_gguf(Path(tempfile.mkdtemp()) / "tiny.gguf"), dtype="float32")
    if not args.skip_session:
        s = session_side(args.session_turns, args.session_tokens, model)
        sent = sum(v for k, v in s["bytes"].items() if ":" not in k)
        count = sum(v for k, v in s["messages"].items() if ":" not in k)
        print(f"session: {s['turns']} turns of <= {args.session_tokens} tokens in {s['seconds']:.0f} s on "
              f"{'the tiny model' if args.tiny else 'the default model'} (pid {os.getpid()})")  # fmt: skip
        print(f"  kernel -> view: {count} messages, {sent / 1024:.0f} KiB")
        for kind in sorted(s["bytes"], key=lambda k: -s["bytes"][k]):
            print(f"    {kind}: {s['messages'][kind]} messages, {s['bytes'][kind] / 1024:.1f} KiB")
        print(f"  static copy: {s['copy_updates']} display updates, {s['copy_bytes'] / 1024:.0f} KiB")
        r = s["reload"]
        print(f"  a view opened after the session (a reload): {r['messages']} messages, {r['bytes'] / 1024:.0f} KiB")
        print(f"  kernel memory: {s['panel_bytes_held'] / 2**20:.2f} MiB held by the panel (tracemalloc), "
              f"RSS +{s['rss_growth_mib']:.0f} MiB over the session")  # fmt: skip
    if not args.skip_kernel:
        k = kernel_side(args.runs, args.tokens, model)
        plain, panel = k["rates"]["Chat.send"], k["rates"]["ChatWidget.ask"]
        print(f"decode tok/s (median of {args.runs}, {args.tokens} tokens): Chat.send {plain:.1f}, "
              f"ChatWidget.ask {panel:.1f} ({panel / plain:.2f}x); last panel turn: {k['messages']} messages, "
              f"{k['bytes'] / 1024:.0f} KiB of JSON")  # fmt: skip
    if not args.skip_browser:
        b = browser_side()
        f = b["frames"]
        print(f"streaming {b['tokens']} token chips in the page: {f['count']} frames, p50 {f['p50_ms']:.1f} ms, "
              f"p95 {f['p95_ms']:.1f} ms, max {f['max_ms']:.1f} ms, {f['over_50ms']} frames over 50 ms")  # fmt: skip
        for n, ms in b["heatmap_ms"].items():
            naive = b["naive_ms"][n]
            print(f"heatmap {n}x{n}: ours {ms:.0f} ms, per-pixel peer {naive:.0f} ms ({naive / ms:.1f}x)")


if __name__ == "__main__":
    main()
