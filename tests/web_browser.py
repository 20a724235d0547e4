#!/usr/bin/python3
"""tests/web_browser.py DAEMON MODEL_DIR [SCREENSHOT_DIR]

The ctest "web_browser" test: the page at GET / in a real browser (Debian's
chromium, headless, driven by chromium-driver through python3-selenium,
all installed by tools/bootstrap.sh) against `DAEMON serve` on a free
loopback port. It types two lines, translates them with Ctrl+Enter and
checks the page shows what POST /v1/translate answers for the same input;
opens the attention view and checks the heatmap against the API's
attention (cells, labels, a head switch, the average of heads and of
layers, the word view), the grid of every head (each small multiple's
canvas pixels against its own head's attention), hover and the arrow keys;
an API error shown as the API's message; a phone-sized window; a long
text streamed (its sentences drawn as they come, a progress bar a step a
sentence, then the API's answer); the page's weight; no console errors; and, with a second daemon behind --api-key, that
the page asks for the key and keeps it in sessionStorage only.
SCREENSHOT_DIR (or $TD_WEB_SCREENSHOTS): where to write the screenshots.

Exit status 77 (ctest: skipped), with the reason on stderr, when selenium,
chromium or chromedriver is missing or chromium cannot start here.
"""
import colorsys
import json
import os
import re
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_common import Daemon, browser, check, console_errors, fail, wait  # noqa: E402

TEXTS = ["Hello world", "The cat sat on the mat."]
TOL = 1e-6
TOL_RGB = 2  # a drawn colour against the page's colour of the API's weight, per channel
NAME = None  # the served model's name, from /v1/models


# (browser_common skipped the test already when selenium is missing)
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402


def cells(d):
    """The heatmap's cells as {(t, s): w} and its labels."""
    data = d.execute_script("""
        const m = document.getElementById('heatmap');
        return {rows: +m.dataset.rows, cols: +m.dataset.cols, layer: m.dataset.layer,
                head: m.dataset.head,
                cells: Array.from(m.querySelectorAll('rect.cell')).map(
                    (r) => [+r.dataset.t, +r.dataset.s, +r.dataset.w]),
                rowPieces: Array.from(m.querySelectorAll('text.row-label')).map((e) => e.dataset.piece),
                colPieces: Array.from(m.querySelectorAll('text.col-label')).map((e) => e.dataset.piece),
                rowText: Array.from(m.querySelectorAll('text.row-label')).map((e) => e.textContent),
                colText: Array.from(m.querySelectorAll('text.col-label')).map((e) => e.textContent)};""")
    data["W"] = {(t, s): w for t, s, w in data["cells"]}
    return data


def pick(d, sel_id, value):
    Select(d.find_element(By.ID, sel_id)).select_by_value(value)


def same_matrix(W, ref, why):
    for (t, s), w in W.items():
        if not abs(w - ref[t][s]) <= TOL:
            fail("%s: cell (%d, %d) is %r, want %r" % (why, t, s, w, ref[t][s]))


def mean(mats):
    T, S = len(mats[0]), len(mats[0][0])
    return [[sum(m[t][s] for m in mats) / len(mats) for s in range(S)] for t in range(T)]


def rgb(w):
    """The page's colour of a weight (app.js color(): hsl(214, 70%, 98 - 68 sqrt(w) %)) as 0..255 RGB."""
    light = round(98 - 68 * max(0.0, min(1.0, w)) ** 0.5, 1)
    return [round(c * 255) for c in colorsys.hls_to_rgb(214 / 360, light / 100, 0.7)]


