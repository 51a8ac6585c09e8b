/**
 * Attention heatmaps: pick layer / head / mode, request the matrix (`attention` message), draw the float16 cells
 * on a canvas through a lookup table, hover for query → key and value, click a segment cell to drill down. A
 * sliding-window layer (Gemma 2/3) sees only the last `window` positions: its map hatches the cells outside that
 * window and a caption says so, since their zeros are the mask's, not weights the model chose.
 */
import { buildHalfLut, buildRamp, fillPixels, heatStops, quantileHalf, type RGB } from "../colormap";
import { clear, el } from "../dom";
import { halfTable, toUint16 } from "../float16";
import { summarize, type TurnData } from "../state";
import type { AttentionErrorMessage, AttentionMessage, ModelInfo, ViewMessage } from "../types";

export interface Matrix {
  msg: AttentionMessage;
  bits: Uint16Array;
}

/** Draws a float16 matrix on a canvas (one pixel per cell); returns the milliseconds it took and the value the
 * colour ramp tops out at (the 99.5th percentile, for the colour scale). */
export function renderHeatmap(
  canvas: HTMLCanvasElement,
  bits: Uint16Array,
  rows: number,
  cols: number,
  background: RGB,
): { ms: number; max: number } {
  const t0 = performance.now();
  canvas.width = cols;
  canvas.height = rows;
  const max = quantileHalf(bits);
  const lut = buildHalfLut(buildRamp(heatStops(background)), max, "sqrt");
  let ctx: CanvasRenderingContext2D | null = null;
  try {
    ctx = canvas.getContext("2d");
  } catch {
    ctx = null; // no canvas support (jsdom): the fill still runs and is timed
  }
  const image = ctx ? ctx.createImageData(cols, rows) : { data: new Uint8ClampedArray(rows * cols * 4) };
  fillPixels(bits.subarray(0, rows * cols), lut, image.data);
  if (ctx) ctx.putImageData(image as ImageData, 0, 0);
  const ms = performance.now() - t0;
  canvas.setAttribute("data-render-ms", ms.toFixed(1));
  return { ms, max };
}

/** Token sequences longer than this wait for Show; shorter ones are drawn as soon as the tab opens. */
export const AUTO_SHOW_MAX = 512;
/** Axis labels are at least this many pixels apart (every k-th cell otherwise); 48 labels where nothing is laid
 * out (tests). */
const LABEL_PX = 14;

type Send = (msg: ViewMessage) => void;

/** The note under the heatmap: how to read it. */
const HINT =
  "Rows are query positions (what attends), columns key positions (what is attended to): the prompt, then the generated tokens. Hover a cell for its tokens and weight; in tokens view, hover a token chip to mark its row and shade the prompt by what it attended to.";

export class AttentionView {
  readonly el = el("div", { class: "cf-att" });
  private layer = el("select", { class: "cf-select", "data-testid": "attention-layer", "aria-label": "Layer" });
  private head = el("select", { class: "cf-select", "data-testid": "attention-head", "aria-label": "Head" });
  private mode = el("select", { class: "cf-select", "data-testid": "attention-mode", "aria-label": "Mode" });
  private showBtn = el("button", {
    class: "cf-btn cf-btn-primary",
    type: "button",
    "data-testid": "attention-show",
    text: "Show",
  });
  private status = el("span", { class: "cf-muted cf-att-status" });
  private canvas = el("canvas", { class: "cf-heatmap", "data-testid": "heatmap", width: 1, height: 1 });
  private box = el("div", { class: "cf-heat-box" });
  private marker = el("div", { class: "cf-heat-row-marker", hidden: true });
  private tip = el("div", { class: "cf-tip", hidden: true });
  private wrap = el("div", { class: "cf-heat-wrap" });
  private colLabels = el("div", { class: "cf-heat-cols", "data-testid": "attention-cols" });
  private rowLabels = el("div", { class: "cf-heat-rows", "data-testid": "attention-rows" });
  private topLabels = el("div", { class: "cf-heat-top", "data-testid": "attention-top" });
  private scale = el("div", { class: "cf-heat-scale", "data-testid": "attention-scale", hidden: true });
  private outside = el("div", { class: "cf-heat-outside", "data-testid": "attention-outside", hidden: true });
  private windowNote = el("div", { class: "cf-muted cf-att-window", "data-testid": "attention-window", hidden: true });
  private infoKey = "";
  private pendingTurn = "";
  private info: ModelInfo | null = null;
  private turn: TurnData | null = null;
  private pending = "";
  private counter = 0;
  matrix: Matrix | null = null;
  /** The heatmap's size the axis labels were laid out for: another (the panel narrowed, a sidebar opened) lays them
   * out again, so they never crowd into each other. */
  private labelledFor = "";

