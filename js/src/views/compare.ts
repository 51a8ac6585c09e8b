/**
 * A turn answered again on a changed model (`Chat.intervene`: its `intervened` event says what changed) is drawn
 * beside the answer it replaces: the two answers side by side, the first token where they part marked in both, the
 * tokens around it with each one's logprob, and what the other stages did differently (safety, tool calls, the
 * finish). Every figure comes from the two turns' events.
 */
import { el, visibleText } from "../dom";
import { summarize, type TurnData, type TurnSummary } from "../state";
import type { Intervened, TokenDelta } from "../types";
import { tokenChip } from "./stream";

/** Tokens before and after the parting point that the divergence table lists. */
const BEFORE = 2;
const AFTER = 6;

/** The turn's `intervened` event (null: it was not answered again on a changed model). */
export function intervenedOf(turn: TurnData | undefined): Intervened | null {
  const found = turn?.events.find((e) => e.type === "intervened");
  return found && found.type === "intervened" ? found : null;
}

/** In words, as the kernel's `Intervened.describe()` says it: "heads 3.1 and 3.4 knocked out; steered after layer
 * 10 along … (strength 4)". */
export function describeIntervention(change: Intervened): string {
  const parts: string[] = [];
  const names = change.heads.map((h) => `${h.layer}.${h.head}`);
  if (names.length) {
    const listed = names.length === 1 ? names[0] : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
    parts.push(`${names.length === 1 ? "head" : "heads"} ${listed} knocked out`);
  }
  for (const s of change.steering) {
    const how = s.strength ? `strength ${s.strength}` : `length ${Number(s.norm.toPrecision(3))}`;
    parts.push(`steered after layer ${s.layer} along ${s.label} (${how})`);
  }
  return parts.join("; ") || "nothing changed";
}

/** The index of the first token where the answers differ (-1: the same tokens throughout). A shorter answer that
 * is the start of the longer one parts where it ends. */
export function partingPoint(a: readonly TokenDelta[], b: readonly TokenDelta[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i].token_id !== b[i].token_id || a[i].text !== b[i].text) return i;
  return a.length === b.length ? -1 : n;
}

/** What the stages other than the answer's tokens did differently: a line each ("" none). */
export function stageDifferences(original: TurnSummary, again: TurnSummary): string[] {
  const lines: string[] = [];
  const decision = (s: TurnSummary, layer: string) => {
    const d = s.safety.find((x) => x.layer === layer);
    return d ? `${d.action}${d.categories.length ? ` (${d.categories.join(", ")})` : ""}` : "none";
  };
  const layers = [...new Set([...original.safety, ...again.safety].map((d) => d.layer))];
  for (const layer of layers) {
    const [a, b] = [decision(original, layer), decision(again, layer)];
    if (a !== b) lines.push(`${layer} safety: ${a} before, ${b} when answered again`);
  }
  const calls = (s: TurnSummary) =>
    s.tools.map((t) => `${t.call.name}(${JSON.stringify(t.call.arguments)})`).join(", ") || "no tool call";
  const [ca, cb] = [calls(original), calls(again)];
  if (ca !== cb) lines.push(`tool calls: ${ca} before, ${cb} when answered again`);
  const finish = (s: TurnSummary) => {
    const t = s.terminal;
    return !t ? "still generating" : t.type === "completed" ? `finish: ${t.finish_reason}` : t.type;
  };
  const [fa, fb] = [finish(original), finish(again)];
  if (fa !== fb) lines.push(`${fa} before, ${fb} when answered again`);
  return lines;
}

function logprobText(t: TokenDelta | undefined): string {
  return t && Number.isFinite(t.logprob) ? t.logprob.toFixed(2) : "–";
}

function tokenText(t: TokenDelta | undefined): string {
  return t ? `“${visibleText(t.text)}”` : "(ended)";
}

/** One answer's column: its chips (hover or click one as in the answer), the parting point marked before its
 * token there, the tokens after it set apart. */
