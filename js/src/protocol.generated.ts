// Generated from jupyter_chatflow/frontends/panel/protocol.py (and the options of settings.py) by
// jupyter_chatflow/frontends/panel/ts_types.py: do not edit.
// After changing the protocol, regenerate it: python -m jupyter_chatflow.frontends.panel.ts_types
// (tests/frontends/panel/test_ts_types.py fails while this file is out of date).

import type { AccountStatus, ChatEvent, SegmentKind, TrimStrategy, TurnAccount } from "./events.generated";

/** What the panel is doing: nothing; a turn generates; a model chosen in the settings loads. */
export type PanelStatus = "idle" | "generating" | "loading";

/** An attention map's columns: key positions, or the prompt's segments (each cell the attention mass on one). */
export type AttentionMode = "tokens" | "segments";

/**
 * How `why` attributes a token to its input: gradient × input (one backward pass), or integrated gradients from a zero
 * input (`steps` passes, with progress).
 */
export type InsideMethod = "grad_x_input" | "integrated_gradients";

/** Which look inside the model a progress or error message is about. */
export type InsideRequestKind = "lens" | "why";

/** Where a look stands: waiting for the engine (a turn runs), XLA compiling its program, computing. */
export type InsideStage = "queued" | "compiling" | "computing";

/** A binary buffer's element type (little-endian). */
export type ArrayDtype = "int32" | "float32";

/**
 * Token id (as a string) → [readable piece, hex of the token's bytes]: every prompt id, generated id and alternative of
 * the events it comes with.
 */
export type Pieces = Record<string, [string, string]>;

/** A draft's prompt put into the prompt cache before it is sent (see `Chat.prewarm`). */
export interface Prewarm {
  chars: number;
  prompt_tokens: number;
  computed_tokens: number;
  /** Prompt tokens already cached before the prewarm: a turn that reuses more than these used the prewarm. */
  cached_before: number;
  latency_ms: number;
}

/**
 * The panel's settings: one per option of a turn (`settings.OPTIONS`), which a turn sent from the panel takes as its
 * options (null: the option's default).
 */
export interface Settings {
  /** Divides the logits: lower is more predictable; 0 always takes the most likely token. */
  temperature: number;
  /** Keep only the k most likely tokens. */
  top_k: number;
  /** Nucleus sampling: keep the smallest set of tokens whose probability sums to at least p. */
  top_p: number;
  /** Drop tokens less likely than min_p times the most likely one; 0 keeps all. */
  min_p: number;
  /** Make tokens already in the answer less likely (a chat counts its answer alone). */
  repetition_penalty: number;
  /** The longest answer, in tokens. */
  max_tokens: number;
  /** Stop as soon as the answer contains one of these strings (not included in the answer). */
  stop: string[];
  /** Seed of the random stream: the same seed and prompt give the same answer; unset picks one. */
  seed: number | null;
  /** Keep generating past the model's stop tokens (for benchmarks: always exactly max_tokens). */
  ignore_eos: boolean;
  /** Tools the model may call: NAME[,NAME…] (calculator, variable, remember, recall, python). */
  tools: string[];
  /** auto | none | required | a tool's name, as in the OpenAI API. */
  tool_choice: string;
  /** Recall memories into the context and act on 'remember that …' / 'forget …'. */
  memory: boolean;
  /** Safety layers: off | input (scan only what the user sends) | all (input, model, output, tool). */
  safety: "off" | "input" | "all";
  /** How old turns leave a full window: drop them, or summarize them with the model. */
  trim: TrimStrategy;
  /** The most call → run → resume rounds in one turn. */
  max_tool_rounds: number;
}

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

/**
 * A finished turn as the `turns` trait holds it: what a view draws before it has the turn's events, and what it needs
 * to ask for them. The events, their pieces and the whole account come in an `events` message.
 */
export interface TurnRow {
  turn_id: string;
  /** The turn this one regenerated from one of its tokens ("" unless it is a fork). */
  fork_of: string;
  /** The draft's prewarm that ran before the turn (None when none did). */
  prewarm: Prewarm | null;
  /** The user's message, cut at `USER_CHARS` characters (the turn picker's label). */
  user: string;
  status: AccountStatus;
  /** Why a completed turn ended ("" for a turn that did not complete). */
  finish_reason: string;
  answer_tokens: number;
  call_tokens: number;
  tokens_per_s: number | null;
  ttft_ms: number | null;
  /** Every token the turn generated, named (the footer's tooltip). */
  generated_note: string;
}

