/**
 * The logit lens on an answer (issue 36): what each layer would have predicted at each answer token, read from the
 * kernel's `lens` reply (its arrays in binary buffers). The answer's chips are shaded by the layer from which the
 * chosen token was the model's top choice through the last layer (`LENS_DEFINITION`, named on screen); a token's
 * popover shows its lens: that layer in words, the chosen token and the alternatives the sampler saw through the
 * layers (a chart of their probabilities), and each layer's top five with the chosen token's rank.
 */
import { el, visibleText } from "../dom";
import type { ArrayInfo, LensMessage, Pieces } from "../types";

export type Buffer = DataView | ArrayBuffer | ArrayBufferView;

/** What the shading means, as the answers bar says it. */
export const LENS_DEFINITION =
  "Lens: each token is shaded by the layer from which it was the model's top choice through the last layer (each layer's residual read through the final norm and output head) — darker: decided earlier.";
/** The mark of a token that was not the model's top choice at the last layer. */
export const NEVER_TEXT = "dashed: not the model's top choice even at the last layer (the sampler took a lower one)";

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A message's binary buffers as typed arrays, by the names its `arrays` gives (little-endian int32 / float32). */
export function namedArrays(
  infos: readonly ArrayInfo[],
  buffers: readonly Buffer[],
): Record<string, Int32Array | Float32Array> {
  if (infos.length !== buffers.length)
    throw new Error(`the reply names ${infos.length} arrays but carries ${buffers.length} buffers`);
  const out: Record<string, Int32Array | Float32Array> = {};
  infos.forEach((info, i) => {
    const b = buffers[i];
    const view = b instanceof ArrayBuffer ? new DataView(b) : new DataView(b.buffer, b.byteOffset, b.byteLength);
    const count = info.shape.reduce((n, d) => n * d, 1);
    if (view.byteLength !== count * 4)
      throw new Error(`${info.name}: ${view.byteLength} bytes for shape [${info.shape.join(", ")}]`);
    const Kind = info.dtype === "int32" ? Int32Array : Float32Array;
    if (littleEndian && view.byteOffset % 4 === 0) {
      out[info.name] = new Kind(view.buffer as ArrayBuffer, view.byteOffset, count);
      return;
    }
    const array = new Kind(count);
    for (let k = 0; k < count; k++)
      array[k] = info.dtype === "int32" ? view.getInt32(k * 4, true) : view.getFloat32(k * 4, true);
    out[info.name] = array;
  });
  return out;
}

/** A turn's lens, decoded. */
export interface Lens {
  msg: LensMessage;
  /** Rows: the embeddings, then one per layer. */
  rows: number;
  /** Tokens of `series` per answer token (M). */
  width: number;
  topIds: Int32Array;
  topLogprobs: Float32Array;
  ranks: Int32Array;
  logprobs: Float32Array;
  promptLogprobs: Float32Array;
  /** Answer token index → its row in the arrays. */
  at: Map<number, number>;
}

export function decodeLens(msg: LensMessage, buffers: readonly Buffer[]): Lens {
  const a = namedArrays(msg.arrays, buffers);
  const width = msg.series[0]?.length ?? 0;
  return {
    msg,
    rows: msg.layers + 1,
    width,
    topIds: a.top_ids as Int32Array,
    topLogprobs: a.top_logprobs as Float32Array,
    ranks: a.series_ranks as Int32Array,
    logprobs: a.series_logprobs as Float32Array,
    promptLogprobs: a.prompt_logprobs as Float32Array,
    at: new Map(msg.indices.map((index, n) => [index, n])),
  };
}

/** One token of `series` row by row: rank (1: top; 0: below the top `depth`) and log-probability (null there). */
export interface Series {
  id: number;
  ranks: number[];
  logprobs: (number | null)[];
}

/** One answer token's lens. */
export interface TokenLens {
  index: number;
  layers: number;
  depth: number;
  settled: number;
  /** Per row, its top k: [id, logprob]. */
  top: [number, number][][];
  /** The chosen token first, then the alternatives the sampler saw. */
  series: Series[];
}

export function tokenLens(lens: Lens, index: number): TokenLens | null {
  const n = lens.at.get(index);
  if (n === undefined) return null;
  const { rows, width, msg } = lens;
  const k = msg.k;
  const top: [number, number][][] = [];
  for (let r = 0; r < rows; r++) {
    const base = (n * rows + r) * k;
    top.push(Array.from({ length: k }, (_, j) => [lens.topIds[base + j], lens.topLogprobs[base + j]]));
  }
  const series: Series[] = [];
  msg.series[n].forEach((id, m) => {
    if (id < 0) return;
    const base = (n * width + m) * rows;
    const ranks = Array.from(lens.ranks.subarray(base, base + rows));
    const logprobs = Array.from(lens.logprobs.subarray(base, base + rows), (v, r) => (ranks[r] > 0 ? v : null));
    series.push({ id, ranks, logprobs });
  });
  return { index, layers: msg.layers, depth: msg.depth, settled: msg.settled[n], top, series };
}

