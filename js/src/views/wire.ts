/**
 * The Wire tab: what a remote turn sent and received over HTTP (its `http_request`, `http_response` and
 * `sse_frame` events): each request with its headers (the key masked by the kernel, never sent here) and JSON
 * body, the status line and headers of its answer, and the SSE frames with their bytes and arrival times.
 */
import { clear, el, fmtMs } from "../dom";
import type { TurnData } from "../state";
import type { ChatEvent, HttpRequest, HttpResponse, SseFrame } from "../types";

/** Frames listed per response, at most (the totals count them all). */
const MAX_FRAMES = 200;
/** Characters of a frame's text shown in its row (the whole text is its tooltip). */
const FRAME_CHARS = 96;

export interface Exchange {
  request: HttpRequest;
  response: HttpResponse | null;
  frames: SseFrame[];
}

/** A turn's HTTP exchanges in order: each request with the response and frames that followed it. */
export function exchanges(events: readonly ChatEvent[]): Exchange[] {
  const out: Exchange[] = [];
  for (const e of events) {
    if (e.type === "http_request") out.push({ request: e, response: null, frames: [] });
    const last = out[out.length - 1];
    if (!last) continue;
    if (e.type === "http_response") last.response = e;
    else if (e.type === "sse_frame") last.frames.push(e);
  }
  return out;
}

/** Whether a turn went to a remote server (it has an HTTP request). */
export function isRemote(events: readonly ChatEvent[]): boolean {
  return events.some((e) => e.type === "http_request");
}

export class WireView {
  readonly el = el("div", { class: "cf-wire", "data-testid": "wire" });
  private drawn = "";

  clear(): void {
    this.drawn = "";
    clear(this.el);
  }

  /** Draws `turn`'s exchanges (a no-op when none of its events changed). */
  show(turn: TurnData): void {
    const key = `${turn.turn_id}|${turn.events.length}`;
    if (key === this.drawn) return;
    this.drawn = key;
    clear(this.el);
    const list = exchanges(turn.events);
    if (!list.length) {
      this.el.appendChild(emptyWire(turn.events));
      return;
    }
    for (const exchange of list) this.el.appendChild(exchangeCard(exchange));
  }
}

/** Events only a turn on this kernel's model has (a remote turn records the wire instead). */
const LOCAL_STAGES = new Set<ChatEvent["type"]>(["context_assembled", "tokenized", "prefill"]);
const ENDS = new Set<ChatEvent["type"]>(["completed", "cancelled", "error"]);
/** The example server in the empty tab's advice: where `chatflow serve` listens by default. */
const EXAMPLE_URL = "http://localhost:8000/v1";

/** What the tab says of a turn that sent no HTTP request: why, and how to see a wire here. */
export function emptyWire(events: readonly ChatEvent[]): HTMLElement {
  const box = (...children: (string | HTMLElement)[]) =>
    el("div", { class: "cf-empty cf-wire-empty", "data-testid": "wire-empty" }, ...children);
  const code = (text: string) => el("code", { class: "cf-wire-code", text });
  const blocked = events.some((e) => e.type === "safety_decision" && e.layer === "input" && e.action === "block");
  if (blocked) return box("The input safety layer blocked this message before it was sent: nothing crossed a wire.");
  const local = events.some((e) => LOCAL_STAGES.has(e.type) || ENDS.has(e.type));
  if (!local) return box("No HTTP request yet: a turn sent to a server shows its request here as it goes out.");
  const para = (...children: (string | HTMLElement)[]) => el("p", { class: "cf-wire-para" }, ...children);
  return box(
    para("This turn ran in this kernel, so nothing crossed a wire."),
    para(
      "To see the HTTP request (its key masked), the response's headers (x-request-id) and each SSE frame with its " +
        "bytes and arrival time, send the turns to an OpenAI-compatible server such as ",
      code("chatflow serve"),
      ":",
    ),
    el(
      "ul",
      { class: "cf-wire-options" },
      el("li", {}, code(`cf.ChatWidget(cf.Chat(base_url="${EXAMPLE_URL}", api_key=…))`)),
      el("li", {}, code(`%%chat --inspect --server ${EXAMPLE_URL} --api-key KEY`), " in a cell"),
    ),
    para("Tour chapter 13 (", code("examples/tour/13_wire.ipynb"), ") does it, on a server it runs in the kernel."),
  );
}

