/** Synthetic data for the harness and speed tests: a long streamed answer and causal attention matrices. */
import type { ChatEvent, Pieces, TokenDelta, TurnAccount } from "../src/types";
import type { TurnRecord } from "./fake_model";

const WORDS = [
  "The",
  " model",
  " reads",
  " the",
  " prompt",
  ",",
  " then",
  " writes",
  " one",
  " token",
  " at",
  " a",
  " time",
  ".",
  " Each",
  " step",
  " looks",
  " back",
  " over",
  " the",
  " cache",
  " and",
  " picks",
  " from",
  " the",
  " top",
  "-k",
  " list",
  ":",
  " sometimes",
  " a",
  " surprising",
  " one",
  "!",
];

/** A turn like `base` (a real fixture) whose answer is `n` generated tokens. */
export function longTurn(base: TurnRecord, n: number, turn_id = "turn_long"): TurnRecord {
  const head = base.events
    .filter((e) => e.type !== "token" && e.type !== "completed" && e.sequence_number <= 5)
    .map((e) => ({ ...e, turn_id })) as ChatEvent[];
  const t0 = head[head.length - 1].timestamp;
  const pieces: Pieces = { ...base.pieces };
  const tokens: TokenDelta[] = [];
  for (let i = 0; i < n; i++) {
    const token = syntheticToken(i, turn_id, head.length + i, t0 + 0.03 * (i + 1));
    for (const alt of token.alternatives) pieces[String(alt.token_id)] = [alt.text, hex(alt.text)];
    tokens.push(token);
  }
  const started = head[0];
  if (started.type === "turn_started")
    head[0] = { ...started, user: "Explain how a language model generates text, in detail." };
  const completed = completedAfter(tokens, started.timestamp);
  const events = [...head, ...tokens, completed];
  return { turn_id, events, pieces, prewarm: null, fork_of: "", account: syntheticAccount(base, tokens, started) };
}

/** `base`'s account (a real fixture's) with this answer's figures: its tokens, a decode bar ticked at each. The
 * kernel derives a real turn's (jupyter_chatflow/account); this one only dresses the harness's made-up answer. */
function syntheticAccount(base: TurnRecord, tokens: TokenDelta[], started: ChatEvent): TurnAccount {
  const at = (t: TokenDelta) => (t.timestamp - started.timestamp) * 1000;
  const ticks = tokens.map(at);
  const decode = { label: "decode", kind: "decode" as const, start_ms: ticks[0], end_ms: ticks[ticks.length - 1] };
  const stage = { ...decode, detail: `${tokens.length} tokens shown`, ticks_ms: ticks, compiles: [] };
  const keep = (base.account?.stages ?? []).filter((s) => s.kind !== "decode" && s.end_ms <= ticks[0]);
  const rate = ((tokens.length - 1) / (ticks[ticks.length - 1] - ticks[0])) * 1000;
  return {
    ...base.account!,
    events: base.events.length + tokens.length,
    answer_tokens: tokens.length,
    completion_tokens: tokens.length,
    unshown_tokens: 0,
    generated_note: `${tokens.length} tokens generated: ${tokens.length} in the answer`,
    ttft_ms: ticks[0],
    first_computed_ms: ticks[0],
    ttft_note: "",
    tokens_per_s: rate,
    tokens_per_s_note: "",
    answer_ms: ticks[ticks.length - 1] + 1,
    title_after_ms: 0,
    total_ms: ticks[ticks.length - 1] + 1,
    stages: [...keep, stage],
  };
}

/** Token `i` of the long answer: a word (a newline every 47th), its chosen token and two alternatives, one cut. */
function syntheticToken(i: number, turn_id: string, sequence_number: number, timestamp: number): TokenDelta {
  const text = i % 47 === 46 ? "\n" : WORDS[i % WORDS.length];
  const id = 1000 + (i % WORDS.length) + (text === "\n" ? 500 : 0);
  const lp = -((i * 7919) % 23) / 8;
  return {
    type: "token",
    sequence_number,
    turn_id,
    timestamp,
    index: i,
    token_id: id,
    text,
    logprob: lp,
    entropy: 1 + ((i * 31) % 17) / 10,
    elapsed_ms: 30,
    compile_ms: 0,
    redacted: i === 120,
    computed_at: timestamp,
    alternatives: [
      { token_id: id, text, logprob: lp, sampling_prob: 0.6, penalized: false, penalized_logprob: null },
      {
        token_id: 2000 + i,
        text: " alt",
        logprob: lp - 0.4,
        sampling_prob: 0.4,
        penalized: false,
        penalized_logprob: null,
      },
      {
        token_id: 3000 + i,
        text: " cut",
        logprob: lp - 1.2,
        sampling_prob: 0,
        penalized: false,
        penalized_logprob: null,
      },
    ],
  };
}

/** The completed event a millisecond after the last token; times from `start` (the turn_started event's). */
function completedAfter(tokens: TokenDelta[], start: number): ChatEvent {
  const last = tokens[tokens.length - 1];
  return {
    type: "completed",
    sequence_number: last.sequence_number + 1,
    turn_id: last.turn_id,
    timestamp: last.timestamp + 0.001,
    finish_reason: "length",
    text: tokens.map((t) => t.text).join(""),
    usage: { prompt_tokens: 38, completion_tokens: tokens.length, reused_tokens: 0, total_tokens: 38 + tokens.length },
    timings: {
      safety_input: 0,
      memory: 0,
      context: 0,
      prefill: 0,
      decode: 0,
      tools: 0,
      memory_write: 0,
      ttft_ms: (tokens[0].timestamp - start) * 1000,
      total_ms: (last.timestamp - start) * 1000,
    },
    tokens_per_s: 33.3,
  };
}

/** The UTF-8 bytes of `text` as hex, as the pieces carry them. */
function hex(text: string): string {
  return Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** A causal float16 attention matrix (rows ≥ cols are zero above the diagonal) with a sink and a local band; with
 * `window`, each row also zero before its last `window` keys (a sliding-window layer). */
export function causalHalf(rows: number, cols: number, window = 0): Uint16Array {
  const out = new Uint16Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const limit = Math.min(cols, r + 1 + Math.max(0, cols - rows));
    for (let c = window > 0 ? Math.max(0, limit - window) : 0; c < limit; c++) {
      const local = Math.exp(-(r - c) / 6);
      const sink = c === 0 ? 0.5 : 0;
      const stripe = c % 37 === 3 ? 0.05 : 0;
      out[r * cols + c] = floatToHalf(Math.min(1, (local * 0.4 + sink + stripe) / Math.sqrt(limit)));
    }
  }
  return out;
}

/** float → float16 bits (round to nearest; for test data). */
export function floatToHalf(v: number): number {
  if (Number.isNaN(v)) return 0x7e00;
  const sign = v < 0 || Object.is(v, -0) ? 0x8000 : 0;
  v = Math.abs(v);
  if (v === Infinity) return sign | 0x7c00;
  if (v >= 65520) return sign | 0x7c00;
  if (v < 2 ** -24 / 2) return sign;
  if (v < 2 ** -14) return sign | Math.round(v / 2 ** -24);
  let e = Math.floor(Math.log2(v));
  let m = Math.round((v / 2 ** e - 1) * 1024);
  if (m === 1024) {
    m = 0;
    e += 1;
  }
  return sign | ((e + 15) << 10) | m;
}