  constructor(
    private send: Send,
    private background: () => RGB,
  ) {
    this.mode.append(
      el("option", { value: "tokens", text: "tokens" }),
      el("option", { value: "segments", text: "segments" }),
    );
    this.showBtn.addEventListener("click", () => this.request());
    this.box.append(this.canvas, this.outside, this.marker);
    this.wrap.append(this.grid(), this.tip);
    this.el.append(
      this.controls(),
      this.windowNote,
      this.wrap,
      this.scale,
      el("div", { class: "cf-muted cf-att-hint", text: HINT }),
    );
    this.canvas.addEventListener("mousemove", (ev) => this.hover(ev));
    this.canvas.addEventListener("mouseleave", () => (this.tip.hidden = true));
    this.canvas.addEventListener("click", (ev) => this.drill(ev));
    if (typeof ResizeObserver !== "undefined") new ResizeObserver(() => this.relabel()).observe(this.box);
  }

  /** The axis labels again, for the heatmap's size now (once it is shown: a hidden one measures 0). */
  private relabel(): void {
    if (this.matrix && this.box.clientWidth > 0 && this.boxSize() !== this.labelledFor) this.drawAxes(this.matrix.msg);
  }

  private boxSize(): string {
    return `${this.box.clientWidth}×${this.box.clientHeight}`;
  }

  /** Layer, head and mode pickers, Show, and the status line. */
  private controls(): HTMLElement {
    return el(
      "div",
      { class: "cf-row cf-att-controls" },
      label("layer", this.layer),
      label("head", this.head),
      label("mode", this.mode),
      this.showBtn,
      this.status,
    );
  }

  /** The heatmap with the key labels above and below it and the query labels to its left. */
  private grid(): HTMLElement {
    return el(
      "div",
      { class: "cf-heat-grid" },
      el("span", { class: "cf-heat-corner cf-muted", text: "query ↓ · key →" }),
      this.topLabels,
      this.rowLabels,
      this.box,
      el("span", {}),
      this.colLabels,
    );
  }

  /** The layer and head pickers for a model: each layer labelled by its kind where the model has sliding layers. */
  setModelInfo(info: ModelInfo): void {
    const key = JSON.stringify([info.layers, info.heads, info.sliding_window ?? 0, info.sliding_layers ?? []]);
    this.info = info;
    if (key === this.infoKey) return;
    this.infoKey = key;
    const layer = this.layer.value;
    clear(this.layer);
    for (let i = 0; i < Math.max(info.layers, 1); i++)
      this.layer.appendChild(el("option", { value: i, text: layerLabel(info, i) }));
    this.layer.value = layer && Number(layer) < info.layers ? layer : String(Math.max(0, info.layers - 1));
    clear(this.head);
    this.head.appendChild(el("option", { value: -1, text: "mean" }));
    for (let i = 0; i < info.heads; i++) this.head.appendChild(el("option", { value: i, text: String(i) }));
  }

  setTurn(turn: TurnData | null): void {
    this.turn = turn;
    if (!turn) this.reset();
    const live = !turn || !summarize(turn.events).terminal;
    this.showBtn.disabled = !turn;
    if (turn && this.matrix && this.matrix.msg.turn_id !== turn.turn_id)
      this.status.textContent = "showing another turn — press Show";
    else if (live && turn) this.status.textContent = "";
  }

  /** Forgets the matrix (a new session: nothing of an old turn stays on show). */
  private reset(): void {
    this.matrix = null;
    this.pending = this.pendingTurn = "";
    this.canvas.width = this.canvas.height = 1;
    this.canvas.removeAttribute("data-render-ms");
    for (const node of [this.colLabels, this.rowLabels, this.topLabels]) clear(node);
    this.scale.hidden = this.outside.hidden = this.windowNote.hidden = true;
    this.status.textContent = "";
  }

