// Generated from jupyter_chatflow/events.py and account/record.py by
// jupyter_chatflow/frontends/panel/ts_types.py: do not edit.
// After changing an event, regenerate it: python -m jupyter_chatflow.frontends.panel.ts_types
// (tests/frontends/panel/test_ts_types.py fails while this file is out of date).

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
  | "intervened"
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

/**
 * What a prefill was for: a round's answer (its prompt; a fork's, with the kept answer after it), or a tool call
 * decoded under the JSON-schema mask (its prompt, the answer so far, and the call's beginning the grammar fixed).
 */
export type PrefillKind = "answer" | "tool_call";

/**
 * The rule that ended a tool call's string argument the model did not end itself (`pipeline/tools/guards.py`): none;
 * the model wrote the call's end (`}}</tool_call>`) inside the string, which then ends before it; the string repeated
 * one piece of text over its last 48 characters, and was closed at the next token.
 */
export type CallGuard = "" | "unclosed" | "repeat";

/** Who wrote a session's title: the model, or the user's first words (the model's attempt was unusable). */
export type TitleSource = "model" | "fallback";

/**
 * Why a completed turn ended: a stop token or string; max_tokens or the window; the tool-round bound was reached with
 * the model still calling tools; a safety layer blocked the request or the answer.
 */
export type FinishReason = "stop" | "length" | "tool_calls_exhausted" | "content_filter";

/** Where the turn stands: still running, or how it ended (its terminal event's type). */
export type AccountStatus = "live" | "completed" | "cancelled" | "error";

/** What a timeline bar stands for (its colour). */
export type StageKind =
  | "queue"
  | "safety"
  | "memory"
  | "context"
  | "tokenize"
  | "prefill"
  | "decode"
  | "tool"
  | "title"
  | "http";

/**
 * A part of the context window: a prompt segment's kind (`SegmentKind`), then the round's output (the answer's tokens,
 * or a tool call's), the rest of the room reserved for the output, and the free rest.
 */
export type GaugeKind =
  | "system"
  | "memory"
  | "tools"
  | "history"
  | "user"
  | "tool"
  | "generated"
  | "template"
  | "answer"
  | "call"
  | "reserve"
  | "free";

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

/** One attention head: layer and head, from 0. */
export interface Head {
  layer: number;
  head: number;
}

/**
 * A vector added to the residual after `layer`: what it is (`label`), its strength (in units of the residual's mean
 * length there; 0 for a vector given as it is) and its length.
 */
export interface Steering {
  layer: number;
  label: string;
  strength: number;
  norm: number;
}

/** A token the sampler could have picked at a step. */
export interface Alternative {
  token_id: number;
  text: string;
  /** log p under the model (temperature 1, before any filter). */
  logprob: number;
  /** The probability the sampler gave it after penalty, temperature, top-k, top-p and min-p (0 = cut away). */
  sampling_prob: number;
  /**
   * The repetition penalty lowered it: it occurs in the prompt or the answer so far (False where the penalty is off,
   * and in a remote turn: a server does not say).
   */
  penalized: boolean;
  /**
   * log p after the repetition penalty alone (temperature 1, before any filter): between `logprob` and `sampling_prob`,
   * what the penalty did. None: not known (a remote turn, a turn recorded before this field).
   */
  penalized_logprob: number | null;
}

/**
 * The tokens of one turn, over all its rounds (a tool call and the answer from its result are two): what the OpenAI
 * APIs call usage, plus the tokens the prompt cache saved. Summed once, by the turn's answerer (a local one's rounds:
 * `pipeline/stream.usage_of`; a server's report); every view reads it from the terminal event.
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
  /**
   * Of latency_ms, XLA compiling programs new to the process on the way (a guard that runs the model: the intent
   * probe's pass, the model guard's), measured on the thread that ran it.
   */
  compile_ms: number;
  /** For block: the text shown instead. */
  replacement: string;
  /** What the layer read, where it reads two things: a tool's "arguments" or its "result" ("" otherwise). */
  subject: string;
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

/**
 * The model that answers this turn is changed (`Chat.intervene`): attention heads knocked out, vectors added to the
 * residual. Right after `TurnStarted`, so every view of the turn (the static copy, a replay) says so.
 */
