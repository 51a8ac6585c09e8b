/** Where the token popover goes: inside the window, below, above or beside its chip (the browser test checks it
 * drawn: tests/integration/test_panel_legible.py). */
import { describe, expect, it } from "vitest";
import { spot } from "../src/panel/popover";

const VIEW = { width: 1280, height: 800 };
const SIZE = { width: 460, height: 560 };
const chipAt = (left: number, top: number) => ({ left, top, right: left + 10, bottom: top + 20 });
const inside = ({ left, top, height }: { left: number; top: number; height: number }, view = VIEW) =>
  left >= 0 && top >= 0 && left + SIZE.width <= view.width && top + height <= view.height;
/** Whether the popover's box and the chip's overlap. */
const covers = (
  { left, top, height }: { left: number; top: number; height: number },
  chip: ReturnType<typeof chipAt>,
) => left < chip.right && chip.left < left + SIZE.width && top < chip.bottom && chip.top < top + height;

describe("the popover's place", () => {
  it("is below the chip where there is room, else above it", () => {
    expect(spot(chipAt(100, 100), SIZE, VIEW)).toEqual({ left: 100, top: 126, height: 560 });
    expect(spot(chipAt(100, 700), SIZE, VIEW)).toEqual({ left: 100, top: 134, height: 560 });
  });

  it("is beside the chip when it fits neither below nor above (a short answer in the middle of the window)", () => {
    const right = spot(chipAt(500, 370), SIZE, VIEW); // 800 px high: 404 below, 356 above, 560 needed
    expect(right.left).toBe(516);
    expect(inside(right)).toBe(true);
    const left = spot(chipAt(1000, 370), SIZE, VIEW);
    expect(left.left + SIZE.width).toBeLessThanOrEqual(1000);
    expect(inside(left) && left.height === SIZE.height).toBe(true);
  });

  it("stays inside the window near its edges, and in one too small for it never covers its chip", () => {
    expect(inside(spot(chipAt(1270, 10), SIZE, VIEW))).toBe(true);
    const small = { width: 520, height: 600 }; // room neither below, above nor beside: it scrolls inside
    const chip = chipAt(300, 290);
    const placed = spot(chip, SIZE, small);
    expect(inside(placed, small) && !covers(placed, chip)).toBe(true);
    expect(placed.height).toBeLessThan(SIZE.height);
  });
});