def grid_heads(d, refs, why):
    """Each small multiple of #grid against its own head: the centre pixel of every cell of its
    canvas, as drawn, is the colour of that head's weight in refs[h] ([t][s], the API's), and
    the heads differ enough in colour that a multiple drawing another head's matrix fails."""
    T, S, H = len(refs[0]), len(refs[0][0]), len(refs)
    want = [[[rgb(W[t][s]) for s in range(S)] for t in range(T)] for W in refs]
    dist = lambda a, b: max(abs(x - y) for t in range(T) for s in range(S)
                            for x, y in zip(a[t][s], b[t][s]))
    for i in range(H):
        for j in range(i):
            check(dist(want[i], want[j]) > 4 * TOL_RGB, "%s: heads %d and %d draw alike, so the "
                  "check cannot tell them apart" % (why, j, i))
    drawn = d.execute_script("""
        const [T, S] = arguments;
        return Array.from(document.querySelectorAll('#grid button.multiple')).map((b) => {
          const c = b.querySelector('canvas');
          const P = c.width / S, px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          const at = (t, s) => {
            const k = 4 * ((t * P + (P >> 1)) * c.width + s * P + (P >> 1));
            return [px[k], px[k + 1], px[k + 2]];
          };
          return {head: b.dataset.head, caption: b.querySelector('span').textContent,
                  width: c.width, height: c.height, P,
                  cells: Array.from({length: T}, (_, t) => Array.from({length: S}, (_, s) => at(t, s)))};
        });""", T, S)
    check(len(drawn) == H, "%s: %d small multiples, want %d" % (why, len(drawn), H))
    for i, g in enumerate(drawn):
        check(g["head"] == str(i) and g["caption"] == "head %d" % i,
              "%s: multiple %d is head %s, captioned %r" % (why, i, g["head"], g["caption"]))
        P = g["P"]
        check(P == int(P) and P >= 3 and g["height"] == T * P,
              "%s: head %d's canvas is %dx%d for %dx%d cells" % (why, i, g["width"], g["height"], T, S))
        errs = [dist(g["cells"], w) for w in want]
        if errs[i] > TOL_RGB:
            t, s = next((t, s) for t in range(T) for s in range(S)
                        if max(abs(x - y) for x, y in zip(g["cells"][t][s], want[i][t][s])) > TOL_RGB)
            fail("%s: the multiple of head %d draws cell (%d, %d) as %r, head %d's weight %.4f is %r; "
                 "its colours are closest to head %d's (largest channel difference to each head: %s)"
                 % (why, i, t, s, g["cells"][t][s], i, refs[i][t][s], want[i][t][s],
                    errs.index(min(errs)), errs))


def words(pieces):
    special = lambda p: p is not None and (re.match(r"^<.*>$", p) or re.match(r"^>>.*<<$", p))
    groups = []
    for i, p in enumerate(pieces):
        prev = pieces[i - 1] if i else None
        if i == 0 or p.startswith("\u2581") or special(p) or special(prev):
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    exe, model = sys.argv[1], sys.argv[2]
    shots = sys.argv[3] if len(sys.argv) > 3 else os.environ.get("TD_WEB_SCREENSHOTS")
    if shots:
        os.makedirs(shots, exist_ok=True)
    dm = Daemon(exe, model)
    global NAME
    NAME = json.loads(dm.get("/v1/models")[2])["models"][0]["name"]
    d = None
    try:
        d = browser()
        run(d, dm, shots)
        run_file(d, dm)
        run_file_same_language(d, exe, model)
        run_docs(d, dm)
        run_key(d, exe, model)
    finally:
        if d:
            d.quit()
        dm.stop()
    print("web_browser: all checks passed")
    return 0