/** The `live` trait: the turn now generating (its events come as `events` messages). */
export interface LiveTurn {
  turn_id: string;
  prewarm: Prewarm | null;
  fork_of: string;
}

/** The `model_info` trait: what the header, the settings and the attention view say about the model. */
export interface ModelInfo {
  name: string;
  /** 0 for a remote model, as are the other sizes: the server does not say how its model is built. */
  layers: number;
  heads: number;
  kv_heads: number;
  context_length: number;
  vocab_size: number;
  /** The tools a turn may enable (the settings' checkboxes). */
  tools: string[];
  /** A remote chat's server (its base URL); "" for a local model. */
  remote: string;
  /** The local model's GGUF file ("" when it has none, or it is remote). */
  file: string;
  /** What its weights were dequantized to ("float32", "bfloat16"; "" for a remote model). */
  dtype: string;
  /** One line on what the file is: "name: architecture, parameters, quantization, context; weights as …". */
  summary: string;
  /** The GGUF's `general.architecture` ("llama", "qwen2", "gemma3"…; "" for a remote model). */
  architecture: string;
  /** The sliding window of the layers in `sliding_layers` (0: the model has none, or it is remote). */
  sliding_window: number;
  /** The layers that attend only to the last `sliding_window` positions (Gemma 2/3); the others are global. */
  sliding_layers: number[];
  /**
   * The layers after which the safety probe's directions steer (the layers it reads, from 0 as `steer` counts); empty
   * where no probe was trained for the model (the steering form then offers only contrasting texts).
   */
  probe_layers: number[];
  /** The probe's hazard categories as [code, what it is] ("S1", "Violent Crimes"); empty where there is no probe. */
  probe_categories: [string, string][];
}

/** The widget's synced traits (`ChatWidget`'s), as a view reads them; a reload gets them all. */
export interface PanelTraits {
  /** The finished turns, oldest first, from this panel or any other sender on the chat. */
  turns: TurnRow[];
  live: LiveTurn | null;
  /** The view edits them (`model.set` + `save_changes`); a turn sent from the panel uses them. */
  settings: Settings;
  /** The session's title ("" until the model wrote one). */
  title: string;
  session: string;
  status: PanelStatus;
  model_info: ModelInfo;
  /** The last draft's prewarm (the box under the input shows it). */
  prewarm: Prewarm | null;
  /** The last problem with a request from the panel (one line, names the fix); "" when none. */
  error: string;
  /** While a turn runs: what XLA is compiling now and for how long ("" when nothing is). */
  compiling: string;
  /** While a model chosen in the settings loads: what the file is, then how far the load is ("" otherwise). */
  loading: string;
}

/** Start a turn with the panel's settings (refused while one generates). */
export interface SendRequest {
  type: "send";
  text: string;
}

/** Stop the live turn between two decode steps (it ends with a `cancelled` event). */
export interface StopRequest {
  type: "stop";
}

/** Archive the session and start an empty one (the panel clears its turns). */
export interface NewSessionRequest {
  type: "new_session";
}

/** The box's text, ~400 ms after typing stopped: the kernel prefills the prompt it would make. */
export interface DraftRequest {
  type: "draft";
  text: string;
}

/**
 * Send the events of turn `turn_id` after sequence number `after` (-1: all), with their pieces and the turn's account,
 * in an `events` message: a view asks for what it lacks (the live turn's after a reload mid-stream, a finished turn's
 * it never received).
 */
export interface FetchRequest {
  type: "fetch";
  turn_id: string;
  after: number;
}

/**
 * One layer's attention over a finished turn; the reply is an `attention` (or `attention_error`) message with the same
 * `request_id`.
 */
export interface AttentionRequest {
  type: "attention";
  request_id: string;
  turn_id: string;
  layer: number;
  /** A head, or -1: the mean over heads. */
  head: number;
  mode: AttentionMode;
  /** The query positions to cover (left out: all): a segment cell clicked to drill down. */
  rows_range?: [number, number] | null;
  cols_range?: [number, number] | null;
}

/** Regenerate the answer of turn `turn_id` from its token `index`, with `token_id` in its place. */
export interface ForkRequest {
  type: "fork";
  turn_id: string;
  index: number;
  token_id: number;
}

/**
 * Steer after `layer` along the direction from the `away` text to the `toward` text (`Model.direction`), `strength`
 * times the residual's typical length there.
 */
export interface TextSteer {
  layer: number;
  strength: number;
  toward: string;
  away: string;
}

