// Measures for test_panel_legible.py, added to the page as window.legible.
window.legible = {
  /** Where the popover is; whether each corner and its middle show the popover itself (not something over it,
   * not nothing: cut away); the labels whose text is cut; whether it scrolls inside. */
  popover() {
    const pop = document.querySelector("[data-testid=popover]");
    const r = pop.getBoundingClientRect();
    const at = ([x, y]) => {
      const e = document.elementFromPoint(x, y);
      return !!e && pop.contains(e);
    };
    const [x0, x1, y0, y1] = [r.left + 3, r.right - 3, r.top + 3, r.bottom - 3];
    const points = [[x0, y0], [x1, y0], [x0, y1], [x1, y1], [(x0 + x1) / 2, (y0 + y1) / 2]];
    const labels = pop.querySelectorAll("dt, dd, th, td, .cf-td-settings, .cf-td-key");
    return {
      left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: innerWidth, height: innerHeight,
      seen: points.map(at),
      cut: [...labels].filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.textContent),
      scrolls: pop.scrollHeight > pop.clientHeight + 1,
      scrollsSideways: pop.scrollWidth > pop.clientWidth + 1,
    };
  },

  /** Every element with text of its own, shown: its font size, and the contrast of its colour (its opacity and its
   * ancestors' applied) against the colours under it, composited up from the first opaque one. Colours are read
   * back through a canvas pixel, so any CSS colour syntax (color-mix, color(srgb …)) is measured as drawn. */
  audit(root) {
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = 1;
    const ctx = canvas.getContext("2d", { willReadFrequently: true });
    const rgba = (css) => {
      ctx.clearRect(0, 0, 1, 1);
      ctx.fillStyle = "#000";
      ctx.fillStyle = css;
      ctx.fillRect(0, 0, 1, 1);
      const [r, g, b, a] = ctx.getImageData(0, 0, 1, 1).data;
      return [r, g, b, a / 255];
    };
    const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
    const channel = (v) => (v / 255 <= 0.04045 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4);
    const lum = (c) => 0.2126 * channel(c[0]) + 0.7152 * channel(c[1]) + 0.0722 * channel(c[2]);
    const ratio = (a, b) => {
      const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
      return (x + 0.05) / (y + 0.05);
    };
    const background = (el) => {
      const layers = [];
      for (let e = el; e; e = e.parentElement) {
        const c = rgba(getComputedStyle(e).backgroundColor);
        if (c[3] > 0) layers.push(c);
        if (c[3] >= 1) break;
      }
      return layers.reverse().reduce((under, top) => over(top, under), [255, 255, 255, 1]);
    };
    const opacity = (el) => {
      let o = 1;
      for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity);
      return o;
    };
    const out = [];
    for (const el of [root, ...root.querySelectorAll("*")]) {
      const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      if (!own || !el.getClientRects().length || el.closest("[hidden]") || el.closest(":disabled")) continue;
      const style = getComputedStyle(el);
      if (style.visibility !== "visible") continue;
      const bg = background(el);
      const fg = rgba(style.color);
      fg[3] *= opacity(el);
      out.push({
        text: el.textContent.trim().slice(0, 40),
        cls: String(el.className),
        size: parseFloat(style.fontSize),
        contrast: Math.round(ratio(over(fg, bg), bg) * 100) / 100,
      });
    }
    return out;
  },

  /** Text cut by its box (an ellipsis, a clip) among the title, the tabs and the Timeline's "took" figures; the
   * rows the tabs take; the "took" cells that reach past the panel's right edge. */
  layout() {
    const root = document.querySelector(".cf-root");
    const all = (sel) => [...root.querySelectorAll(sel)];
    const cut = (sel) => all(sel).filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.textContent);
    const edge = root.querySelector(".cf-panel").getBoundingClientRect().right;
    return {
      title: cut("[data-testid=title]"),
      tabs: cut(".cf-tab"),
      tabRows: new Set(all(".cf-tab").map((t) => Math.round(t.getBoundingClientRect().top))).size,
      took: cut(".cf-tl-dur"),
      tookPast: all(".cf-tl-dur").filter((e) => e.getBoundingClientRect().right > edge).map((e) => e.textContent),
    };
  },
};
