/**
 * The turn's waterfall, like a browser's Network tab: one row per stage, every start and end taken from the
 * events' own timestamps (an event is stamped when its stage ends, so a stage runs from `timestamp − latency_ms`
 * to `timestamp`). Time 0 is when the request was submitted: `turn_started.timestamp − queued_ms`, so the wait
 * for the engine thread is a row of its own and nothing has a negative time. XLA compile time is a row of its
 * own, taken out of the prefill or decode step it happened in. Tokens/s is the magic's figure
 * (`completed.tokens_per_s`), not recomputed here.
 */
import { prewarmUsed, type TurnData } from "./state";
import type { ChatEvent, HttpRequest, HttpResponse, PrefillDone, SseFrame, TokenDelta, TurnStarted } from "./types";

export interface Stage {
  label: string;
  kind: string;
  /** Seconds from the request's submission. */
  start: number;
  end: number;
  detail: string;
  /** Decode rows: the seconds at which each token was shown. */
  ticks?: number[];
}

export interface Waterfall {
  /** In order of their start (ties: in the order of their events). */
  stages: Stage[];
  /** Seconds from submission to the last event. */
  total: number;
  /** Time spent waiting: for the engine thread (`turn_started.queued_ms`), then for a row of its batch (each
   * round's `prefill.queued_ms`). */
  queuedMs: number;
  /** Time to first token as the magic and the CLI say it (`completed.timings.ttft_ms`, from the turn's start). */
  ttftMs: number | null;
  /** Where the first token lands on the waterfall (seconds from submission). */
  ttftAt: number | null;
  tokensPerS: number | null;
  compileMs: number;
  /** The draft prewarm before the request (it ran while the user typed: a note, not a row). */
  prewarm: string;
  live: boolean;
}

const TERMINAL = new Set(["completed", "cancelled", "error"]);

/** The stages of one turn, from its events. */
export function waterfall(turn: TurnData): Waterfall {
  const started = turn.events.find((e): e is TurnStarted => e.type === "turn_started");
  if (!started) return noWaterfall();
  const queuedMs = started.queued_ms ?? 0;
  const origin = started.timestamp - queuedMs / 1000;
  const b = build(turn.events, origin, queuedMs);
  const terminal = turn.events.find((e) => TERMINAL.has(e.type)) ?? null;
  const ended = terminal?.type === "completed" || terminal?.type === "cancelled" ? terminal : null;
  const ttftMs = ended?.timings.ttft_ms ?? b.firstTokenMs(started);
  const stages = inStartOrder(b.stages);
  const last = turn.events[turn.events.length - 1].timestamp - origin;
  return {
    stages,
    total: Math.max(last, ...stages.map((s) => s.end)),
    queuedMs: queuedMs + b.rowWaitMs,
    ttftMs,
    ttftAt: ttftMs === null ? null : started.timestamp - origin + ttftMs / 1000,
    tokensPerS: terminal?.type === "completed" ? terminal.tokens_per_s : null,
    compileMs: b.compileMs,
    prewarm: prewarmNote(turn),
    live: !terminal,
  };
}

/** The waterfall of a turn that has not started yet: no rows. */
function noWaterfall(): Waterfall {
  return {
    stages: [],
    total: 0,
    queuedMs: 0,
    ttftMs: null,
    ttftAt: null,
    tokensPerS: null,
    compileMs: 0,
    prewarm: "",
    live: true,
  };
}

/** The stages of `events`, seconds from `origin`; the wait for the engine thread first, when there was one. */
function build(events: readonly ChatEvent[], origin: number, queuedMs: number): Builder {
  const b = new Builder(origin);
  if (queuedMs > 0) {
    const detail = `waited ${ms(queuedMs)} for the engine thread (a turn, a title or a prewarm ran first)`;
    b.add("queue", "queue", 0, queuedMs / 1000, detail);
  }
  for (const e of events) b.take(e);
  b.endDecode();
  b.endWire();
  return b;
}

/** Sorted by start; stages that start together keep the order of their events. */
function inStartOrder(stages: Stage[]): Stage[] {
  return stages
    .map((s, i) => ({ s, i }))
    .sort((x, y) => x.s.start - y.s.start || x.i - y.i)
    .map(({ s }) => s);
}