/**
 * Steer after `layer` along the safety probe's direction for hazard `category` ("S1" … "S14"), `strength` times the
 * residual's typical length there (`Probe.direction`; `layer` one of `ModelInfo.probe_layers`).
 */
export interface ProbeSteer {
  layer: number;
  strength: number;
  category: string;
}

/**
 * Answer the latest turn `turn_id` again with attention heads knocked out (`heads`: [layer, head] pairs, from 0) and/or
 * the residual steered (`Chat.intervene`): a new turn beside it, which replaces it in the history.
 */
export interface InterveneRequest {
  type: "intervene";
  turn_id: string;
  heads: [number, number][];
  steer?: TextSteer | ProbeSteer | null;
}

/** Load the GGUF file at `path` (as `dtype`; left out: the backend's default) for the chat's next turns. */
export interface LoadModelRequest {
  type: "load_model";
  path: string;
  dtype?: string | null;
}

/**
 * The logit lens over a finished turn: what each layer would have predicted at each of its answer's tokens (and at each
 * position of its last prompt). `inside_progress` messages say how far it is; the reply is a `lens` (or `inside_error`)
 * message with the same `request_id`.
 */
export interface LensRequest {
  type: "lens";
  request_id: string;
  turn_id: string;
}

/**
 * Which positions of its input made answer token `index` of a finished turn (`Model.attribution`); the reply is a `why`
 * (or `inside_error`) message with the same `request_id`, after `inside_progress` messages.
 */
export interface WhyRequest {
  type: "why";
  request_id: string;
  turn_id: string;
  /** The answer token's `index` (its `token` event's). */
  index: number;
  method: InsideMethod;
  /** Explain the token rather than this one ("why this rather than that"; left out: the token alone). */
  contrast_token_id?: number | null;
  /** Integrated gradients' steps (left out: `inside_requests.STEPS`). */
  steps?: number | null;
}

/**
 * A batch of a turn's events (every ~40 ms while it runs, or a `fetch`'s reply), the pieces of the tokens in them, and
 * the turn's account when it is due (at most every 0.2 s while it streams; always at its end and in a reply). A view
 * keeps each event once, by its sequence number.
 */
export interface EventsMessage {
  type: "events";
  turn_id: string;
  events: ChatEvent[];
  pieces: Pieces;
  account: TurnAccount | null;
}

/** A column group of a `segments` map: a segment of the prompt (or "generated"), as token positions. */
export interface AttentionSegment {
  label: string;
  kind: SegmentKind;
  start: number;
  end: number;
}

/** An attention map, its matrix in the message's one binary buffer (row-major float16, little-endian). */
export interface AttentionMessage {
  type: "attention";
  request_id: string;
  turn_id: string;
  layer: number;
  head: number;
  mode: AttentionMode;
  shape: [number, number];
  dtype: "float16";
  /** The sequence's length: the final prompt's tokens, then the generated ones. */
  tokens: number;
  prompt_tokens: number;
  /** Each cell averages `pool` × `pool` positions (1: one position a side). */
  pool: number;
  rows_range: [number, number];
  cols_range: [number, number];
  segments: AttentionSegment[];
  /** The layer's sliding window: a query at p sees keys p - window + 1 … p (0: a global layer). */
  window: number;
}

/** Why an attention request could not be answered. */
export interface AttentionErrorMessage {
  type: "attention_error";
  request_id: string;
  message: string;
}

/** One binary buffer of a message: its name, element type and shape (row-major). */
export interface ArrayInfo {
  name: string;
  dtype: ArrayDtype;
  shape: number[];
}

/**
 * The logit lens over a turn: each residual read through the final norm and the output head, before the first layer
 * (row 0) and after each layer (row i; the last row is the model's own prediction). Per answer token, at the position
 * that predicted it: the top `k` tokens of each row, and the chosen token and its alternatives row by row (`series`).
 * The arrays are the message's binary buffers, in the order `arrays` lists them: `top_ids` int32 [N, layers + 1, k],
 * `top_logprobs` float32 [N, layers + 1, k], `series_ranks` int32 [N, M, layers + 1] (1: the top choice; 0: below the
 * top `depth`, not known), `series_logprobs` float32 [N, M, layers + 1] (NaN where the rank is 0), `prompt_logprobs`
 * float32 [prompt_tokens].
 */