  /** Draws the shown turn's attention without a click when its sequence is short and no matrix of it is here. */
  autoShow(): void {
    const turn = this.turn;
    if (!turn || !this.info || this.pendingTurn === turn.turn_id || this.matrix?.msg.turn_id === turn.turn_id) return;
    const s = summarize(turn.events);
    const prompt = s.rounds[s.rounds.length - 1]?.tokenized?.ids.length ?? 0;
    const length = prompt + s.tokens.length;
    if (!s.terminal || !prompt || length > AUTO_SHOW_MAX) return;
    this.request(undefined, undefined, "tokens");
  }

  /** Sends an `attention` request for the chosen turn / layer / head / mode (optionally a block). */
  request(rows?: [number, number], cols?: [number, number], mode?: "tokens" | "segments"): string | null {
    if (!this.turn) return null;
    const request_id = `att-${Date.now().toString(36)}-${++this.counter}`;
    this.pending = request_id;
    this.pendingTurn = this.turn.turn_id;
    const msg: ViewMessage = {
      type: "attention",
      request_id,
      turn_id: this.turn.turn_id,
      layer: Number(this.layer.value || 0),
      head: Number(this.head.value || -1),
      mode: mode ?? (this.mode.value as "tokens" | "segments"),
    };
    if (rows) msg.rows_range = rows;
    if (cols) msg.cols_range = cols;
    this.status.textContent = "computing…";
    this.send(msg);
    return request_id;
  }

  /** Handles `attention` / `attention_error` replies (ignores other views' requests). */
  receive(msg: AttentionMessage | AttentionErrorMessage, buffers: (DataView | ArrayBuffer)[]): void {
    if (msg.request_id !== this.pending) return;
    if (msg.type === "attention_error") {
      this.status.textContent = msg.message; // (not asked again on its own: Show asks again)
      this.status.classList.add("cf-error-text");
      return;
    }
    this.pendingTurn = "";
    this.status.classList.remove("cf-error-text");
    if (!buffers.length) return;
    this.matrix = { msg, bits: toUint16(buffers[0]) };
    this.draw();
  }

  draw(): void {
    if (!this.matrix) return;
    const { msg, bits } = this.matrix;
    const [rows, cols] = msg.shape;
    const { ms, max } = renderHeatmap(this.canvas, bits, rows, cols, this.background());
    this.canvas.setAttribute("data-turn", msg.turn_id);
    this.box.classList.toggle("cf-heat-segments", msg.mode === "segments");
    this.box.style.aspectRatio = msg.mode === "segments" ? "" : `${cols} / ${rows}`;
    const pool = msg.pool > 1 ? ` · pooled ${msg.pool}×${msg.pool}` : "";
    const kind = this.kindText(msg.layer);
    this.status.textContent = `layer ${msg.layer}${kind ? ` · ${kind}` : ""} · ${msg.head < 0 ? "mean of heads" : `head ${msg.head}`} · ${rows}×${cols}${pool} · drawn in ${ms.toFixed(0)} ms`;
    this.drawAxes(msg);
    this.drawScale(max, msg.mode);
    this.drawWindow(msg);
    this.marker.hidden = true;
  }

  /** The window of the matrix's layer: the reply's (what the kernel masked), else the model info's. */
  private windowOfMatrix(msg: AttentionMessage): number {
    return msg.window ?? windowOf(this.info, msg.layer);
  }

  /** "sliding 512" or "global" where the model mixes the two kinds ("" where every layer is global). */
  private kindText(layer: number): string {
    const label = this.info ? layerLabel(this.info, layer) : String(layer);
    return label.split(" · ")[1] ?? "";
  }