export interface Intervened extends BaseEvent {
  type: "intervened";
  heads: Head[];
  steering: Steering[];
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
  /** Before latency_ms: the wait for the engine's scheduler to start this prefill (`queued_for` says why). */
  queued_ms: number;
  /**
   * What the prefill waited for ("" when it did not wait): every row busy, another sequence's prefill, the running
   * rows' decode step, or their batch's programs compiling.
   */
  queued_for: string;
  kind: PrefillKind;
  /**
   * Of prompt_tokens, the round's assembled prompt (`ContextAssembled.prompt_tokens`); the rest are answer tokens after
   * it: a fork's kept ones, or a tool call's beginning (0: not recorded, a stored older turn).
   */
  context_tokens: number;
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
  /**
   * Monotonic seconds when the engine produced this token (`timestamp` is when it was shown: the output scan holds a
   * word back until the next one); a remote turn's, when its bytes arrived. 0: not computed in this turn (a fork's kept
   * token), or not recorded (a stored older turn).
   */
  computed_at: number;
}

/**
 * The model asked for a tool; the stream pauses here until the result. A call max_tokens `cut` is shown as written and
 * never run: the turn ends with it (finish_reason "length").
 */
export interface ToolCall extends BaseEvent {
  type: "tool_call";
  call_id: string;
  name: string;
  /** The arguments, parsed ({} for a cut call: its `arguments_text` is what was written of them). */
  arguments: Record<string, unknown>;
  /** True when the arguments were decoded under a JSON-schema token mask. */
  constrained: boolean;
  /** Time to write the call under the mask (its prefill and decode steps), ending at this event. */
  decode_ms: number;
  /** Of decode_ms after the call's prefill, the time XLA spent compiling programs new to the process. */
  compile_ms: number;
  /** Tokens of the call's text, `<tool_call>` (or the line after it) to `</tool_call>`. */
  tokens: number;
  /**
   * Of those, the ones the grammar fixed (keys, punctuation, a sole tool's name), as the tokenizer spells them; the
   * others are the model's choices under the mask.
   */
  forced_tokens: number;
  /** The arguments as JSON text, as the model wrote them ("": not recorded, a remote turn's or an older one). */
  arguments_text: string;
  /** max_tokens ran out before `</tool_call>`: `tokens` were written, `arguments_text` holds them; not run. */
  cut: boolean;
  /** The rule that ended one of the string arguments the model did not end itself ("" when it ended them all). */
  guard: CallGuard;
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
  /** What the model wrote for a title ("" when it wrote nothing, or was not asked). */
  model_title: string;
  /** Why the model's title was not used (source "fallback"): "" when it was. */
  rejected: string;
}

