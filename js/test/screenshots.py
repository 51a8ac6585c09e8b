"""Screenshots of the harness page, every tab in light and dark.

Serve /work/main first (`python3 -m http.server 8765 --bind 127.0.0.1`), then `python js/test/screenshots.py`.
"""

import sys

from playwright.sync_api import sync_playwright

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8765/js/test/harness.html"
OUT = sys.argv[2] if len(sys.argv) > 2 else "/tmp/panel-shots"
with sync_playwright() as p:
    browser = p.chromium.launch(
        executable_path="/usr/bin/chromium",
        args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )
    for theme in ("light", "dark"):
        page = browser.new_page(viewport={"width": 1000, "height": 1300})
        page.on("console", lambda m: print("console:", m.text))
        page.on("pageerror", lambda e: print("pageerror:", e))
        page.goto(f"{BASE}?theme={theme}")
        page.wait_for_selector("body[data-done='1']", timeout=30000)
        page.wait_for_timeout(300)
        print(
            theme,
            "tokens:",
            page.locator("[data-testid=token]").count(),
            "last-seq",
            page.locator(".cf-root").get_attribute("data-last-seq"),
        )
        page.screenshot(path=f"{OUT}/{theme}-text.png", full_page=True)
        page.click("[data-testid=view-tokens]")
        for tab in ("context", "attention", "timeline", "safety"):
            page.click(f"[data-testid=tab-{tab}]")
            if tab == "attention":
                page.click("[data-testid=attention-show]")
                page.wait_for_selector("[data-testid=heatmap][data-render-ms]")
                print("render ms", page.get_attribute("[data-testid=heatmap]", "data-render-ms"))
                page.hover("[data-testid=token][data-index='60']")
                page.mouse.move(0, 0)
            page.wait_for_timeout(250)
            page.screenshot(path=f"{OUT}/{theme}-{tab}.png", full_page=True)
        page.click("[data-testid=token][data-index='3']")
        page.wait_for_timeout(100)
        page.screenshot(path=f"{OUT}/{theme}-token.png", full_page=False)
        page.close()
    browser.close()