  /** A sliding layer's window: the cells outside it hatched (tokens view), a caption on how the layer sees. */
  private drawWindow(msg: AttentionMessage): void {
    const window = this.windowOfMatrix(msg);
    const region = msg.mode === "tokens" ? outsideWindow(msg, window) : "";
    this.outside.hidden = !region;
    this.outside.style.clipPath = region;
    const text = windowCaption(msg.layer, window, msg.tokens, Boolean(region), this.info?.sliding_window ?? 0);
    this.windowNote.textContent = text;
    this.windowNote.hidden = !text;
    if (region)
      this.scale.append(
        el(
          "span",
          { class: "cf-heat-key" }, // (one piece: the swatch never wraps apart from what it means)
          el("span", { class: "cf-heat-swatch", "aria-hidden": "true" }),
          el("span", { class: "cf-muted", text: `outside the ${window}-token window (masked)` }),
        ),
      );
  }

  /** Token labels on both axes (every k-th when there are many), or the segments under a segments matrix. */
  private drawAxes(msg: AttentionMessage): void {
    const [rows, cols] = msg.shape;
    const seq = this.sequence();
    this.labelledFor = this.boxSize();
    for (const node of [this.colLabels, this.rowLabels, this.topLabels]) clear(node);
    const room = (px: number) => (px > 0 ? Math.floor(px / LABEL_PX) : 48);
    /** A cell's label: the first token it covers along an axis with this range. */
    const name =
      ([start, end]: [number, number]) =>
      (cell: number) => {
        const i = covered(start, msg.pool, cell, end)[0];
        return shortToken(seq[i] ?? `#${i}`);
      };
    axisLabels(this.rowLabels, rows, room(this.box.clientHeight), name(msg.rows_range), "top");
    if (msg.mode === "segments") {
      for (const s of msg.segments)
        this.colLabels.appendChild(
          el("span", {
            class: `cf-heat-col cf-kind-${s.kind}`,
            title: `${s.label}: tokens ${s.start}–${s.end - 1} (${s.end - s.start})`,
            text: s.label,
          }),
        );
    } else {
      axisLabels(this.topLabels, cols, room(this.box.clientWidth), name(msg.cols_range), "left");
    }
  }

  /** The colour scale: the ramp from 0 to the 99.5th percentile (larger weights show as its top), √ spaced. */
  private drawScale(max: number, mode: string): void {
    clear(this.scale);
    this.scale.hidden = false;
    const stops = heatStops(this.background()).map(
      (c, i, all) => `rgb(${c.join(",")}) ${((i / (all.length - 1)) * 100).toFixed(0)}%`,
    );
    const ramp = el("span", { class: "cf-heat-ramp" });
    ramp.style.background = `linear-gradient(90deg, ${stops.join(", ")})`;
    const ticks = el("span", { class: "cf-heat-ticks" });
    for (const [at, value] of [
      [0, 0],
      [0.5, max / 4],
      [1, max],
    ] as const) {
      const tick = el("span", { text: `${at === 1 ? "≥ " : ""}${fmtWeight(value)}` });
      tick.style.left = `${at * 100}%`;
      ticks.appendChild(tick);
    }
    const what = mode === "segments" ? "attention mass on the segment" : "attention weight";
    this.scale.append(
      el("span", { class: "cf-muted", text: what }),
      el("span", { class: "cf-heat-ramp-box" }, ramp, ticks),
      el("span", { class: "cf-muted", text: "(√ scale, top = 99.5th percentile)" }),
    );
  }

  /** The tokens of the matrix's turn sequence: the final prompt, then the generated tokens (texts). */
  private sequence(): string[] {
    const { turn, matrix } = this;
    if (!turn || !matrix || turn.turn_id !== matrix.msg.turn_id) return [];
    const s = summarize(turn.events);
    const last = s.rounds[s.rounds.length - 1];
    const ids = Array.isArray(matrix.msg.tokens)
      ? matrix.msg.tokens
      : [...(last?.tokenized?.ids ?? []), ...s.tokens.map((t) => t.token_id)];
    return ids.map((id) => turn.pieces[String(id)]?.[0] ?? `#${id}`);
  }

  private cellAt(ev: MouseEvent): { r: number; c: number } | null {
    if (!this.matrix) return null;
    const rect = this.canvas.getBoundingClientRect();
    const [rows, cols] = this.matrix.msg.shape;
    const c = Math.floor(((ev.clientX - rect.left) / rect.width) * cols);
    const r = Math.floor(((ev.clientY - rect.top) / rect.height) * rows);
    return r >= 0 && r < rows && c >= 0 && c < cols ? { r, c } : null;
  }

