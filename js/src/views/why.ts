/**
 * "Why this token?" (issue 36): the Why tab draws the kernel's `why` reply for one answer token. Its input (the
 * prompt, then the answer before the token) is drawn as in the Context tab, each token underlined in its segment's
 * colour, and becomes a heat map of attribution (grad × input, or integrated gradients: blue pushed towards the
 * token, red away from it); a bar per segment (system prompt, memory, tools, each history turn, the message, a tool
 * result, the template, the answer so far) gives its sum and share. "Rather than" takes one of the alternatives the
 * sampler saw as the contrast; integrated gradients run on request, with a progress bar.
 */
import { append, clear, el, visibleText } from "../dom";
import type { Alternative, InsideMethod, InsideProgressMessage, Pieces, WhyMessage, WhySegment } from "../types";

/** Integrated gradients' steps the view asks for. */
export const IG_STEPS = 32;

/** What the view asks the panel to do. */
export interface WhyHooks {
  ask(method: InsideMethod, contrast: number | null): void;
}

/** The token a why is about, as the view names it. */
export interface WhySubject {
  turnId: string;
  /** "#2" (the turn's place in the conversation). */
  turnLabel: string;
  index: number;
  tokenId: number;
  text: string;
  alternatives: readonly Alternative[];
  pieces: Pieces;
  method: InsideMethod;
  contrast: number | null;
}

/** Each position's colour strength (0…1, √ of its share of the largest magnitude) and sign. */
export function heat(values: readonly number[]): { strength: number[]; sign: number[] } {
  const top = values.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  return {
    strength: values.map((v) => (top > 0 ? Math.sqrt(Math.abs(v) / top) : 0)),
    sign: values.map((v) => (v > 0 ? 1 : v < 0 ? -1 : 0)),
  };
}

/** Each segment's share: its value over the sum of every segment's magnitude (signed, so the magnitudes add up
 * to 100 %). */
export function shares(segments: readonly WhySegment[]): number[] {
  const whole = segments.reduce((n, s) => n + Math.abs(s.value), 0);
  return segments.map((s) => (whole > 0 ? s.value / whole : 0));
}

/** A signed value as the view writes it: "+0.0123", "−0.0045" (4 significant decimals at least). */
export function signed(v: number): string {
  const digits = Math.abs(v) >= 0.1 ? 3 : Math.abs(v) >= 0.001 ? 4 : 6;
  return `${v < 0 ? "−" : "+"}${Math.abs(v).toFixed(digits)}`;
}

const METHOD_NAMES: Record<InsideMethod, string> = {
  grad_x_input: "grad × input",
  integrated_gradients: "integrated gradients",
};

const pct = (logprob: number) => `${(Math.exp(logprob) * 100).toFixed(1)} %`;

export class WhyView {
  readonly el = el("div", { class: "cf-why", "data-testid": "why" });
  private head = el("div", { class: "cf-why-head" });
  private controls = el("div", { class: "cf-row cf-why-controls" });
  private progress = el("div", { class: "cf-why-progress", "data-testid": "why-progress", hidden: true });
  private body = el("div", { class: "cf-why-body" });
  private empty = el("div", {
    class: "cf-empty",
    "data-testid": "why-empty",
    text: "Show the answers as tokens, click one, and press “Why this token?” in its popover: its prompt becomes a heat map of what made it, with a bar per segment.",
  });
  private subject: WhySubject | null = null;

  constructor(private hooks: WhyHooks) {
    this.el.append(this.empty, this.head, this.controls, this.progress, this.body);
  }

  /** A why was asked for this token (the reply comes later). */
  asked(subject: WhySubject): void {
    this.subject = subject;
    this.empty.hidden = true;
    clear(this.body);
    this.drawHead();
    this.showProgress(null);
  }

  /** How far the request is (null: just sent). */
  showProgress(msg: InsideProgressMessage | null): void {
    const bar = el("span", { class: "cf-why-bar" });
    const fill = el("span", { class: "cf-why-bar-fill" });
    bar.appendChild(fill);
    const fraction = msg?.total ? msg.done / msg.total : null;
    if (fraction === null) bar.classList.add("cf-why-bar-busy");
    else fill.style.width = `${(fraction * 100).toFixed(1)}%`;
    const seconds = msg ? ` · ${(msg.elapsed_ms / 1000).toFixed(1)} s` : "";
    this.progress.replaceChildren(
      bar,
      el("span", {
        class: "cf-muted",
        "data-testid": "why-progress-text",
        text: `${msg?.text ?? "asking the kernel"}${seconds}`,
      }),
    );
    this.progress.setAttribute("data-done", String(msg?.done ?? 0));
    this.progress.hidden = false;
  }

