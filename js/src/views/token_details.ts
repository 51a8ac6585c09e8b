/** The token details card: id, bytes, logprob, probability, entropy and the sampler's top-k alternatives. */
import { el, visibleText } from "../dom";
import type { Pieces, TokenDelta } from "../types";

export interface TokenDetailsOptions {
  /** Whether "regenerate from here" is offered (latest turn, idle). */
  canFork: boolean;
  onFork: (tokenId: number) => void;
}

/** The bytes of a token as spaced hex ("e2 86 b5"), from the turn's pieces. */
export function tokenHex(pieces: Pieces, tokenId: number): string {
  const hex = pieces[String(tokenId)]?.[1] ?? "";
  return hex.replace(/(..)(?!$)/g, "$1 ");
}

export function tokenDetails(token: TokenDelta, pieces: Pieces, options: TokenDetailsOptions): HTMLElement {
  const prob = Math.exp(token.logprob);
  const facts = el(
    "dl",
    { class: "cf-facts" },
    ...fact("id", String(token.token_id)),
    ...fact("bytes", tokenHex(pieces, token.token_id) || "—"),
    ...fact("logprob", token.logprob.toFixed(3)),
    ...fact("prob", `${(prob * 100).toFixed(1)} %`),
    ...fact("entropy", `${token.entropy.toFixed(2)} nats`),
    ...fact("index", String(token.index)),
  );
  const rows = token.alternatives.map((alt) => {
    const cut = alt.sampling_prob === 0;
    const chosen = alt.token_id === token.token_id;
    const action =
      options.canFork && !chosen
        ? el("button", { class: "cf-link", type: "button", "data-testid": "fork", title: "Regenerate the answer from here with this token", text: "regenerate from here" })
        : el("span", { class: "cf-muted", text: chosen ? "chosen" : "" });
    if (action instanceof HTMLButtonElement) action.addEventListener("click", () => options.onFork(alt.token_id));
    return el(
      "tr",
      { class: `${cut ? "cf-alt-cut" : ""}${chosen ? " cf-alt-chosen" : ""}`.trim() || null },
      el("td", {}, el("code", { class: "cf-alt-text", text: visibleText(alt.text) })),
      el("td", { class: "cf-num", text: alt.logprob.toFixed(2) }),
      el("td", { class: "cf-num" }, probBar(alt.sampling_prob), cut ? el("span", { class: "cf-cut", text: "cut" }) : null),
      el("td", {}, action),
    );
  });
  const table = el(
    "table",
    { class: "cf-alts" },
    el("thead", {}, el("tr", {}, el("th", { text: "alternative" }), el("th", { text: "logprob" }), el("th", { text: "sampling p" }), el("th", {}))),
    el("tbody", {}, ...rows),
  );
  return el(
    "div",
    { class: "cf-token-details", "data-testid": "token-details" },
    el("div", { class: "cf-td-head" }, el("code", { class: "cf-td-text", text: visibleText(token.text) }), token.redacted ? el("span", { class: "cf-badge cf-act-redact", text: "redacted" }) : null),
    facts,
    token.alternatives.length ? table : el("div", { class: "cf-muted", text: "No alternatives recorded." }),
  );
}

function fact(name: string, value: string): HTMLElement[] {
  return [el("dt", { text: name }), el("dd", { text: value })];
}

function probBar(p: number): HTMLElement {
  const wrap = el("span", { class: "cf-pbar", title: p.toFixed(4) });
  const fill = el("span", { class: "cf-pbar-fill" });
  fill.style.width = `${Math.round(p * 100)}%`;
  wrap.append(fill, el("span", { class: "cf-pbar-num", text: p.toFixed(3) }));
  return wrap;
}