def run(d, dm, shots):
    # the assets: types, CSP, ETag and 304, weight
    weight = 0
    for path, ctype in (("/", "text/html"), ("/web/app.js", "text/javascript"),
                        ("/web/app.css", "text/css"), ("/web/icon.svg", "image/svg+xml")):
        st, h, body = dm.get(path)
        check(st == 200 and h.get("Content-Type", "").startswith(ctype),
              "%s: %d %s" % (path, st, h.get("Content-Type")))
        check("script-src 'self'" in h.get("Content-Security-Policy", ""), path + ": no CSP")
        etag = h.get("ETag")
        check(etag and etag.startswith('"'), path + ": no ETag")
        # the ETag itself, weak (W/, as a proxy may send it back), in a list
        for inm in (etag, "W/" + etag, '"0000", W/' + etag):
            req = urllib.request.Request(dm.base + path, headers={"If-None-Match": inm})
            try:
                urllib.request.urlopen(req, timeout=10)
                fail("%s: If-None-Match %s did not give 304" % (path, inm))
            except urllib.error.HTTPError as e:
                check(e.code == 304, "%s: If-None-Match %s gave %d" % (path, inm, e.code))
        req = urllib.request.Request(dm.base + path, headers={"If-None-Match": '"0000", W/"1"'})
        with urllib.request.urlopen(req, timeout=10) as r:
            check(r.status == 200 and r.read() == body, path + ": another ETag did not give 200")
        weight += len(body)
    print("web_browser: page weight %d bytes (%.1f KiB) in 4 files" % (weight, weight / 1024))
    check(weight < 64 * 1024, "the page weighs %d bytes, over its 64 KiB budget" % weight)

    d.get(dm.base + "/")
    wait(d, lambda: NAME in d.find_element(By.ID, "served").text,
         "the served-by line never named the model")
    served = d.find_element(By.ID, "served").text
    check(" cpu" in served, "the served-by line names no device: " + served)
    # From and Into: every source of /languages, and the targets of the one picked
    with urllib.request.urlopen(dm.base + "/languages", timeout=10) as r:
        langs = {l["code"]: l["targets"] for l in json.loads(r.read()) if l["targets"]}

    def options(sel_id):
        return [o.get_attribute("value") for o in Select(d.find_element(By.ID, sel_id)).options]

    wait(d, lambda: len(options("source")) == len(langs) + 1, "From never listed the sources")
    check(options("source") == [""] + list(langs), "From: %s" % options("source"))
    first = list(langs)[0]
    pick(d, "source", first)
    wait(d, lambda: options("target") == [""] + sorted(langs[first]),
         "Into after %s: %s, not %s" % (first, options("target"), langs[first]))
    pick(d, "source", "")
    links = [a.get_attribute("href") for a in d.find_elements(By.CSS_SELECTOR, "footer a")]
    check(dm.base + "/openapi.json" in links and dm.base + "/metrics" in links,
          "footer links: %s" % links)

    # the translator: two lines, beam 4, two alternatives, Ctrl+Enter; the
    # box starts with no value, its example text shown as the textarea's hint
    src = d.find_element(By.ID, "src")
    check(src.get_attribute("value") == "" and "Hello world" in src.get_attribute("placeholder"),
          "the source box is pre-filled (%r) or shows no example" % src.get_attribute("value"))
    src.clear()
    src.send_keys(TEXTS[0] + Keys.ENTER + TEXTS[1])
    for id_, v in (("beam", "4"), ("nhyp", "2")):
        e = d.find_element(By.ID, id_)
        e.clear()
        e.send_keys(v)
    src.send_keys(Keys.CONTROL, Keys.ENTER)
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#results .translation")) == 2,
         "no two translations after Ctrl+Enter")
    # each text in its own language: sources en, translations and
    # alternatives de (the model's pair)
    langs = d.execute_script(
        "return [...document.querySelectorAll('#results .source')].map(e => e.lang)"
        ".concat([...document.querySelectorAll('#results .translation, #results .alternative')]"
        ".map(e => e.closest('[lang]').lang))")
    check(langs and langs[:2] == ["en", "en"] and all(x == "de" for x in langs[2:]),
          "lang attributes %r" % langs)
    st, api = dm.translate({"text": TEXTS, "model": NAME, "beam_size": 4,
                            "num_hypotheses": 2, "return_tokens": True})
    check(st == 200, "the API said %d" % st)
    shown = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#results .translation")]
    want = [t["text"] for t in api["translations"]]
    check(shown == want, "the page shows %r, the API answers %r" % (shown, want))
    alts = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#results .alternative")]
    want_alts = [t["hypotheses"][1]["text"] for t in api["translations"]]
    check(len(alts) == 2 and all(a.startswith(w) for a, w in zip(alts, want_alts)),
          "alternatives %r, want %r" % (alts, want_alts))
    scores = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#results > li > div > .score")]
    check(scores == ["score %.3f" % t["score"] for t in api["translations"]],
          "scores %r" % scores)
    if shots:
        d.save_screenshot(os.path.join(shots, "translator.png"))

    # the attention view of the first text
    d.find_elements(By.CSS_SELECTOR, "#results button.inspect")[0].click()
    wait(d, lambda: d.find_elements(By.ID, "heatmap"), "no heatmap after 'Attention'")
    st, att = dm.translate({"text": [TEXTS[0]], "model": NAME, "beam_size": 4,
                            "num_hypotheses": 1, "return_attention": True})
    check(st == 200, "the API said %d" % st)
    t0 = att["translations"][0]
    cross = t0["attention"]["cross"]
    L, H = len(cross), len(cross[0])
    T, S = len(t0["tokens"]), len(t0["source_tokens"])
    check(H >= 2, "the fixture has %d heads" % H)
    m = cells(d)
    check(m["rows"] == T and m["cols"] == S and len(m["W"]) == T * S,
          "heatmap %dx%d with %d cells, want %dx%d" % (m["rows"], m["cols"], len(m["W"]), T, S))
    check(m["rowPieces"] == t0["tokens"] and m["colPieces"] == t0["source_tokens"],
          "labels %r / %r, want %r / %r" % (m["rowPieces"], m["colPieces"], t0["tokens"],
                                            t0["source_tokens"]))
    # word marks shown as breaks, not as U+2581 glyphs (a lone ▁ piece excepted)
    for p, txt in zip(m["colPieces"] + m["rowPieces"], m["colText"] + m["rowText"]):
        if p.startswith("\u2581") and p != "\u2581":
            check(txt == p[1:], "label %r of piece %r" % (txt, p))
    check(m["layer"] == str(L - 1) and m["head"] == "0", "starts at %s/%s" % (m["layer"], m["head"]))
    same_matrix(m["W"], cross[L - 1][0], "layer %d head 0" % (L - 1))
    # the offsets line the pieces up with the sentence
    spans = d.execute_script("return Array.from(document.querySelectorAll('#att-src span'))"
                             ".map((e) => e.textContent)")
    check("".join(spans) == TEXTS[0] and len(spans) == S, "source spans %r" % spans)
    if shots:
        d.save_screenshot(os.path.join(shots, "attention-head.png"))

    # the map uses the width it has: within its box, cells wider than the
    # old fixed 26 px when there is room; on a phone still within the box,
    # its first row label in view (redrawn on the window's resize)
    def fit():
        return d.execute_script("""
            const m = document.getElementById('map'), s = document.getElementById('heatmap');
            const c = s.querySelector('rect.cell'), l = s.querySelector('text.row-label');
            const mb = m.getBoundingClientRect(), lb = l.getBoundingClientRect();
            return {svg: s.getBoundingClientRect().width, box: m.clientWidth,
                    cell: Number(c.getAttribute('width')), labelLeft: lb.left - mb.left,
                    labelRight: lb.right - mb.left};""")
    def uses_width(f):  # within the box, and filling it unless the cells are at their largest
        return f["svg"] <= f["box"] and (f["cell"] >= 43 or f["svg"] >= 0.8 * f["box"])
    f = fit()
    check(uses_width(f), "map %r at 1100 px" % f)
    d.set_window_size(390, 844)
    wait(d, lambda: fit()["box"] < 400 and uses_width(fit()), "the map on a phone")
    f = fit()
    check(uses_width(f) and 0 <= f["labelLeft"] and f["labelRight"] <= f["box"],
          "map %r on a phone" % f)
    # a map wider than its box (a 90 px box here, as a long sentence on a
    # phone): scrolled to its right end, the row labels are still in view
    d.execute_script("document.getElementById('map').style.width = '90px';"
                     "window.dispatchEvent(new Event('resize'));")
    wait(d, lambda: d.execute_script("const m = document.getElementById('map');"
                                     "return m.scrollWidth > m.clientWidth + 20;"),
         "no map wider than a 90 px box")
    d.execute_script("const m = document.getElementById('map'); m.scrollLeft = m.scrollWidth;")
    wait(d, lambda: d.execute_script("return document.getElementById('map').scrollLeft") > 20,
         "the map did not scroll")
    wait(d, lambda: 0 <= fit()["labelLeft"] and fit()["labelRight"] <= fit()["box"],
         "row labels out of view when the map scrolls sideways: %r" % fit())
    d.execute_script("document.getElementById('map').style.width = '';"
                     "window.dispatchEvent(new Event('resize'));")
    d.set_window_size(1100, 900)
    wait(d, lambda: fit()["box"] > 400 and uses_width(fit()), "the map back at 1100 px")

    heads = []
    for h in range(H):
        pick(d, "head", str(h))
        mh = cells(d)
        check(mh["head"] == str(h), "head picker did not switch to %d" % h)
        same_matrix(mh["W"], cross[L - 1][h], "layer %d head %d" % (L - 1, h))
        heads.append([[mh["W"][(t, s)] for s in range(S)] for t in range(T)])
    diff = max(abs(heads[0][t][s] - heads[1][t][s]) for t in range(T) for s in range(S))
    check(diff > 1e-3, "switching head changed no cell (max difference %g)" % diff)
    pick(d, "head", "avg")
    same_matrix(cells(d)["W"], mean(heads), "average of heads (the mean of the page's heads)")
    pick(d, "head", "0")
    pick(d, "layer", "avg")
    same_matrix(cells(d)["W"], mean([cross[l][0] for l in range(L)]), "average of layers, head 0")
    pick(d, "head", "avg")
    same_matrix(cells(d)["W"], mean([mean(cross[l]) for l in range(L)]),
                "average of layers and heads")
    pick(d, "layer", str(L - 1))
    pick(d, "head", "1")

    # the word view: sums over a word's source pieces, means over its target pieces
    pick(d, "units", "words")
    tg, sg = words(t0["tokens"]), words(t0["source_tokens"])
    mw = cells(d)
    check(mw["rows"] == len(tg) and mw["cols"] == len(sg), "word view %dx%d, want %dx%d" %
          (mw["rows"], mw["cols"], len(tg), len(sg)))
    W = cross[L - 1][1]
    ref = [[sum(W[t][s] for t in ti for s in si) / len(ti) for si in sg] for ti in tg]
    same_matrix(mw["W"], ref, "word view")
    for a in range(len(tg)):
        row = sum(mw["W"][(a, b)] for b in range(len(sg)))
        check(abs(row - 1) < 1e-4, "word row %d sums to %g" % (a, row))
    pick(d, "units", "pieces")

    # hover and the arrow keys name the pair and the weight
    cell = d.find_element(By.CSS_SELECTOR, '#heatmap rect.cell[data-t="0"][data-s="1"]')
    ActionChains(d).move_to_element(cell).perform()
    hover = d.find_element(By.ID, "hover").text
    w01 = "%.4f" % cross[L - 1][1][0][1]
    check(w01 in hover and "\u2190" in hover, "hover says %r, want the weight %s" % (hover, w01))
    d.execute_script("document.getElementById('heatmap').dispatchEvent(new MouseEvent('mouseleave'))")
    d.find_element(By.ID, "heatmap").send_keys(Keys.ARROW_DOWN)
    hover2 = d.find_element(By.ID, "hover").text
    check("%.4f" % cross[L - 1][1][1][1] in hover2, "arrow down: %r" % hover2)

    # every head of the layer at once
    pick(d, "view", "grid")
    multiples = d.find_elements(By.CSS_SELECTOR, "#grid button.multiple")
    check(len(multiples) == H, "%d small multiples, want %d" % (len(multiples), H))
    if shots:
        d.save_screenshot(os.path.join(shots, "attention-grid.png"))
    # each multiple draws its own head (read from the canvas), of the layer and of the average
    grid_heads(d, cross[L - 1], "grid of layer %d" % (L - 1))
    pick(d, "layer", "avg")
    grid_heads(d, [mean([cross[l][h] for l in range(L)]) for h in range(H)],
               "grid of the average of layers")
    pick(d, "layer", str(L - 1))
    multiples = d.find_elements(By.CSS_SELECTOR, "#grid button.multiple")
    multiples[H - 1].click()
    mh = cells(d)
    check(mh["head"] == str(H - 1), "clicking head %d's multiple shows %s" % (H - 1, mh["head"]))
    console_errors(d)

    # an API error is shown as the API's message
    beam = d.find_element(By.ID, "beam")
    d.execute_script("arguments[0].max = '99'", beam)
    beam.clear()
    beam.send_keys("99")
    d.find_element(By.ID, "go").click()
    wait(d, lambda: d.find_element(By.ID, "error").is_displayed(), "no error shown")
    st, err = dm.translate({"text": TEXTS, "model": NAME, "beam_size": 99,
                            "num_hypotheses": 2, "return_tokens": True})
    msg = err["error"]["message"]
    shown = d.find_element(By.ID, "error").text
    check(st == 400 and shown.startswith(msg) and "[object Object]" not in shown,
          "error shown %r, the API's message %r" % (shown, msg))
    # the only console line allowed: the network's note of that 400
    console_errors(d, allowed=("/v1/translate - Failed to load resource: the server responded "
                               "with a status of 400",))

    # a phone-sized window: nothing wider than the screen but the map's own scroller
    d.set_window_size(390, 844)
    d.get(dm.base + "/")
    wait(d, lambda: NAME in d.find_element(By.ID, "served").text, "reload")
    over = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    check(over <= 0, "the page is %dpx wider than a phone's window" % over)
    kib = int(d.execute_script("return document.body.dataset.weight || 0"))
    check(0 < kib < 64 * 1024, "the page reports a weight of %d bytes" % kib)
    console_errors(d)
    d.set_window_size(1100, 900)

    # a long text: its sentences show as the daemon finishes them, a
    # progress bar counts them (every change of it and of the partial
    # results recorded as it happens), then the whole answer as the API's
    long_text = ("The weather is nice today. I would like a cup of coffee. Where is the "
                 "station? The house is green. Thank you very much. We are going home now.")
    d.execute_script("""
        window.tdUpdates = {bar: [], maxes: []};
        const bar = document.getElementById('progress');
        const proto = Object.getOwnPropertyDescriptor(HTMLProgressElement.prototype, 'value');
        Object.defineProperty(bar, 'value', {get() { return proto.get.call(this); },
            set(v) { window.tdUpdates.bar.push(v); window.tdUpdates.maxes.push(this.max);
                     proto.set.call(this, v); }});
        document.getElementById('results').dataset.partials = '0';
    """)
    src = d.find_element(By.ID, "src")
    src.clear()
    src.send_keys(long_text)
    d.find_element(By.ID, "go").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#results .translation")
         and not d.find_elements(By.CSS_SELECTOR, "#results li.partial"),
         "no translation of the long text")
    upd = d.execute_script("return window.tdUpdates")
    upd["partial"] = int(d.find_element(By.ID, "results").get_attribute("data-partials"))
    st, api = dm.translate({"text": [long_text], "model": NAME, "beam_size": 4,
                            "num_hypotheses": 1, "return_tokens": True})
    shown = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#results .translation")]
    # (the test model's translations may start or end with spaces: the DOM's text does not)
    check(st == 200 and shown == [api["translations"][0]["text"].strip()],
          "the long text: the page shows %r, the API answers %r" % (shown, api))
    n_sent = len(api["translations"][0]["sentences"])
    check(n_sent == 6 and upd["maxes"] and upd["maxes"][-1] == 6,
          "the progress bar counted %r sentences, the daemon %d" % (upd["maxes"][-1:], n_sent))
    # one step of the bar a sentence (0 first, 6 last), each shown as it came
    check(upd["bar"][0] == 0 and upd["bar"][-1] == 6 and
          sorted(set(upd["bar"])) == list(range(7)),
          "progress bar values %r" % upd["bar"])
    check(upd["partial"] >= 6, "the partial results were drawn %d times for 6 sentences"
          % upd["partial"])
    check(not d.find_element(By.ID, "progress").is_displayed(), "the bar stays after the answer")
    console_errors(d)


