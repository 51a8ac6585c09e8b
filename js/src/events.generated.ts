// Generated from jupyter_chatflow/events.py (and the number options of settings.py) by
// jupyter_chatflow/frontends/ts_types.py: do not edit.
// After changing an event, regenerate it: python -m jupyter_chatflow.frontends.ts_types
// (tests/frontends/test_ts_types.py fails while this file is out of date).

/**
 * Every event's `type`, in pipeline order (a remote turn's `http_*` and `sse_frame` stand where a local one prefills:
 * see `pipeline/remote.py`).
 */
export type EventType =
  | "turn_started"
  | "safety_decision"
  | "memory_recalled"
  | "context_assembled"
  | "tokenized"
  | "http_request"
  | "http_response"
  | "sse_frame"
  | "prefill"
  | "token"
  | "tool_call"
  | "tool_result"
  | "memory_written"
  | "title_generated"
  | "completed"
  | "cancelled"
  | "error";

/**
 * Where a prompt segment came from: `tool` is a tool's result and `generated` the model's earlier text of this turn
 * (its tool calls), both fed back in a later round; `template` is the chat template's own tokens.
 */
export type SegmentKind = "system" | "memory" | "tools" | "history" | "user" | "tool" | "generated" | "template";

/** What context assembly did with a part that did not fit: left it out, or replaced it with a summary. */
export type TrimAction = "dropped" | "summarized";

/** How context assembly makes history fit: leave the oldest out, or replace it with the model's summary. */
export type TrimStrategy = "drop" | "summarize";

/**
 * What a safety layer reads: the user's message; the finished answer; each streamed chunk; a tool's arguments or result
 * (`pipeline/safety/policy.py`).
 */
export type SafetyLayer = "input" | "model" | "output" | "tool";

/** What a safety layer did, weakest to strongest: let the text through; label it; cut spans out; stop it. */
export type SafetyAction = "allow" | "flag" | "redact" | "block";

/** What a "remember …" or "forget …" message did to the memory store. */
export type MemoryOperation = "remember" | "forget";

/** Who wrote a session's title: the model, or the user's first words (the model's attempt was unusable). */
export type TitleSource = "model" | "fallback";

/**
 * Why a completed turn ended: a stop token or string; max_tokens or the window; the tool-round bound was reached with
 * the model still calling tools; a safety layer blocked the request or the answer.
 */
export type FinishReason = "stop" | "length" | "tool_calls_exhausted" | "content_filter";

/** Fields every event has; subclasses add their own. */
export interface BaseEvent {
  type: EventType;
  /** 0, 1, 2… within a turn. */
  sequence_number: number;
  turn_id: string;
  /** Monotonic seconds (`time.monotonic()`) when the event was emitted. */
  timestamp: number;
}

/** A character range [start, end) of a text, with why it was marked. */
export interface Span {
  start: number;
  end: number;
  category: string;
  replacement: string;
}

/** A memory recalled into the context. */
export interface Snippet {
  memory_id: number;
  text: string;
  score: number;
}

/** One part of the assembled prompt. */
export interface Segment {
  kind: SegmentKind;
  /** Human-readable name, e.g. "history[2] assistant". */
  label: string;
  tokens: number;
  text: string;
}

/** What context assembly left out (or summarized) to fit the window, and why. */
export interface Trim {
  label: string;
  tokens: number;
  action: TrimAction;
  reason: string;
}

/** A run of prompt tokens [start, end) that came from `segments[segment]`. */
export interface Run {
  segment: number;
  start: number;
  end: number;
}

/** A token the sampler could have picked at a step. */
export interface Alternative {
  token_id: number;
  text: string;
  /** log p under the model (temperature 1, before any filter). */
  logprob: number;
  /** The probability the sampler gave it after penalty, temperature, top-k, top-p and min-p (0 = cut away). */
  sampling_prob: number;
}

/**
 * The tokens of one turn, over all its rounds (a tool call and the answer from its result are two): what the OpenAI
 * APIs call usage, plus the tokens the prompt cache saved. Summed once, by the turn (`pipeline/stream.py`, `account`);
 * every view reads it from the terminal event.
 */
export interface Usage {
  /**
   * Prompt tokens the model was given, each round's prompt counted (the rounds share a beginning). None: a remote
   * server answered and did not report them (llama.cpp's Python server sends no usage in a stream); this side cannot
   * count them, the tokenizer and chat template being the server's.
   */
  prompt_tokens: number | null;
  /**
   * Tokens the model generated: the answer, its tool calls and its stop token (which is never shown). None: a remote
   * server did not report them and not every one arrived with its logprob entry (a tool call's do not on llama.cpp's
   * server), so they cannot be counted here.
   */
  completion_tokens: number | null;
  /** Of prompt_tokens, those whose keys and values the prompt cache already held (not computed again). */
  reused_tokens: number;
  /** prompt_tokens + completion_tokens (None when either is). */
  total_tokens: number | null;
}

/**
 * Milliseconds per stage of one turn (0: the stage did not run), measured once by the turn. ttft_ms and total_ms count
 * from the request's submission (the wait for the engine thread, `TurnStarted.queued_ms`, included: what the user
 * waited).
 */
