/** The screenshot harness: mounts the panel on a fake model with the fixtures, streams a long answer, answers attention requests. */

import widget from "../src/index";
import { baseTraits, FakeModel, MODEL_INFO, type TurnRecord } from "./fake_model";
import answer from "./fixtures/answer.json";
import blocked from "./fixtures/blocked.json";
import redacted from "./fixtures/redacted.json";
import tool from "./fixtures/tool.json";
import { causalHalf, longTurn } from "./synthetic";

const rec = (f: unknown): TurnRecord => ({
  prewarm: null,
  fork_of: "",
  ...(f as Omit<TurnRecord, "prewarm" | "fork_of">),
});
const turns = [rec(answer), rec(tool), rec(redacted), rec(blocked)];
turns[1].prewarm = { chars: 16, prompt_tokens: 300, computed_tokens: 280, cached_before: 0, latency_ms: 950 };
const long = longTurn(rec(answer), 500);

const params = new URLSearchParams(location.search);
/** `?sliding=1`: a model whose layers mix sliding (window 512) and global ones, as Gemma 3 270M's 18 do. */
const sliding = params.get("sliding") === "1";
const GEMMA_LIKE = { ...MODEL_INFO, name: "Gemma 3 270M", architecture: "gemma3", layers: 18, heads: 4, kv_heads: 1 };
const SLIDING = { sliding_window: 512, sliding_layers: [...Array(18).keys()].filter((i) => i % 6 !== 5) };
const model = new FakeModel(
  baseTraits({
    ...(sliding ? { model_info: { ...GEMMA_LIKE, ...SLIDING } } : {}),
    turns,
    title: "Capitals, arithmetic and e-mail",
    session: "demo",
    error: "Tool 'python' is not enabled: tick it in Settings → tools.",
    prewarm: { chars: 22, prompt_tokens: 41, computed_tokens: 3, cached_before: 38, latency_ms: 84 },
  }),
);
const side = Number(params.get("n") ?? 1000); // the attention matrix's side (benchmarks/bench_panel.py sets it)
model.onSend = (msg) => {
  if (msg.type !== "attention") return;
  const segmentsMode = msg.mode === "segments";
  const n = side;
  const cols = segmentsMode ? 4 : n;
  const window = sliding && SLIDING.sliding_layers.includes(msg.layer) ? SLIDING.sliding_window : 0;
  const bits = segmentsMode
    ? causalHalf(n, n)
        .slice(0, n * 4)
        .map((b, i) => b + (i % 4) * 300)
    : causalHalf(n, n, window);
  setTimeout(
    () =>
      model.message(
        {
          type: "attention",
          request_id: msg.request_id,
          turn_id: msg.turn_id,
          layer: msg.layer,
          head: msg.head,
          mode: msg.mode,
          shape: [n, cols],
          dtype: "float16",
          tokens: Math.max(538, n),
          prompt_tokens: 38,
          pool: 1,
          window,
          rows_range: [0, n],
          cols_range: [0, n],
          segments: [
            { label: "system", kind: "system", start: 3, end: 20 },
            { label: "user", kind: "user", start: 25, end: 32 },
            { label: "chat template", kind: "template", start: 0, end: 38 },
            { label: "generated", kind: "generated", start: 38, end: 538 },
          ],
        },
        [new DataView(bits.buffer)],
      ),
    20,
  );
};
const theme = params.get("theme"); // dark, jl-light (harness.html), else the panel's own colours
if (theme === "dark" || theme === "jl-light") document.body.classList.add(theme);
widget.render({ model, el: document.getElementById("app")! });

// stream the long answer as the live turn, 8 tokens per message
const events = long.events;
model.set("live", { turn_id: long.turn_id, prewarm: null, fork_of: "" });
model.set("status", "generating");
let i = 0;
const fast = params.get("fast") === "1";
const timer = setInterval(
  () => {
    const batch = events.slice(i, i + (fast ? 100 : 8));
    i += batch.length;
    model.message({ type: "events", turn_id: long.turn_id, events: batch, pieces: long.pieces });
    if (i >= events.length) {
      clearInterval(timer);
      model.traits.live = null;
      model.set("turns", [...turns, long]);
      model.set("status", "idle");
      document.body.setAttribute("data-done", "1");
    }
  },
  fast ? 5 : 40,
);