  private hover(ev: MouseEvent): void {
    const cell = this.cellAt(ev);
    if (!cell || !this.matrix) return;
    const { msg, bits } = this.matrix;
    const value = halfTable()[bits[cell.r * msg.shape[1] + cell.c]];
    const seq = this.sequence();
    const rowRange = covered(msg.rows_range[0], msg.pool, cell.r, msg.rows_range[1]);
    const lines = [`query ${rangeText(rowRange, seq)}`];
    if (msg.mode === "segments") {
      const s = msg.segments[cell.c];
      lines.push(
        `key segment “${s?.label ?? cell.c}” [${s?.start}, ${s?.end})`,
        `mass ${value.toFixed(4)} · click to drill down`,
      );
    } else {
      const keys = covered(msg.cols_range[0], msg.pool, cell.c, msg.cols_range[1]);
      const window = this.windowOfMatrix(msg);
      const masked = window > 0 && keys[1] <= rowRange[0] - window + 1; // every key before every query's window
      lines.push(
        `key ${rangeText(keys, seq)}`,
        masked ? `outside the ${window}-token sliding window: masked` : `weight ${value.toFixed(4)}`,
      );
    }
    this.tip.textContent = lines.join("\n");
    this.tip.hidden = false;
    const wrap = this.wrap.getBoundingClientRect();
    this.tip.style.left = `${Math.min(ev.clientX - wrap.left + 14, wrap.width - 240)}px`;
    this.tip.style.top = `${ev.clientY - wrap.top + 14}px`;
  }

  private drill(ev: MouseEvent): void {
    const cell = this.cellAt(ev);
    if (!cell || !this.matrix || this.matrix.msg.mode !== "segments") return;
    const { msg } = this.matrix;
    const seg = msg.segments[cell.c];
    if (!seg) return;
    const rows = msg.pool > 1 ? covered(msg.rows_range[0], msg.pool, cell.r, msg.rows_range[1]) : msg.rows_range;
    this.request(rows, [seg.start, seg.end], "tokens");
  }

  /**
   * For a hovered generated token: the weights its row put on each prompt position (null when no tokens-mode
   * matrix of that turn covering it is loaded), and the row marked on the heatmap.
   */
  highlight(turnId: string, tokenIndex: number | null): Float32Array | null {
    this.marker.hidden = true;
    const m = this.matrix;
    if (tokenIndex === null || !m || m.msg.turn_id !== turnId || m.msg.mode !== "tokens") return null;
    const { msg, bits } = m;
    const pos = msg.prompt_tokens + tokenIndex;
    if (pos < msg.rows_range[0] || pos >= msg.rows_range[1]) return null;
    const r = Math.floor((pos - msg.rows_range[0]) / msg.pool);
    const [rows, cols] = msg.shape;
    this.marker.hidden = false;
    this.marker.style.top = `${(r / rows) * 100}%`;
    this.marker.style.height = `${Math.max(100 / rows, 0.4)}%`;
    const values = halfTable();
    const weights = new Float32Array(msg.prompt_tokens);
    for (let p = 0; p < msg.prompt_tokens; p++) {
      const c = Math.floor((p - msg.cols_range[0]) / msg.pool);
      if (c >= 0 && c < cols) weights[p] = values[bits[r * cols + c]];
    }
    return weights;
  }
}

/** A layer's sliding window by the model info (0: a global layer, or a model without sliding layers). */
export function windowOf(info: ModelInfo | null, layer: number): number {
  return info?.sliding_window && info.sliding_layers?.includes(layer) ? info.sliding_window : 0;
}

/** The layer picker's label: "4 · sliding 512" or "5 · global" where the model has both kinds (Gemma 2/3); the
 * number alone where every layer is global (a kind on each would say nothing). */
export function layerLabel(info: ModelInfo, layer: number): string {
  if (!info.sliding_window || !info.sliding_layers?.length) return String(layer);
  const window = windowOf(info, layer);
  return window ? `${layer} · sliding ${window}` : `${layer} · global`;
}

