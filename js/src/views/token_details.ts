/**
 * The token details card: id, bytes, probability under the model, entropy, and the alternatives the sampler saw:
 * each with its probability under the model, after the repetition penalty (where the engine said: never for a
 * remote turn) and after the sampler's settings, and why a cut one was cut. The chosen token's three probabilities
 * say which knob moved it.
 */
import { el, visibleText } from "../dom";
import type { Alternative, Pieces, TokenDelta } from "../types";

export interface TokenDetailsOptions {
  /** Whether "regenerate from here" is offered (latest turn, idle). */
  canFork: boolean;
  /** The turn's sampling settings (its turn_started event's params): they say which cut applied. */
  params: Record<string, unknown>;
  onFork: (tokenId: number) => void;
  /** "why not this?" on each other alternative: explain the chosen token rather than it (absent: not offered). */
  whyRather?: ((tokenId: number) => void) | null;
  /** A section after the alternatives (the popover's lens and "why" actions). */
  extra?: HTMLElement | null;
}

/** The bytes of a token as spaced hex ("e2 86 b5"), from the turn's pieces. */
export function tokenHex(pieces: Pieces, tokenId: number): string {
  const hex = pieces[String(tokenId)]?.[1] ?? "";
  return hex.replace(/(..)(?!$)/g, "$1 ");
}

const REMOTE =
  "From a remote server: it sends each token's bytes, logprob and top 5 alternatives, not the token's id, the entropy, the sampler's probabilities or anything beyond those 5; forking from here needs the local model.";

const num = (v: unknown, fallback: number) => (typeof v === "number" && Number.isFinite(v) ? v : fallback);
const pct = (logprob: number) => `${(Math.exp(logprob) * 100).toFixed(1)} %`;
const LOWERED = "it is already in the text the penalty counts (a chat's: its answer so far)";

/** The turn's repetition penalty, where the engine reported what it did at this token (every alternative's
 * probability after it: a local turn's; a remote server sends none) and it was on; else null (nothing to show). */
export function penaltyShown(token: TokenDelta, params: Record<string, unknown>): number | null {
  const penalty = num(params.repetition_penalty, 1);
  const known =
    token.alternatives.length > 0 && token.alternatives.every((a) => typeof a.penalized_logprob === "number");
  return known && penalty !== 1 ? penalty : null;
}

/**
 * Why the sampler gave `alt` probability 0, from the settings and what the alternatives show. The sampler cuts
 * by rank (top-k), by the mass of the tokens above (top-p) and by the ratio to the top token (min-p), after the
 * repetition penalty and the temperature; the alternatives are the top tokens after the penalty, in order, so a
 * token's place in the list is its rank. The ratio uses the logprobs after the penalty scaled by the temperature
 * (exact; in a turn recorded without them, the model's: exact unless the penalty touched these tokens).
 */
export function cutReason(
  alt: Alternative,
  rank: number,
  alternatives: readonly Alternative[],
  params: Record<string, unknown>,
): string {
  if (alt.sampling_prob > 0 || alt.sampling_prob < 0) return ""; // (< 0: not known, a remote server's)
  const temperature = num(params.temperature, 1);
  const topK = num(params.top_k, 0);
  const topP = num(params.top_p, 1);
  const minP = num(params.min_p, 0);
  const top = alternatives[0];
  const exact = typeof alt.penalized_logprob === "number" && typeof top?.penalized_logprob === "number";
  const lowered = exact ? alt.penalized : num(params.repetition_penalty, 1) !== 1 && top && alt.logprob > top.logprob;
  const penalized = lowered && !exact ? " (the repetition penalty lowered it)" : ""; // (exact: its ↓ says so)
  const logprob = (a: Alternative) => (exact ? (a.penalized_logprob as number) : a.logprob);
  if (temperature === 0) return `greedy (temperature 0): only the top token${penalized}`;
  if (topK > 0 && rank >= topK) return `cut by top-k ${topK}${penalized}`;
  if (minP > 0 && top && Math.exp((logprob(alt) - logprob(top)) / temperature) < minP)
    return `below min-p ${minP}${penalized}`;
  const keptBelow = alternatives.some((a, i) => i > rank && a.sampling_prob > 0);
  if (topP < 1 && !keptBelow) return `cut by top-p ${topP}${penalized}`;
  return "not allowed here (tool-call schema)";
}