export interface LensMessage {
  type: "lens";
  request_id: string;
  turn_id: string;
  layers: number;
  k: number;
  /** A `series` token's rank and log-probability are known where it is among a row's top `depth`. */
  depth: number;
  /** The answer tokens covered (their `index`), the arrays' first axis (N). */
  indices: number[];
  /** Per answer token, the position of its round's sequence (prompt, then the answer) that predicted it. */
  positions: number[];
  /**
   * Per answer token, the ids read row by row: the chosen token, then the other alternatives the sampler saw (-1 pads
   * every list to M).
   */
  series: number[][];
  /**
   * Per answer token, the first row from which it was the top choice through the last row (-1: it is not the model's
   * top choice at the last row: the sampler took a lower one).
   */
  settled: number[];
  /** The turn's last prompt's length (its round's tokens are the last of `indices`). */
  prompt_tokens: number;
  /** Per position of that prompt, the model's top choice for the next token (the last row's). */
  prompt_top: number[];
  /** Per position of that prompt, the first row from which `prompt_top` was the top choice through the last. */
  prompt_settled: number[];
  /** The position of the user's message's last token in that prompt (-1: it has none). */
  message_end: number;
  arrays: ArrayInfo[];
  /** Every id of the top lists, of `series` and of `prompt_top`. */
  pieces: Pieces;
  /** XLA compile time in this look (a program is compiled for each look's shapes, then let go). */
  compile_ms: number;
  /** The whole look on the engine thread, compile included. */
  compute_ms: number;
}

/** A segment of a `why` input: a part of the prompt, or the answer before the token. */
export interface WhySegment {
  label: string;
  kind: SegmentKind;
  tokens: number;
  /** The sum of its positions' values. */
  value: number;
}

/**
 * Which positions of its input made answer token `index`: per position, the sum over the hidden dimension of gradient ×
 * input of log p(token) (less log p(contrast)) after the input's last position, and the sums per segment. The input is
 * the token's round's prompt, then the answer before the token.
 */
export interface WhyMessage {
  type: "why";
  request_id: string;
  turn_id: string;
  index: number;
  method: InsideMethod;
  /** Integrated gradients' steps (0 for gradient × input). */
  steps: number;
  target_id: number;
  contrast_id: number | null;
  /** log p of the token under the model where it was chosen (its `token` event's). */
  target_logprob: number;
  contrast_logprob: number | null;
  ids: number[];
  prompt_tokens: number;
  values: number[];
  /** Per position, its segment in `segments`. */
  column: number[];
  segments: WhySegment[];
  /** The sum of all values. */
  total: number;
  /** What to know about these values (integrated gradients that do not add up); "" when nothing. */
  note: string;
  compile_ms: number;
  compute_ms: number;
}

/** How far a `lens` or `why` request is, every ~0.25 s while it waits or computes. */
export interface InsideProgressMessage {
  type: "inside_progress";
  request_id: string;
  request: InsideRequestKind;
  stage: InsideStage;
  /** Integrated gradients' steps done (0 otherwise). */
  done: number;
  /** Integrated gradients' steps in all (0 otherwise). */
  total: number;
  /** The stage in words ("XLA compiles this look's program, 1.2 s so far"). */
  text: string;
  elapsed_ms: number;
}

/** Why a `lens` or `why` request could not be answered (the view shows `message`). */
export interface InsideErrorMessage {
  type: "inside_error";
  request_id: string;
  request: InsideRequestKind;
  message: string;
}

/** A draft's prefix went into the prompt cache. */
export interface PrewarmedMessage {
  type: "prewarmed";
  prewarm: Prewarm;
}

/**
 * A view's message the kernel could not take: an unknown type, a field missing or of the wrong type, or a request for
 * what is not there. The view shows `message`.
 */
export interface RequestErrorMessage {
  type: "request_error";
  /** The message's `type` ("" when it had none). */
  request: string;
  message: string;
}

/** What a view sends the kernel (`model.send(msg)`). */
export type ViewMessage =
  | SendRequest
  | StopRequest
  | NewSessionRequest
  | DraftRequest
  | FetchRequest
  | AttentionRequest
  | ForkRequest
  | InterveneRequest
  | LoadModelRequest
  | LensRequest
  | WhyRequest;

/** What the kernel sends a view (`model.on("msg:custom", …)`); every view of the widget receives each. */
export type KernelMessage =
  | EventsMessage
  | AttentionMessage
  | AttentionErrorMessage
  | PrewarmedMessage
  | RequestErrorMessage
  | LensMessage
  | WhyMessage
  | InsideProgressMessage
  | InsideErrorMessage;