function column(turn: TurnData, tokens: readonly TokenDelta[], parting: number, label: string, testid: string) {
  const box = el("div", { class: "cf-compare-tokens" });
  tokens.forEach((token, i) => {
    if (i === parting) box.append(partingMark(parting));
    const chip = tokenChip(token, turn.turn_id);
    chip.setAttribute("data-testid", "compare-token");
    chip.classList.add(parting >= 0 && i >= parting ? "cf-differs" : "cf-same");
    chip.setAttribute("data-logprob", logprobText(token));
    chip.title = `token ${token.index} · logprob ${logprobText(token)}`;
    box.append(chip);
    if (token.text.includes("\n")) box.append(el("br"));
  });
  if (parting >= tokens.length && parting >= 0) box.append(partingMark(parting));
  const count = `${tokens.length} token${tokens.length === 1 ? "" : "s"}`;
  return el(
    "div",
    { class: "cf-compare-col", "data-testid": testid, "data-turn": turn.turn_id },
    el("div", { class: "cf-compare-label" }, el("b", { text: label }), el("span", { class: "cf-muted", text: count })),
    box,
  );
}

function partingMark(index: number): HTMLElement {
  return el("span", {
    class: "cf-parting",
    "data-testid": "parting",
    "data-index": index,
    title: `the answers part here: from token ${index} on they differ`,
    text: `≠${index}`,
  });
}

/** The tokens around the parting point, side by side with their logprobs. */
function divergence(a: readonly TokenDelta[], b: readonly TokenDelta[], parting: number): HTMLElement | null {
  if (parting < 0) return null;
  const rows = [];
  const end = Math.min(Math.max(a.length, b.length), parting + AFTER);
  for (let i = Math.max(0, parting - BEFORE); i < end; i++) {
    const same = a[i] && b[i] && a[i].token_id === b[i].token_id && a[i].text === b[i].text;
    rows.push(
      el(
        "tr",
        { class: same ? "cf-same" : "cf-differs", "data-index": i },
        el("td", { text: i }),
        el("td", { class: "cf-mono", text: tokenText(a[i]) }),
        el("td", { class: "cf-num", text: logprobText(a[i]) }),
        el("td", { class: "cf-mono", text: tokenText(b[i]) }),
        el("td", { class: "cf-num", text: logprobText(b[i]) }),
        el("td", { class: "cf-muted", text: i === parting ? "parts here" : same ? "same" : "differ" }),
      ),
    );
  }
  const head = el(
    "tr",
    {},
    ...["token", "before", "logprob", "answered again", "logprob", ""].map((t) => el("th", { text: t })),
  );
  return el(
    "table",
    { class: "cf-compare-table", "data-testid": "divergence" },
    el("thead", {}, head),
    el("tbody", {}, ...rows),
  );
}

/** The comparison of `again` (answered again, its `intervened` event `change`) with the turn it replaces. */
export function comparison(original: TurnData, again: TurnData, change: Intervened): HTMLElement {
  const [a, b] = [summarize(original.events), summarize(again.events)];
  const parting = partingPoint(a.tokens, b.tokens);
  const live = !b.terminal;
  const agree =
    parting < 0
      ? live
        ? `The answers agree on all ${b.tokens.length} tokens so far.`
        : `The answers are the same, all ${a.tokens.length} tokens.`
      : `The answers agree on ${parting ? `tokens 0–${parting - 1}` : "no token"} and part at token ${parting}: ${tokenText(a.tokens[parting])} (logprob ${logprobText(a.tokens[parting])}) before, ${tokenText(b.tokens[parting])} (logprob ${logprobText(b.tokens[parting])}) when answered again.`;
  const stages = stageDifferences(a, b);
  return el(
    "div",
    { class: "cf-compare", "data-testid": "intervention-compare", "data-parting": parting },
    el("div", {
      class: "cf-compare-head",
      "data-testid": "intervention-header",
      text: `↪ answered again with ${describeIntervention(change)} (for this turn only); it replaces the answer above`,
    }),
    el("div", { class: "cf-compare-summary", "data-testid": "parting-summary", text: agree }),
    el(
      "div",
      { class: "cf-compare-cols" },
      column(original, a.tokens, parting, "before", "compare-original"),
      column(again, b.tokens, parting, "answered again", "compare-intervened"),
    ),
    divergence(a.tokens, b.tokens, parting),
    stages.length
      ? el(
          "ul",
          { class: "cf-compare-stages", "data-testid": "stage-differences" },
          ...stages.map((s) => el("li", { text: s })),
        )
      : el("div", {
          class: "cf-muted",
          "data-testid": "stage-differences",
          text: "The other stages did the same (safety, tools, finish).",
        }),
  );
}