/** Folds events into stages; a decode row runs from its round's prefill to its last token (or tool call). */
class Builder {
  stages: Stage[] = [];
  compileMs = 0;
  /** The rounds' waits for a row of the engine's batch (`prefill.queued_ms`), drawn as queue rows. */
  rowWaitMs = 0;
  private round = 0;
  private ended = false; // the turn's terminal event has passed (a title after it came after the answer)
  private decode: { start: number; last: number; tokens: TokenDelta[] } | null = null;
  private firstToken: TokenDelta | null = null;
  /** A remote turn's request being answered, and the SSE frames that came for it. */
  private request: { e: HttpRequest; response: HttpResponse | null; frames: SseFrame[] } | null = null;

  constructor(private origin: number) {}

  add(label: string, kind: string, start: number, end: number, detail: string, ticks?: number[]): void {
    this.stages.push(ticks ? { label, kind, start, end, detail, ticks } : { label, kind, start, end, detail });
  }

  /** A stage that ended at `e.timestamp` after `latencyMs`. */
  private span(label: string, kind: string, e: ChatEvent, latencyMs: number, detail: string): void {
    const end = e.timestamp - this.origin;
    this.add(label, kind, end - latencyMs / 1000, end, detail);
  }

  take(e: ChatEvent): void {
    if (e.type === "context_assembled") {
      this.endDecode();
      this.round += 1;
    }
    const r = this.round > 1 ? ` #${this.round}` : "";
    if (e.type === "completed" || e.type === "cancelled" || e.type === "error") this.ended = true;
    if (e.type === "prefill") this.prefill(e, r);
    else if (e.type === "token") this.token(e);
    else if (e.type === "http_request" || e.type === "http_response" || e.type === "sse_frame") this.wire(e);
    else if (e.type === "tool_call") {
      const how = e.constrained ? " (arguments decoded under the JSON-schema mask)" : "";
      this.endDecode(e.timestamp - this.origin, `tool call ${e.name}${how}`);
    } else this.stage(e, r);
  }

  /** The events that are a row of their own, ending at their timestamp (`r`: the round, after the first). */
  private stage(e: ChatEvent, r: string): void {
    switch (e.type) {
      case "safety_decision":
        this.span(`safety ${e.layer}`, "safety", e, e.latency_ms, `${e.action} · ${e.guard} · ${e.reason}`);
        break;
      case "memory_recalled":
        this.span("memory recall", "memory", e, e.latency_ms, `${e.snippets.length} recalled`);
        break;
      case "context_assembled": {
        const detail = `${e.prompt_tokens.toLocaleString()} of ${e.window.toLocaleString()} tokens`;
        this.span(`context${r}`, "context", e, e.latency_ms, detail);
        break;
      }
      case "tokenized":
        this.span(`tokenize${r}`, "tokenize", e, e.latency_ms, `${e.ids.length} ids`);
        break;
      case "tool_result":
        this.span(`tool ${e.name}`, "tool", e, e.latency_ms, e.error ? `error: ${e.error}` : `→ ${e.output}`);
        break;
      case "title_generated": {
        const by = e.source === "fallback" ? "the user's words" : "written by the model";
        const when = this.ended ? "after the answer" : "beside the answer, mid-stream";
        this.span("title", "title", e, e.latency_ms, `“${e.title}” (${by}, ${when})`);
        break;
      }
      case "memory_written":
        this.span("memory write", "memory", e, 0, `${e.operation}: ${e.text}`);
        break;
    }
  }

  private prefill(e: PrefillDone, r: string): void {
    const end = e.timestamp - this.origin;
    const start = end - e.latency_ms / 1000;
    const queued = (e.queued_ms ?? 0) / 1000;
    if (queued > 0) {
      this.rowWaitMs += queued * 1000;
      const why = "every row of the engine's batch was busy (another chat's turn, a title): the prefill waited";
      this.add(`wait for a row${r}`, "queue", start - queued, start, why);
    }
    const compile = (e.compile_ms ?? 0) / 1000;
    if (compile > 0) this.compile(start, compile, `prefill${r}`);
    this.add(
      `prefill${r}`,
      "prefill",
      start + compile,
      end,
      `${e.prompt_tokens} tokens: ${e.reused_tokens} from the prompt cache, ${e.computed_tokens} computed`,
    );
    this.decode = { start: end, last: end, tokens: [] };
  }