def run_file(d, dm):
    """The file section: a .srt chosen, translated through /translate_file,
    its download the daemon's translation of the same file."""
    import http.client
    import tempfile
    srt = ("1\n00:00:01,000 --> 00:00:02,000\nHello world\n\n2\n00:00:03,000 --> "
           "00:00:04,000\nThe cat sat on the mat.\n")
    with tempfile.TemporaryDirectory(prefix="td-web-file-") as tmp:
        path = os.path.join(tmp, "clip.srt")
        with open(path, "w") as f:
            f.write(srt)
        d.get(dm.base + "/")
        wait(d, lambda: NAME in d.find_element(By.ID, "served").text, "reload for the file")
        check(d.find_element(By.ID, "fgo").get_attribute("disabled") is not None,
              "the file button is enabled with no file")
        d.find_element(By.ID, "file").send_keys(path)
        wait(d, lambda: d.find_element(By.ID, "fgo").get_attribute("disabled") is None,
             "the file button stays disabled after choosing a file")
        d.find_element(By.ID, "fgo").click()
        wait(d, lambda: d.find_element(By.ID, "fdownload").is_displayed(),
             "no download link after translating the file: %s" %
             d.find_element(By.ID, "error").text)
        link = d.find_element(By.ID, "fdownload")
        check(link.get_attribute("download") == "clip.srt",
              "the download is named %r" % link.get_attribute("download"))
        href = link.get_attribute("href")
        check(href.startswith(dm.base + "/download_file/"), "download link %r" % href)
        got = dm.get(href[len(dm.base):])
        check(got[0] == 200, "the download: %d" % got[0])
        # the same file through the API: the same translation
        boundary = "XyZzYfile"
        body = ("--%s\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nen\r\n"
                "--%s\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\nde\r\n"
                "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"clip.srt\"\r\n"
                "\r\n%s\r\n--%s--\r\n" % (boundary, boundary, boundary, srt, boundary)).encode()
        c = http.client.HTTPConnection("127.0.0.1", dm.port, timeout=60)
        c.request("POST", "/translate_file", body,
                  {"Content-Type": "multipart/form-data; boundary=" + boundary})
        url = json.loads(c.getresponse().read())["translatedFileUrl"]
        want = dm.get(url[url.index("/download_file/"):])
        check(got[2] == want[2], "the page's file %r, the API's %r" % (got[2], want[2]))
        check(b"00:00:03,000 --> 00:00:04,000" in got[2], "timing lost: %r" % got[2])
    console_errors(d)