/**
 * The cells of a tokens-mode matrix that lie before a sliding window (a query at q sees keys q − window + 1 … q)
 * as a CSS `clip-path` polygon in % of the heatmap, or "" when there are none (a global layer, or a sequence the
 * window covers). A staircase over the query rows, in the canvas's cells (a pooled last cell is as wide as the
 * others); past 512 rows, one step per block of rows at the block's first edge, so it never covers a key the
 * window shows.
 */
export function outsideWindow(
  msg: Pick<AttentionMessage, "rows_range" | "cols_range" | "pool" | "shape">,
  window: number,
): string {
  const [[r0, r1], [c0, c1], [rows, cols]] = [msg.rows_range, msg.cols_range, msg.shape];
  const edge = (q: number) => Math.min(Math.max(q - window + 1, c0), c1); // the query's first key in the window
  if (window <= 0 || edge(r1 - 1) <= c0) return "";
  const x = (k: number) => Math.min(((k - c0) / msg.pool / cols) * 100, 100);
  const y = (q: number) => Math.min(((q - r0) / msg.pool / rows) * 100, 100);
  const step = Math.ceil((r1 - r0) / 512);
  const points: [number, number][] = [[0, 0]];
  for (let q = r0; q < r1; q += step) points.push([x(edge(q)), y(q)], [x(edge(q)), y(Math.min(q + step, r1))]);
  points.push([0, 100]);
  return `polygon(${points.map(([a, b]) => `${+a.toFixed(3)}% ${+b.toFixed(3)}%`).join(", ")})`;
}

/** The caption over a layer's map: how a sliding layer sees (and whether this turn reaches past its window), or
 * that a layer is global, where the model has sliding layers too ("" for a model whose every layer is global). */
export function windowCaption(
  layer: number,
  window: number,
  tokens: number,
  hatched: boolean,
  modelWindow: number,
): string {
  if (window > 0) {
    const sees = `Layer ${layer} is a sliding-window layer: each token sees only the last ${window.toLocaleString()} positions (itself included)`;
    if (hatched) return `${sees}; the hatched cells lie outside its window (masked, weight 0).`;
    if (tokens <= window)
      return `${sees}. This turn's ${tokens.toLocaleString()} tokens all fit in the window, so here it sees every earlier token, as a global layer does.`;
    return `${sees}.`;
  }
  if (modelWindow > 0)
    return `Layer ${layer} is global: each token sees every token before it (the sliding layers see only the last ${modelWindow.toLocaleString()}).`;
  return "";
}

/** Labels along one axis of `n` cells, each at its cell's centre (`side`: "top" for rows, "left" for columns). */
function axisLabels(
  box: HTMLElement,
  n: number,
  most: number,
  text: (cell: number) => string,
  side: "top" | "left",
): void {
  const every = Math.max(1, Math.ceil(n / Math.max(most, 1)));
  for (let i = 0; i < n; i += every) {
    const label = el("span", { class: "cf-heat-label", text: text(i) });
    label.style[side] = `${((i + 0.5) / n) * 100}%`;
    box.appendChild(label);
  }
}

/** A token as an axis label: whitespace made visible, at most 12 characters. */
function shortToken(text: string): string {
  const shown = text.replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(/^ /, "␣");
  return shown.length > 12 ? `${shown.slice(0, 11)}…` : shown || "∅";
}

function fmtWeight(v: number): string {
  return v === 0 ? "0" : v >= 0.01 ? v.toFixed(2) : v.toExponential(0);
}

function label(text: string, control: HTMLElement): HTMLElement {
  return el("label", { class: "cf-field" }, el("span", { class: "cf-field-label", text }), control);
}

/** The positions one (possibly pooled) cell covers. */
export function covered(start: number, pool: number, cell: number, end: number): [number, number] {
  const a = start + cell * pool;
  return [a, Math.min(a + pool, end)];
}

function rangeText([a, b]: [number, number], seq: string[]): string {
  const show = (i: number) => (seq[i] !== undefined ? `“${seq[i].replace(/\n/g, "↵")}”` : "");
  return b - a <= 1 ? `#${a} ${show(a)}` : `#${a}–${b - 1} (${b - a} tokens) ${show(a)}…${show(b - 1)}`;
}