  private token(e: TokenDelta): void {
    this.firstToken ??= e;
    const at = e.timestamp - this.origin;
    if (!this.decode) this.decode = { start: at, last: at, tokens: [] };
    // a round's first token comes from its prefill, whose compile time it repeats: counted with the prefill
    const compile = this.decode.tokens.length ? (e.compile_ms ?? 0) / 1000 : 0;
    if (compile > 0) this.compile(this.decode.last, compile, "decode");
    this.decode.tokens.push(e);
    this.decode.last = at;
  }

  /** A remote turn's HTTP: a row from sending the request to its response's headers, then one for the SSE
   * stream, with a tick at each frame's arrival (the server's queue, prefill and decode are inside these). */
  private wire(e: HttpRequest | HttpResponse | SseFrame): void {
    if (e.type === "http_request") {
      this.endWire();
      this.request = { e, response: null, frames: [] };
      return;
    }
    if (!this.request) return;
    if (e.type === "sse_frame") {
      this.request.frames.push(e);
      return;
    }
    this.request.response = e;
    const sent = this.request.e.timestamp - this.origin;
    const rid = e.request_id ? ` · ${e.request_id}` : "";
    const what = `${this.request.e.method} ${new URL(this.request.e.url).pathname}`;
    this.add(`HTTP ${what}`, "http", sent, sent + e.elapsed_ms / 1000, `${e.status} ${e.reason}${rid}`);
  }

  /** Ends the SSE row of the latest request (at its last frame). */
  endWire(): void {
    const r = this.request;
    this.request = null;
    if (!r?.response || !r.frames.length) return;
    const sent = r.e.timestamp - this.origin;
    const at = r.frames.map((f) => sent + f.arrival_ms / 1000);
    const bytes = r.frames.reduce((sum, f) => sum + f.bytes, 0);
    const detail = `${r.frames.length} frames, ${bytes.toLocaleString()} bytes (the server's prefill and decode)`;
    this.add("SSE stream", "http", sent + r.response.elapsed_ms / 1000, at[at.length - 1], detail, at);
  }

  private compile(start: number, seconds: number, where: string): void {
    this.compileMs += seconds * 1000;
    this.add(
      "XLA compile",
      "compile",
      start,
      start + seconds,
      `${where}: XLA compiled (or loaded from its disk cache) a program new to this process; later turns skip it`,
    );
  }

  /** Ends the current decode row at `end` (a tool call) or at its last token. */
  endDecode(end?: number, detail?: string): void {
    const d = this.decode;
    this.decode = null;
    if (!d || (!d.tokens.length && end === undefined)) return;
    const n = d.tokens.length;
    const shown = n ? `${n} token${n === 1 ? "" : "s"} shown` : "";
    this.add(
      "decode",
      "decode",
      d.start,
      end ?? d.last,
      [shown, detail].filter(Boolean).join(" · "),
      d.tokens.map((t) => t.timestamp - this.origin),
    );
  }

  firstTokenMs(started: TurnStarted): number | null {
    return this.firstToken ? (this.firstToken.timestamp - started.timestamp) * 1000 : null;
  }
}

function prewarmNote(turn: TurnData): string {
  const p = turn.prewarm;
  if (!p) return "";
  const used = prewarmUsed(turn)
    ? "used: this turn's prefill found them in the prompt cache"
    : "not used: the prompt changed after it";
  return `Prewarmed while typing, before this request: ${p.prompt_tokens} tokens (${p.computed_tokens} computed) in ${ms(p.latency_ms)} · ${used}`;
}

function ms(value: number): string {
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${value.toFixed(value >= 10 ? 0 : 1)} ms`;
}

/** Round axis ticks (seconds) for a span: 1, 2 or 5 × a power of ten, at most `count` + 1 of them. */
export function ticks(span: number, count = 4): number[] {
  if (!(span > 0)) return [0];
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let t = 0; t <= span + 1e-9; t += step) out.push(Number(t.toFixed(9)));
  return out;
}