def run_file_same_language(d, exe, model):
    """A file already in the target language: the page says so, not that it
    was translated. Two models (the second read as de -> en), so that the
    page offers "by the text's language" and a target; an English file
    into en is detected as English and copied."""
    import tempfile
    from selenium.webdriver.support.ui import Select
    dm = Daemon(exe, model, ["--model", "back=" + model, "--model-languages", "back=de-en"])
    try:
        with tempfile.TemporaryDirectory(prefix="td-web-same-") as tmp:
            path = os.path.join(tmp, "note.txt")
            with open(path, "w") as f:
                f.write("The weather is nice today and we are going to the beach with the "
                        "children.\n")
            d.get(dm.base + "/")
            wait(d, lambda: "back" in d.find_element(By.ID, "served").text,
                 "the second model is not listed")
            check(Select(d.find_element(By.ID, "model")).first_selected_option
                  .get_attribute("value") == "", "a model is chosen, not the text's language")
            d.find_element(By.ID, "file").send_keys(path)
            for into, same in (("en", True), ("de", False)):
                Select(d.find_element(By.ID, "ftarget")).select_by_value(into)
                d.find_element(By.ID, "fgo").click()
                wait(d, lambda: d.find_element(By.ID, "fdownload").is_displayed() and
                     "Translating" not in d.find_element(By.ID, "fstatus").text,
                     "no download link: %s" % d.find_element(By.ID, "error").text)
                st = d.find_element(By.ID, "fstatus")
                warned = "already in en" in st.text and "nothing was translated" in st.text
                check(warned == same and ("translated in" in st.text) == (not same) and
                      ("warn" in st.get_attribute("class").split()) == same,
                      "into %s: the page says %r (class %r)" % (into, st.text,
                                                               st.get_attribute("class")))
                d.find_element(By.ID, "fdownload").get_attribute("href")
                d.execute_script("document.getElementById('fdownload').hidden = true")
    finally:
        dm.stop()
    console_errors(d)