/** The card a chip's popover shows: the token's facts, its alternatives, and the settings it was sampled with. */
export function tokenDetails(token: TokenDelta, pieces: Pieces, options: TokenDetailsOptions): HTMLElement {
  return el(
    "div",
    { class: "cf-token-details", "data-testid": "token-details" },
    el(
      "div",
      { class: "cf-td-head" },
      el("code", { class: "cf-td-text", text: visibleText(token.text) }),
      token.redacted ? el("span", { class: "cf-badge cf-act-redact", text: "redacted" }) : null,
    ),
    tokenFacts(token, pieces, options.params),
    token.token_id < 0
      ? el("div", { class: "cf-muted cf-remote-note", "data-testid": "remote-token", text: REMOTE })
      : null,
    token.alternatives.length
      ? alternativesTable(token, options)
      : el("div", { class: "cf-muted", text: "No alternatives recorded." }),
    penaltyKey(token),
    el("div", { class: "cf-muted cf-td-settings", text: settingsLine(options.params) }),
    options.extra ?? null,
  );
}

/** Id, index, the chosen token's probabilities (under the model, after the penalty, after sampling), entropy and
 * bytes, each with a tooltip that says what it measures. */
function tokenFacts(token: TokenDelta, pieces: Pieces, params: Record<string, unknown>): HTMLElement {
  const chosen = token.alternatives.find((a) => isChosen(a, token));
  const remote = token.token_id < 0;
  return el(
    "dl",
    { class: "cf-facts" },
    ...fact("id", remote ? "— (not sent)" : String(token.token_id)),
    ...fact("index", String(token.index)),
    ...fact(
      "probability",
      `${pct(token.logprob)} under the model (logprob ${token.logprob.toFixed(3)})`,
      "its softmax at temperature 1, before any sampling setting",
    ),
    ...penaltyFact(token, chosen, params),
    ...fact(
      "after sampling",
      chosen && chosen.sampling_prob >= 0 ? `${(chosen.sampling_prob * 100).toFixed(1)} %${knobs(params)}` : "—",
      "the chance the sampler gave it, after repetition penalty, temperature, top-k / top-p / min-p",
    ),
    ...fact(
      "entropy",
      remote ? "— (not sent)" : `${token.entropy.toFixed(2)} nats`,
      "of the model's distribution: how unsure it was",
    ),
    ...fact("bytes", tokenHex(pieces, token.token_id) || "—", "the token's raw bytes, hex", "cf-hex"),
  );
}

/** The chosen token's probability after the repetition penalty alone, and why it moved: lowered (it was seen
 * before) or raised (the penalty lowered others). Nothing where the penalty is off or was not reported. */
function penaltyFact(token: TokenDelta, chosen: Alternative | undefined, params: Record<string, unknown>) {
  const penalty = penaltyShown(token, params);
  if (penalty === null || !chosen) return [];
  const others = token.alternatives.filter((a) => a.penalized && a !== chosen).map((a) => `“${visibleText(a.text)}”`);
  const why = chosen.penalized
    ? ` (lowered: ${LOWERED})`
    : others.length
      ? ` (raised: the penalty lowered ${others.slice(0, 2).join(", ")}${others.length > 2 ? "…" : ""})`
      : "";
  return fact(
    "after penalty",
    `${pct(chosen.penalized_logprob as number)}${why}`,
    `after the repetition penalty ${penalty} alone: at temperature 1, before any cut`,
  );
}

/** The settings besides the penalty that changed the distribution, as " with temperature 0.2, top-p 0.9". */
function knobs(params: Record<string, unknown>): string {
  const temperature = num(params.temperature, 1);
  if (temperature === 0) return " (greedy: temperature 0)";
  const parts = [
    temperature !== 1 ? `temperature ${temperature}` : "",
    num(params.top_k, 0) > 0 ? `top-k ${params.top_k}` : "",
    num(params.top_p, 1) < 1 ? `top-p ${params.top_p}` : "",
    num(params.min_p, 0) > 0 ? `min-p ${params.min_p}` : "",
  ].filter(Boolean);
  return parts.length ? ` with ${parts.join(", ")}` : "";
}