/** "embeddings", "layer 12", "layer 30 (output)". */
export function rowName(row: number, layers: number): string {
  return row === 0 ? "embeddings" : row === layers ? `layer ${row} (output)` : `layer ${row}`;
}

/** The settled row in words. */
export function settledText(settled: number, layers: number): string {
  if (settled < 0) return "not the model's top choice even at the last layer: the sampler took a lower-ranked token";
  if (settled === 0) return "the top choice from the embeddings on, at every layer";
  if (settled === layers) return `the top choice only at the last layer (${layers})`;
  return `the top choice from layer ${settled} on, through the last (${layers})`;
}

/** How strongly a chip is shaded (0…1): 1 when the embeddings already chose it, 0.15 when only the last layer
 * did; -1: never the top choice. */
export function lensShade(settled: number, layers: number): number {
  if (settled < 0) return -1;
  return 0.15 + 0.85 * (1 - settled / Math.max(layers, 1));
}

const pct = (logprob: number | null) => {
  if (logprob === null) return "—";
  const p = Math.exp(logprob) * 100;
  return p >= 10 ? `${p.toFixed(0)} %` : p >= 0.1 ? `${p.toFixed(1)} %` : `${p.toExponential(0)} %`;
};
const piece = (pieces: Pieces, id: number) => visibleText(pieces[String(id)]?.[0] ?? `#${id}`);

/** Colours of the `series` tokens' lines: the chosen one the accent, the others the segment hues. */
const LINE_COLOURS = ["var(--cf-accent)", "var(--cf-k-tool)", "var(--cf-k-memory)", "var(--cf-k-user)"];
const lineColour = (m: number) =>
  LINE_COLOURS[m] ?? ["var(--cf-k-system)", "var(--cf-k-tools)", "var(--cf-fg2)"][(m - 4) % 3];

/** The lens section of a token's popover. */
export function lensPanel(t: TokenLens, pieces: Pieces, note: string): HTMLElement {
  const chosen = t.series[0];
  const name = `“${piece(pieces, chosen.id)}”`;
  return el(
    "div",
    { class: "cf-lens", "data-testid": "lens-panel", "data-settled": t.settled },
    el("div", { class: "cf-label", text: "Lens — what each layer would have predicted here" }),
    el("div", { class: "cf-lens-summary", "data-testid": "lens-summary" }, `${name} was `, settledSpan(t)),
    note ? el("div", { class: "cf-muted cf-lens-note", "data-testid": "lens-note", text: note }) : null,
    lensChart(t, pieces),
    lensTable(t, pieces),
  );
}

function settledSpan(t: TokenLens): HTMLElement {
  return el("span", {
    class: t.settled < 0 ? "cf-lens-never-text" : "cf-strong",
    text: settledText(t.settled, t.layers),
  });
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag: string, attrs: Record<string, string | number>, ...children: (Node | string)[]): SVGElement {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const c of children) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  return node;
}

/** Probabilities below this sit on the chart's floor. */
const FLOOR = 1e-4;

/** The `series` tokens' probabilities through the rows, on a log scale (a gap where a token is below the top
 * `depth`, its probability not known), the settled row marked. */