/** The turn ended normally (terminal). */
export interface Completed extends BaseEvent {
  type: "completed";
  finish_reason: FinishReason;
  text: string;
  usage: Usage;
  timings: Timings;
  /**
   * Tokens per second over the intervals between the answer's tokens as they were computed, XLA compiling left out: the
   * turn's account's figure (`account.settled`; 0: no two tokens to time).
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
  | Intervened
  | PrefillDone
  | TokenDelta
  | ToolCall
  | ToolResult
  | MemoryWritten
  | TitleGenerated
  | Completed
  | Cancelled
  | Failed;

/** One request to the model: its prompt in the window, its prefills, and what it generated. */
export interface RoundAccount {
  /** The prompt assembled for the window (`ContextAssembled.prompt_tokens`, the tokenizer's ids). */
  context_tokens: number;
  window: number;
  /** Of the window, the room kept for the output (max_tokens). */
  reserved_output: number;
  /** Tokens its prefills put in the KV cache: the prompt, and a fork's kept answer or a tool call's beginning. */
  prefill_tokens: number;
  /** Of prefill_tokens, those the prompt cache already held. */
  reused_tokens: number;
  computed_tokens: number;
  /** Its prefills in words: what they held beyond the prompt, what the prompt cache gave ("" when none ran). */
  prefill_note: string;
  /** Tokens of the answer shown in this round. */
  answer_tokens: number;
  /** Tokens of the tool call this round ended with (0: none). */
  call_tokens: number;
  /** Of the window: the prompt and the round's output. */
  used_tokens: number;
  /**
   * The window, part by part: the prompt's segment kinds, the output, the unused reserve, the free rest (they add up to
   * the window).
   */
  gauge: GaugePart[];
}

/** One bar of the timeline: a stage of the turn from its start to its end. */
export interface Stage {
  label: string;
  kind: StageKind;
  start_ms: number;
  end_ms: number;
  detail: string;
  /** A decode bar: when each token shown was computed; an SSE bar: when each frame arrived. */
  ticks_ms: number[];
  /** Inside the bar: the stretches XLA spent compiling (or loading) programs new to the process. */
  compiles: Interval[];
}

/** One part of the context window's gauge, in tokens. */
export interface GaugePart {
  kind: GaugeKind;
  label: string;
  tokens: number;
}

/** A stretch of time, in ms from the submission. */
export interface Interval {
  start_ms: number;
  end_ms: number;
}

/** Every figure of one turn, derived once from its events. */
export interface TurnAccount {
  status: AccountStatus;
  /** The turn went to a server (its model's internals are not known here). */
  remote: boolean;
  /** How many of the turn's events it was derived from (a view keeps the one from the most). */
  events: number;
  fork_of: string;
  /** Every round's prompt counted (usage; None: a server did not report it). */
  prompt_tokens: number | null;
  /** The last round's prompt, in the window. */
  context_tokens: number;
  window: number;
  /** Tokens put in the KV cache by every prefill of the turn (prompts, a fork's kept answer, calls' beginnings). */
  prefill_tokens: number;
  /** Of prefill_tokens, those the prompt cache already held. */
  reused_tokens: number;
  computed_tokens: number;
  /** Tokens of the answer as shown (a fork's kept and chosen ones included). */
  answer_tokens: number;
  /** Of answer_tokens, a fork's: the forked answer's tokens it kept and the alternative chosen in its place. */
  kept_tokens: number;
  /** Tokens of the turn's tool calls, `<tool_call>` (or the line after it) to `</tool_call>`. */
  call_tokens: number;
  /** Of call_tokens, those the grammar fixed (keys, punctuation, a sole tool's name). */
  call_fixed_tokens: number;
  /** Every token the model output, as usage counts it (None: not known yet, or a server did not report it). */
  completion_tokens: number | null;
  /** Of completion_tokens, neither in the answer nor in a call: the end-of-sequence token, a stop string's. */
  unshown_tokens: number | null;
  /**
   * completion_tokens in words, each part named ("47 tokens generated: 12 in the answer + 34 in the tool call + 1
   * end-of-sequence token, not shown").
   */
  generated_note: string;
  /** When the first token was shown (None: none was). */
  ttft_ms: number | null;
  /** When the engine computed the first token shown (the output scan holds a word back until the next one). */
  first_computed_ms: number | null;
  /** What the time to the first token was made of, in words. */
  ttft_note: string;
  /** Waits drawn as queue bars: for the engine thread, then for the scheduler to start each prefill. */
  queued_ms: number;
  /** XLA compiling (or loading) programs new to the process, every compile bar's stretch. */
  compile_ms: number;
  /** Of compile_ms, the part before the first token was shown. */
  compile_before_first_ms: number;
  prefill_ms: number;
  decode_ms: number;
  /**
   * Over the decode bars' ticks: intervals between tokens shown, over their time less the compiling inside it (None:
   * fewer than two ticks in a bar).
   */
  tokens_per_s: number | null;
  tokens_per_s_note: string;
  /** From the submission to the turn's end (None while it runs). */
  answer_ms: number | null;
  /** Title work after the answer's end (0: none, or the title came mid-answer). */
  title_after_ms: number;
  /** From the submission to the last event (the title's, when it came after the answer). */
  total_ms: number;
  title: string;
  /**
   * Whose title it is and when it came ("the user's words (after the answer); the model's “Paris Answer” was not used:
   * …").
   */
  title_note: string;
  /** What the draft prewarm did for this turn ("" when none ran). */
  prewarm_note: string;
  rounds: RoundAccount[];
  /** The timeline's bars, in order of their start. */
  stages: Stage[];
}