  /** The request failed: why, in place of the result. */
  failed(message: string): void {
    this.progress.hidden = true;
    this.body.replaceChildren(el("div", { class: "cf-error-text", "data-testid": "why-error", text: message }));
  }

  /** The kernel's reply: the heat map and the segments. */
  show(reply: WhyMessage): void {
    if (this.subject) this.subject = { ...this.subject, method: reply.method, contrast: reply.contrast_id };
    this.progress.hidden = true;
    this.drawHead();
    this.drawBody(reply);
  }

  private drawHead(): void {
    const s = this.subject;
    clear(this.head);
    clear(this.controls);
    if (!s) return;
    const contrast = s.contrast === null ? null : s.alternatives.find((a) => a.token_id === s.contrast);
    append(
      this.head,
      el("span", { class: "cf-strong", text: "Why " }),
      el("code", { class: "cf-td-text", text: visibleText(s.text) }),
      contrast ? el("span", { class: "cf-strong", text: " rather than " }) : null,
      contrast ? el("code", { class: "cf-td-text", text: visibleText(contrast.text) }) : null,
      el("span", { class: "cf-muted", text: ` · answer token ${s.index} of turn ${s.turnLabel}` }),
    );
    const rather = el("select", { class: "cf-select", "data-testid": "why-rather", "aria-label": "Rather than" });
    rather.appendChild(el("option", { value: "", text: "— the token alone —" }));
    for (const a of s.alternatives)
      if (a.token_id !== s.tokenId && a.token_id >= 0)
        rather.appendChild(
          el("option", {
            value: a.token_id,
            text: `${visibleText(a.text)} (${pct(a.logprob)})`,
            selected: a.token_id === s.contrast,
          }),
        );
    rather.addEventListener("change", () =>
      this.hooks.ask(s.method, rather.value === "" ? null : Number(rather.value)),
    );
    const ig = el("button", {
      class: "cf-btn",
      type: "button",
      "data-testid": "why-integrated",
      title: `Average the gradient over ${IG_STEPS} points on the path from a zero input to this one (slower: ${IG_STEPS} backward passes)`,
      text: s.method === "integrated_gradients" ? "grad × input instead" : `integrated gradients (${IG_STEPS} steps)`,
    });
    ig.addEventListener("click", () =>
      this.hooks.ask(s.method === "integrated_gradients" ? "grad_x_input" : "integrated_gradients", s.contrast),
    );
    this.controls.append(
      el(
        "label",
        { class: "cf-field cf-field-inline" },
        el("span", { class: "cf-field-label", text: "rather than" }),
        rather,
      ),
      el("span", { class: "cf-pill", "data-testid": "why-method", text: METHOD_NAMES[s.method] }),
      ig,
    );
  }

  private altText(tokenId: number): string {
    const s = this.subject;
    return (
      s?.alternatives.find((a) => a.token_id === tokenId)?.text ?? s?.pieces[String(tokenId)]?.[0] ?? `#${tokenId}`
    );
  }

  private drawBody(reply: WhyMessage): void {
    const pieces = this.subject?.pieces ?? {};
    const target = this.subject?.text ?? "";
    const what =
      reply.contrast_id === null
        ? `log p(“${visibleText(target)}”) = ${reply.target_logprob.toFixed(3)} (${pct(reply.target_logprob)})`
        : `log p(“${visibleText(target)}”) − log p(“${visibleText(this.altText(reply.contrast_id))}”)`;
    const timing = `${(reply.compute_ms / 1000).toFixed(1)} s${reply.compile_ms >= 50 ? `, of which XLA compiling ${(reply.compile_ms / 1000).toFixed(1)} s` : ""}`;
    clear(this.body);
    append(
      this.body,
      el(
        "div",
        { class: "cf-muted cf-why-sum" },
        `Attributed: ${what}. Sum over the ${reply.values.length} positions `,
        el("span", {
          class: "cf-num",
          "data-testid": "why-total",
          "data-value": reply.total,
          text: signed(reply.total),
        }),
        ` · ${METHOD_NAMES[reply.method]}${reply.steps ? ` (${reply.steps} steps)` : ""} · ${timing}`,
      ),
      reply.note ? el("div", { class: "cf-why-note", "data-testid": "why-note", text: reply.note }) : null,
      el("div", { class: "cf-label", text: "By segment — its sum, and its share of them all" }),
      segmentBars(reply.segments),
      el("div", { class: "cf-label", text: "The input — heat: attribution · underline: where each token came from" }),
      heatPrompt(reply, pieces),
      heatLegend(),
    );
  }
}