export function lensChart(t: TokenLens, pieces: Pieces): HTMLElement {
  const W = 420;
  const H = 128;
  const left = 52;
  const right = 8;
  const top = 8;
  const bottom = 22;
  const x = (r: number) => left + (r / Math.max(t.layers, 1)) * (W - left - right);
  const y = (logprob: number) => {
    const decades = Math.max(Math.log10(Math.max(Math.exp(logprob), FLOOR)), Math.log10(FLOOR));
    return top + (decades / Math.log10(FLOOR)) * (H - top - bottom);
  };
  const plot = svg("svg", {
    class: "cf-lens-chart",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": "probability of the chosen token and its alternatives after each layer",
  });
  for (const [p, label] of [
    [1, "100 %"],
    [0.01, "1 %"],
    [FLOOR, "≤ 0.01 %"],
  ] as const) {
    const at = y(Math.log(p));
    plot.append(
      svg("line", { class: "cf-lens-grid", x1: left, x2: W - right, y1: at, y2: at }),
      svg("text", { class: "cf-lens-tick", x: left - 4, y: at + 4, "text-anchor": "end" }, label),
    );
  }
  const every = t.layers > 20 ? 10 : 5;
  for (let r = 0; r <= t.layers; r += every)
    plot.append(
      svg("text", { class: "cf-lens-tick", x: x(r), y: H - 6, "text-anchor": "middle" }, r ? String(r) : "emb"),
    );
  if (t.settled >= 0)
    plot.append(svg("line", { class: "cf-lens-settled", x1: x(t.settled), x2: x(t.settled), y1: top, y2: H - bottom }));
  [...t.series].reverse().forEach((line, back) => {
    const m = t.series.length - 1 - back;
    const runs: string[][] = [[]];
    line.logprobs.forEach((lp, r) => {
      if (lp === null) runs.push([]);
      else runs[runs.length - 1].push(`${x(r).toFixed(1)},${y(lp).toFixed(1)}`);
    });
    for (const run of runs.filter((r) => r.length)) {
      const attrs = { class: m === 0 ? "cf-lens-line cf-lens-chosen" : "cf-lens-line", stroke: lineColour(m) };
      plot.append(run.length > 1 ? svg("polyline", { ...attrs, points: run.join(" ") }) : dot(run[0], lineColour(m)));
    }
  });
  const legend = t.series.map((line, m) =>
    el(
      "span",
      { class: "cf-legend-item" },
      el("span", { class: "cf-lens-swatch", style: `background: ${lineColour(m)}` }),
      el("code", { class: "cf-alt-text", text: piece(pieces, line.id) }),
      m === 0 ? el("span", { class: "cf-muted", text: "chosen" }) : null,
    ),
  );
  return el(
    "div",
    { class: "cf-lens-plot" },
    plot,
    el("div", { class: "cf-legend", "data-testid": "lens-legend" }, ...legend),
    el("div", {
      class: "cf-muted",
      text: `Probability after each layer (log scale)${t.series.some((s) => s.ranks.includes(0)) ? `; a gap: below that layer's top ${t.depth}, not known` : ""}.${t.settled >= 0 ? " The dashed line: where the chosen token became the top choice for good." : ""}`,
    }),
  );
}

function dot(point: string, colour: string): SVGElement {
  const [cx, cy] = point.split(",");
  return svg("circle", { cx, cy, r: 2.5, fill: colour });
}

/** Each row's top k (the output first), and the chosen token's rank and probability there. */
export function lensTable(t: TokenLens, pieces: Pieces): HTMLElement {
  const chosen = t.series[0];
  const head = el(
    "tr",
    {},
    el("th", { text: "after" }),
    el("th", { text: `top ${t.top[0]?.length ?? 0}` }),
    el("th", { class: "cf-num", text: "chosen", title: "its rank among the whole vocabulary, and its probability" }),
  );
  const rows: HTMLElement[] = [];
  for (let r = t.layers; r >= 0; r--) {
    const tops = t.top[r].map(([id, lp]) =>
      el(
        "span",
        { class: `cf-lens-top${id === chosen.id ? " cf-lens-is-chosen" : ""}` },
        el("code", { class: "cf-alt-text", text: piece(pieces, id) }),
        el("span", { class: "cf-muted", text: ` ${pct(lp)}` }),
      ),
    );
    const rank = chosen.ranks[r];
    rows.push(
      el(
        "tr",
        {
          class: t.settled >= 0 && r >= t.settled ? "cf-lens-row-settled" : null,
          "data-row": r,
          "data-top": t.top[r].map(([id]) => id).join(","),
          "data-rank": rank,
          "data-logprob": chosen.logprobs[r] ?? "",
        },
        el("td", { class: "cf-lens-layer", text: r === 0 ? "emb" : String(r) }),
        el("td", { class: "cf-lens-tops" }, ...tops),
        el("td", { class: "cf-num", text: rank ? `#${rank} · ${pct(chosen.logprobs[r])}` : `> ${t.depth}` }),
      ),
    );
  }
  return el(
    "div",
    { class: "cf-lens-table-box" },
    el(
      "table",
      { class: "cf-alts cf-lens-table", "data-testid": "lens-table" },
      el("thead", {}, head),
      el("tbody", {}, ...rows),
    ),
  );
}

/** What the model predicted at the end of the user's message, when it bears on this token: "At the end of your
 * message, the model already predicted “ Paris” (its top choice from layer 21 on, 63 %)." for the token it
 * predicted there, or what it predicted there for the answer's first token ("" otherwise). */
export function messageEndNote(lens: Lens, index: number, tokenId: number, pieces: Pieces): string {
  const { msg } = lens;
  const at = msg.message_end;
  if (at < 0 || at >= msg.prompt_top.length) return "";
  const predicted = msg.prompt_top[at];
  const settled = msg.prompt_settled[at];
  const when = settled === 0 ? "from the embeddings on" : `from layer ${settled} on`;
  const p = pct(lens.promptLogprobs[at]);
  const name = `“${piece(pieces, predicted)}”`;
  if (predicted === tokenId)
    return `At the end of your message, the model already predicted ${name} (its top choice ${when}, ${p}).`;
  if (index === msg.indices[0])
    return `At the end of your message, the model's top choice for the next token was ${name} (${when}, ${p}); the answer starts after the chat template's tokens.`;
  return "";
}