/** A row per alternative the sampler saw, in rank order, under headers that say which probability is which. */
function alternativesTable(token: TokenDelta, options: TokenDetailsOptions): HTMLElement {
  const penalty = penaltyShown(token, options.params);
  const head = el(
    "tr",
    {},
    el("th", { text: "alternative" }),
    el("th", { class: "cf-num", text: "probability", title: "under the model (temperature 1, no cut)" }),
    penalty === null
      ? null
      : el("th", {
          class: "cf-num",
          text: "after penalty",
          title: `after the repetition penalty ${penalty} alone (temperature 1, no cut)`,
        }),
    el("th", {
      class: "cf-num",
      text: "after sampling",
      title: "after repetition penalty, temperature and top-k / top-p / min-p: what the sampler drew from",
    }),
    el("th", {}),
  );
  const rows = token.alternatives.map((alt, rank) => altRow(alt, rank, token, options, penalty !== null));
  return el("table", { class: "cf-alts" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

function altRow(
  alt: Alternative,
  rank: number,
  token: TokenDelta,
  options: TokenDetailsOptions,
  withPenalty: boolean,
): HTMLElement {
  const reason = cutReason(alt, rank, token.alternatives, options.params);
  const chosen = isChosen(alt, token);
  return el(
    "tr",
    { class: `${reason ? "cf-alt-cut" : ""}${chosen ? " cf-alt-chosen" : ""}`.trim() || null },
    el("td", {}, el("code", { class: "cf-alt-text", text: visibleText(alt.text) }), penaltyMark(alt)),
    el("td", { class: "cf-num", text: pct(alt.logprob) }),
    withPenalty ? el("td", { class: "cf-num", text: pct(alt.penalized_logprob as number) }) : null,
    el(
      "td",
      { class: "cf-num" },
      reason
        ? el("span", { class: "cf-cut", "data-testid": "cut-reason", text: reason })
        : alt.sampling_prob < 0
          ? el("span", { class: "cf-muted", text: "—" })
          : probBar(alt.sampling_prob),
    ),
    el("td", {}, altAction(alt, chosen, options)),
  );
}

/** "↓" after an alternative the repetition penalty lowered. */
function penaltyMark(alt: Alternative): HTMLElement | null {
  if (!alt.penalized) return null;
  const title = `the repetition penalty lowered it: ${LOWERED}`;
  return el("span", { class: "cf-pen-mark", "data-testid": "penalized", title, text: "↓" });
}

/** What "↓" means, under a table that shows one. */
function penaltyKey(token: TokenDelta): HTMLElement | null {
  if (!token.alternatives.some((a) => a.penalized)) return null;
  return el("div", { class: "cf-muted cf-td-key", text: `↓ lowered by the repetition penalty: ${LOWERED}` });
}

/** The alternative the sampler took: by id, or for a remote token (ids not sent) by its logprob. */
function isChosen(alt: Alternative, token: TokenDelta): boolean {
  return token.token_id < 0 ? alt.logprob === token.logprob : alt.token_id === token.token_id;
}

/** "regenerate from here" on another token when forking is offered, and "why not this?" when the popover can
 * explain the chosen token rather than it; else whether this is the chosen one. */
function altAction(alt: Alternative, chosen: boolean, options: TokenDetailsOptions): HTMLElement {
  const { whyRather } = options;
  if (chosen || alt.token_id < 0 || (!options.canFork && !whyRather))
    return el("span", { class: "cf-muted", text: chosen ? "chosen" : "" });
  const actions = el("span", { class: "cf-alt-actions" });
  if (options.canFork) {
    const button = el("button", {
      class: "cf-link",
      type: "button",
      "data-testid": "fork",
      title: "Regenerate the answer from here with this token",
      text: "regenerate from here",
    });
    button.addEventListener("click", () => options.onFork(alt.token_id));
    actions.appendChild(button);
  }
  if (whyRather) {
    const why = el("button", {
      class: "cf-link",
      type: "button",
      "data-testid": "why-rather-this",
      title: "Why the chosen token rather than this one: attribute log p(chosen) − log p(this), in the Why tab",
      text: "why not this?",
    });
    why.addEventListener("click", () => whyRather(alt.token_id));
    actions.appendChild(why);
  }
  return actions;
}

function settingsLine(params: Record<string, unknown>): string {
  const parts = ["temperature", "top_k", "top_p", "min_p", "repetition_penalty"]
    .filter((k) => typeof params[k] === "number")
    .map((k) => `${k.replace("_", "-")} ${params[k]}`);
  return parts.length ? `sampled with ${parts.join(", ")}` : "";
}

function fact(name: string, value: string, title = "", cls = ""): HTMLElement[] {
  return [
    el("dt", { class: cls || null, title: title || null, text: name }),
    el("dd", { class: cls || null, title: title || null, text: value }),
  ];
}

function probBar(p: number): HTMLElement {
  const wrap = el("span", { class: "cf-pbar", title: p.toFixed(4) });
  const fill = el("span", { class: "cf-pbar-fill" });
  fill.style.width = `${Math.round(p * 100)}%`;
  wrap.append(fill, el("span", { class: "cf-pbar-num", text: `${(p * 100).toFixed(1)} %` }));
  return wrap;
}