function exchangeCard({ request, response, frames }: Exchange): HTMLElement {
  const title = `${request.method} ${request.url}`;
  const status = response ? `${response.status} ${response.reason}` : "waiting…";
  return el(
    "section",
    { class: "cf-wire-exchange", "data-testid": "wire-exchange" },
    el("div", { class: "cf-label", text: `request${request.round ? ` (round ${request.round + 1})` : ""}` }),
    el("code", { class: "cf-wire-line", "data-testid": "wire-request", text: title }),
    headerTable(request.headers),
    Object.keys(request.body).length ? bodyDetails(request.body) : null,
    el("div", { class: "cf-label", text: "response" }),
    el("code", {
      class: `cf-wire-line${response && response.status >= 400 ? " cf-wire-error" : ""}`,
      "data-testid": "wire-status",
      text: response ? `${status} · headers after ${fmtMs(response.elapsed_ms)}` : status,
    }),
    response ? headerTable(response.headers) : null,
    response?.body ? el("pre", { class: "cf-wire-body", text: response.body }) : null,
    frames.length ? frameTable(frames) : null,
  );
}

function headerTable(headers: Record<string, string>): HTMLElement {
  const rows = Object.entries(headers).map(([name, value]) =>
    el("tr", {}, el("td", { class: "cf-wire-name", text: name }), el("td", { text: value })),
  );
  return el("table", { class: "cf-wire-headers" }, el("tbody", {}, ...rows));
}

function bodyDetails(body: Record<string, unknown>): HTMLElement {
  const text = JSON.stringify(body, null, 2);
  return el(
    "details",
    { class: "cf-wire-json" },
    el("summary", { text: `body (${new TextEncoder().encode(JSON.stringify(body)).length.toLocaleString()} bytes)` }),
    el("pre", { class: "cf-wire-body", text }),
  );
}

/** The SSE frames: one row each (index, bytes, arrival), then their totals. */
function frameTable(frames: SseFrame[]): HTMLElement {
  const bytes = frames.reduce((sum, f) => sum + f.bytes, 0);
  const first = frames[0]?.arrival_ms ?? 0;
  const last = frames[frames.length - 1]?.arrival_ms ?? 0;
  const summary = `${frames.length} SSE frames · ${bytes.toLocaleString()} bytes · first at ${fmtMs(first)}, last at ${fmtMs(last)}`;
  const head = el(
    "tr",
    {},
    el("th", { class: "cf-num", text: "#" }),
    el("th", { class: "cf-num", text: "bytes" }),
    el("th", { class: "cf-num", text: "arrived", title: "milliseconds after the request was sent" }),
    el("th", { text: "frame" }),
  );
  const rows = frames
    .slice(0, MAX_FRAMES)
    .map((f) =>
      el(
        "tr",
        { "data-testid": "sse-frame" },
        el("td", { class: "cf-num", text: String(f.index) }),
        el("td", { class: "cf-num", text: String(f.bytes) }),
        el("td", { class: "cf-num", text: fmtMs(f.arrival_ms) }),
        el("td", { class: "cf-wire-frame", title: f.text, text: preview(f.text) }),
      ),
    );
  const more = frames.length > MAX_FRAMES ? `… ${frames.length - MAX_FRAMES} more frames not listed` : "";
  return el(
    "div",
    {},
    el("div", { class: "cf-muted cf-wire-summary", "data-testid": "sse-summary", text: summary }),
    el("table", { class: "cf-alts cf-wire-frames" }, el("thead", {}, head), el("tbody", {}, ...rows)),
    more ? el("div", { class: "cf-muted", text: more }) : null,
  );
}

function preview(text: string): string {
  const line = text.trim().replace(/\s+/g, " ");
  return line.length > FRAME_CHARS ? `${line.slice(0, FRAME_CHARS - 1)}…` : line;
}