export interface Timings {
  /** The input layer's scan of the user's message. */
  safety_input: number;
  /** Recalling memories for the context. */
  memory: number;
  /** Assembling and tokenizing the prompt, every round's. */
  context: number;
  /** Every generation's prefill: the time to its first token. */
  prefill: number;
  /** Every generation's decode steps, XLA compiling a decode program included. */
  decode: number;
  /** Running the tools the model called, with their safety checks. */
  tools: number;
  /** Storing or forgetting what a "remember …" / "forget …" message asked. */
  memory_write: number;
  /** Time to the first token the user saw; none when no token came (a request the input layer blocked). */
  ttft_ms: number | null;
  /** Time to the terminal event. */
  total_ms: number;
}

/** The validated request envelope: what was asked, with which knobs and features. */
export interface TurnStarted extends BaseEvent {
  type: "turn_started";
  request_id: string;
  session_id: string;
  user: string;
  params: Record<string, unknown>;
  features: Record<string, unknown>;
  /** Wall-clock time (Unix seconds). */
  created: number;
  /** The turn this one regenerates from one of its tokens ("" for a new message). */
  fork_of: string;
  /** That token's index in the forked turn's answer: the answer up to it is kept, it is replaced. */
  fork_index: number;
  /** How long the request waited for the engine thread (behind other turns, a title, a prewarm) before it began. */
  queued_ms: number;
}

/** One safety layer's verdict on a text. */
export interface SafetyDecision extends BaseEvent {
  type: "safety_decision";
  layer: SafetyLayer;
  action: SafetyAction;
  guard: string;
  categories: string[];
  scores: Record<string, number>;
  spans: Span[];
  reason: string;
  latency_ms: number;
  /** For block: the text shown instead. */
  replacement: string;
}

/** Memories found relevant to the user's message and put into the context. */
export interface MemoryRecalled extends BaseEvent {
  type: "memory_recalled";
  query: string;
  snippets: Snippet[];
  latency_ms: number;
}

/** The prompt's segments, the token budget, and what was trimmed to fit it. */
export interface ContextAssembled extends BaseEvent {
  type: "context_assembled";
  window: number;
  reserved_output: number;
  budget: number;
  prompt_tokens: number;
  segments: Segment[];
  trimmed: Trim[];
  strategy: TrimStrategy;
  latency_ms: number;
}

/** The exact prompt ids and where every one came from (runs over `ContextAssembled.segments`). */
export interface Tokenized extends BaseEvent {
  type: "tokenized";
  ids: number[];
  provenance: Run[];
  latency_ms: number;
}

/** A request a remote turn sent to an OpenAI-compatible server, as it went on the wire (the key masked). */
export interface HttpRequest extends BaseEvent {
  type: "http_request";
  method: string;
  url: string;
  /** The request's headers; `Authorization` shows the key masked (`Bearer sk-…abcd`), never the key. */
  headers: Record<string, string>;
  /** The JSON body ({} for a GET). */
  body: Record<string, unknown>;
  /** Which request of the turn: a tool call's result goes back in the next one. */
  round: number;
}

/** The status line and headers of the server's answer to the latest `HttpRequest`. */
export interface HttpResponse extends BaseEvent {
  type: "http_response";
  status: number;
  reason: string;
  headers: Record<string, string>;
  /** The server's `x-request-id` ("" when it sends none). */
  request_id: string;
  /** Milliseconds from sending the request to its response's headers. */
  elapsed_ms: number;
  /** An error's body (its first 2,000 characters); "" for a stream, whose body comes as `SseFrame`s. */
  body: string;
  round: number;
}

/** One server-sent event of a streamed response, as its bytes arrived (a `: ping` comment is a frame too). */
export interface SseFrame extends BaseEvent {
  type: "sse_frame";
  /** 0, 1, 2… within the response. */
  index: number;
  /** The frame's size on the wire, its closing blank line included: the frames of a response add up to its body. */
  bytes: number;
  /** Milliseconds from sending the request to the arrival of the frame's last byte. */
  arrival_ms: number;
  text: string;
  round: number;
}

/** The prompt is in the KV cache; reused tokens came from the prompt cache. */
export interface PrefillDone extends BaseEvent {
  type: "prefill";
  prompt_tokens: number;
  reused_tokens: number;
  computed_tokens: number;
  latency_ms: number;
  /** Of latency_ms, the time XLA spent compiling (or loading from its cache) programs new to the process. */
  compile_ms: number;
  /** Before latency_ms: the wait for a row of the engine's batch, every row busy (other chats' turns, a title). */
  queued_ms: number;
}

/** One generated token. `text` is what became visible (after stop-string holdback and output redaction). */
export interface TokenDelta extends BaseEvent {
  type: "token";
  index: number;
  /** -1 in a remote turn: the Chat Completions API sends a token's bytes, not its id. */
  token_id: number;
  text: string;
  logprob: number;
  /** 0 in a remote turn: a server sends at most its top 5 alternatives, not the distribution. */
  entropy: number;
  /** In a remote turn, the server's `top_logprobs` (ids -1, sampling_prob -1: it does not send them). */
  alternatives: Alternative[];
  elapsed_ms: number;
  /**
   * XLA compile time since the previous token (a decode program's first call in the process), in elapsed_ms. A
   * generation's first token comes out of its prefill: its compile_ms is that prefill's (`PrefillDone.compile_ms`), not
   * more of it; add one of the two.
   */
  compile_ms: number;
  redacted: boolean;
}