def run_docs(d, dm):
    """/docs: the daemon's /openapi.json drawn as a page, offline (the CSP
    allows nothing outside the server); /spec: the same document."""
    st, _, spec = dm.get("/spec")
    st2, _, oa = dm.get("/openapi.json")
    check(st == 200 and st2 == 200 and spec == oa, "/spec is not /openapi.json")
    doc = json.loads(oa)
    ops = [(m.upper(), p) for p, item in doc["paths"].items()
           for m in ("get", "post", "put", "delete", "patch", "head", "options") if m in item]
    d.get(dm.base + "/docs")
    wait(d, lambda: d.execute_script("return document.body.dataset.operations || ''") != "",
         "the API page drew nothing")
    n = int(d.execute_script("return document.body.dataset.operations"))
    check(n == len(ops), "/docs shows %d operations, /openapi.json has %d" % (n, len(ops)))
    toc = [a.text for a in d.find_elements(By.CSS_SELECTOR, "#toc a")]
    check(toc == ["%s %s" % o for o in ops], "/docs lists %r" % toc[:5])
    # an operation's fields: /translate's JSON body lists q, source, target
    fields = d.execute_script(
        "const s = [...document.querySelectorAll('section.op')].find("
        "  x => x.querySelector('h2').textContent === 'POST /translate');"
        "return s ? [...s.querySelectorAll('table tbody tr td:first-child')].map(t => t.textContent) : [];")
    check(all(f in fields for f in ("q", "source", "target")), "/translate's fields: %r" % fields)
    check(doc["info"]["title"] in d.find_element(By.ID, "title").text, "no title")
    console_errors(d)