/** A row per segment: swatch, label, tokens, a bar from the middle (right: towards the token; left: away), the
 * sum and its share. */
export function segmentBars(segments: readonly WhySegment[]): HTMLElement {
  const share = shares(segments);
  const top = Math.max(...segments.map((s) => Math.abs(s.value)), 0);
  const rows = segments.map((s, i) => {
    const bar = el("span", { class: `cf-why-seg-bar ${s.value < 0 ? "cf-why-neg" : "cf-why-pos"}` });
    const width = top > 0 ? (Math.abs(s.value) / top) * 50 : 0;
    bar.style.width = `${width.toFixed(2)}%`;
    bar.style.left = s.value < 0 ? `${(50 - width).toFixed(2)}%` : "50%";
    return el(
      "div",
      { class: "cf-why-seg", "data-testid": "why-segment", "data-kind": s.kind, "data-value": s.value },
      el("span", { class: `cf-swatch cf-kind-${s.kind}` }),
      el("span", { class: "cf-why-seg-label", text: s.label, title: s.label }),
      el("span", { class: "cf-muted cf-num", text: `${s.tokens} tok` }),
      el("span", { class: "cf-why-seg-track" }, el("span", { class: "cf-why-seg-zero" }), bar),
      el("span", { class: "cf-num cf-why-seg-value", "data-testid": "why-segment-value", text: signed(s.value) }),
      el("span", { class: "cf-num cf-muted cf-why-seg-share", text: `${(share[i] * 100).toFixed(0)} %` }),
    );
  });
  return el("div", { class: "cf-why-segs", "data-testid": "why-segments" }, ...rows);
}

/** The input's tokens as chips: background the attribution (blue +, red −, √ of the share of the largest), a
 * line under each in its segment's colour; the value on hover and in `data-value`. */
export function heatPrompt(reply: WhyMessage, pieces: Pieces): HTMLElement {
  const { strength, sign } = heat(reply.values);
  const box = el("div", { class: "cf-prompt cf-why-prompt", "data-testid": "why-prompt" });
  const frag = document.createDocumentFragment();
  reply.ids.forEach((id, i) => {
    const segment = reply.segments[reply.column[i]];
    const text = pieces[String(id)]?.[0] ?? `#${id}`;
    const newline = text.includes("\n");
    const chip = el("span", {
      class: `cf-ptok cf-why-tok cf-kind-${segment?.kind ?? "template"}${sign[i] < 0 ? " cf-why-neg" : ""}${newline ? " cf-nl" : ""}`,
      "data-testid": "why-token",
      "data-position": i,
      "data-value": reply.values[i],
      title: `#${i} · ${segment?.label ?? ""} · ${signed(reply.values[i])}`,
      text: newline ? text.replace(/\n/g, "↵") : text,
    });
    chip.style.setProperty("--cf-heat", strength[i].toFixed(3));
    frag.appendChild(chip);
    if (newline) frag.appendChild(el("br"));
  });
  box.appendChild(frag);
  return box;
}

function heatLegend(): HTMLElement {
  return el(
    "div",
    { class: "cf-legend cf-why-legend" },
    el(
      "span",
      { class: "cf-legend-item" },
      el("span", { class: "cf-swatch cf-why-swatch cf-why-neg" }),
      "away from the token",
    ),
    el("span", { class: "cf-legend-item" }, el("span", { class: "cf-swatch cf-why-swatch" }), "towards it"),
    el("span", { class: "cf-muted", text: "(strength: √ of the share of the largest; hover a token for its value)" }),
  );
}