/** The model asked for a tool; the stream pauses here until the result. */
export interface ToolCall extends BaseEvent {
  type: "tool_call";
  call_id: string;
  name: string;
  arguments: Record<string, unknown>;
  /** True when the arguments were decoded under a JSON-schema token mask. */
  constrained: boolean;
  /** Time to write the call under the mask (its prefill and decode steps), ending at this event. */
  decode_ms: number;
  /** Tokens of the call's text, `<tool_call>` (or the line after it) to `</tool_call>`. */
  tokens: number;
  /**
   * Of those, the ones the grammar fixed (keys, punctuation, a sole tool's name), as the tokenizer spells them; the
   * others are the model's choices under the mask.
   */
  forced_tokens: number;
}

/** A tool's output or error, which goes back into the context. */
export interface ToolResult extends BaseEvent {
  type: "tool_result";
  call_id: string;
  name: string;
  output: string;
  error: string;
  /** The tool's own run (checking the arguments, the call, formatting its output), ending at this event. */
  latency_ms: number;
}

/** A memory was stored or forgotten. */
export interface MemoryWritten extends BaseEvent {
  type: "memory_written";
  operation: MemoryOperation;
  text: string;
  memory_ids: number[];
}

/**
 * The session's title, written after its first answer has ended: this event follows the turn's terminal event (its
 * sequence number is the next one), so the answer never waits for the title.
 */
export interface TitleGenerated extends BaseEvent {
  type: "title_generated";
  title: string;
  latency_ms: number;
  source: TitleSource;
}

/** The turn ended normally (terminal). */
export interface Completed extends BaseEvent {
  type: "completed";
  finish_reason: FinishReason;
  text: string;
  usage: Usage;
  timings: Timings;
  /**
   * Decode tokens per second after the first token, XLA compile time left out (`engine.generation.tokens_per_s` over
   * every generation of the turn).
   */
  tokens_per_s: number;
}

/** The turn was stopped (Stop, Ctrl-C, Kernel → Interrupt); the partial answer is kept (terminal). */
export interface Cancelled extends BaseEvent {
  type: "cancelled";
  text: string;
  /** What the turn had used when it stopped. */
  usage: Usage;
  timings: Timings;
}

/** The turn failed (terminal); `message` says what to do. */
export interface Failed extends BaseEvent {
  type: "error";
  error: string;
  message: string;
  text: string;
}

/** Every event of a turn, by its `type`. */
export type ChatEvent =
  | TurnStarted
  | SafetyDecision
  | MemoryRecalled
  | ContextAssembled
  | Tokenized
  | HttpRequest
  | HttpResponse
  | SseFrame
  | PrefillDone
  | TokenDelta
  | ToolCall
  | ToolResult
  | MemoryWritten
  | TitleGenerated
  | Completed
  | Cancelled
  | Failed;

/** The name of a number option of `settings.py`: a key of the panel's `Settings` that the form edits. */
export type SettingFieldKey =
  | "temperature"
  | "top_k"
  | "top_p"
  | "min_p"
  | "repetition_penalty"
  | "max_tokens"
  | "seed";

/** A number field of the panel's settings form: one sampler option of `settings.py`. */
export interface SettingField {
  key: SettingFieldKey;
  label: string;
  min?: number;
  max?: number;
  step: number;
  /** What a special value means, or what the option does (the field's tooltip). */
  hint: string;
  /** Empty is allowed: the option's default (the seed: a random one). */
  optional: boolean;
}

export const SETTING_FIELDS: readonly SettingField[] = [
  { key: "temperature", label: "temperature", min: 0, step: 0.05, hint: "0 is greedy", optional: false },
  { key: "top_k", label: "top k", min: 0, step: 1, hint: "0 keeps all tokens", optional: false },
  {
    key: "top_p",
    label: "top p",
    min: 0,
    max: 1,
    step: 0.05,
    hint: "Nucleus sampling: keep the smallest set of tokens whose probability sums to at least p.",
    optional: false,
  },
  {
    key: "min_p",
    label: "min p",
    min: 0,
    max: 1,
    step: 0.05,
    hint: "Drop tokens less likely than min_p times the most likely one; 0 keeps all.",
    optional: false,
  },
  { key: "repetition_penalty", label: "repetition penalty", min: 0, step: 0.05, hint: "1 is off", optional: false },
  { key: "max_tokens", label: "max tokens", min: 1, step: 1, hint: "The longest answer, in tokens.", optional: false },
  {
    key: "seed",
    label: "seed",
    min: 0,
    max: 4294967295,
    step: 1,
    hint: "Seed of the random stream: the same seed and prompt give the same answer; unset picks one.",
    optional: true,
  },
];