def run_key(d, exe, model):
    dk = Daemon(exe, model, ["--api-key", "s3cret"])
    try:
        d.get(dk.base + "/")
        wait(d, lambda: NAME in d.find_element(By.ID, "served").text, "key daemon")
        src = d.find_element(By.ID, "src")
        src.clear()
        src.send_keys(TEXTS[0])
        d.find_element(By.ID, "go").click()
        wait(d, lambda: d.find_element(By.ID, "keybox").is_displayed(), "no key prompt on 401")
        check(d.find_element(By.ID, "error").text.startswith("a valid API key is required"),
              "401 shown as %r" % d.find_element(By.ID, "error").text)
        d.find_element(By.ID, "key").send_keys("s3cret")
        d.find_element(By.ID, "keysave").click()
        d.find_element(By.ID, "go").click()
        wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#results .translation")) == 1,
             "no translation with the key")
        st, api = dk.translate({"text": [TEXTS[0]], "beam_size": 4}, key="s3cret")
        check(d.find_element(By.CSS_SELECTOR, "#results .translation").text ==
              api["translations"][0]["text"], "translation with the key")
        stored = d.execute_script("return [sessionStorage.length, localStorage.length, "
                                  "document.cookie]")
        check(stored == [1, 0, ""], "the key is kept as %r (want sessionStorage only)" % stored)
        console_errors(d, allowed=("/v1/translate - Failed to load resource: the server "
                                   "responded with a status of 401",))
    finally:
        dk.stop()


if __name__ == "__main__":
    sys.exit(main())
