"""The published site in a real headless browser (Debian's chromium, driven by
playwright), built from the golden records and a third-party submission whose DP-SGD
ran on shuffled batches: a table sorts when its header is clicked, the notion filter
hides rows, links lead to a method page and a configuration page, the submission's row
shows its mark without hovering and is never the best, and no page, opened from the file
system or from a static web server, has a console error, a request outside the site, or
a link to a file the site does not have."""
from __future__ import annotations

import functools
import http.server
import json
import re
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import reports
from benchmarks import archive
from benchmarks.records import CATALOGUE, SAMPLING, SHUFFLED_BATCHES, RunRecord
from benchmarks.settings_chosen import TRACKS
from benchmarks.submission import bundle
from tests.comparison_inputs import comparison_records
from tests.leaderboard_inputs import catalogued, rehashed

GOLDEN = Path(__file__).parent / "golden"
ROOT = Path(__file__).parent.parent
CHROMIUM = Path("/usr/bin/chromium")
# Headless, and none of Chromium's own connections: the machine's network is closed.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed: pip install -e '.[test]'")
pytestmark = [pytest.mark.integration, pytest.mark.skipif(
    not CHROMIUM.is_file(),
    reason=f"no {CHROMIUM}: `make test-integration` installs Debian's chromium when run as "
           "root with apt")]


# A submitted method whose DP-SGD steps took shuffled batches: the golden DP-SGD run on
# MNIST at epsilon 2, renamed and above it.
SHUFFLED_METHOD = "tfp-shuffled-mlp"


# The golden LP-1ST on the CPU CNN at MNIST epsilon 1, declared a priori in the catalogue
# beside the records: the honest track's best of the first card, ranked second under the
# test-tuned LP-1ST on Inception.
A_PRIORI_CELL = "07a6406b1dab21b7cd93"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("browser")
    out = folder / "site"
    records = catalogued(GOLDEN / "records", folder / "records")
    catalogue = json.loads((records / CATALOGUE).read_text())
    catalogue["chosen"][A_PRIORI_CELL] = {"how": "a priori", "detail": "a test fixture"}
    (records / CATALOGUE).write_text(json.dumps(catalogue))
    reports.build(records, out, submissions=[shuffled_submission(folder / "bundle")])
    return out


def shuffled_submission(folder: Path) -> bundle.Submission:
    """A checked submission of one run whose steps took shuffled batches, as privboard
    submit marks it."""
    golden = json.loads((GOLDEN / "records" / "mnist-dpsgd-e2-s0.json").read_text())
    record = rehashed({**golden, "method": SHUFFLED_METHOD, "suite": "submitted",
                       "metrics": {"accuracy_pct": 99.0},
                       "privacy": {**golden["privacy"], "details": {SAMPLING: SHUFFLED_BATCHES}}})
    run = RunRecord.from_dict(record, folder / f"{record['cell_id']}.json")
    manifest = {"method": SHUFFLED_METHOD, "command": "privboard submit",
                "plugin": {"package": "privboard-shuffled", "version": "0.1.0",
                           "entry_point": "tfp_shuffled"},
                "accounting": bundle.shuffled_batches(["tensorflow-privacy"]),
                "own_charges": ["DP-SGD (tensorflow-privacy)"], "checks": [],
                "source": {"sha256": "sha256:0"}}
    facts = {"paper": "a test submission", "version": 1, "tasks": ["image"],
             "defaults": golden["hparams"], "notion": {
                 key: golden["privacy"][key]
                 for key in ("protects", "neighbours", "kind", "accountant")}}
    return bundle.Submission(folder, manifest, [run], {
        "written_at": "", "methods": {SHUFFLED_METHOD: facts}, "datasets": {},
        "configurations": {run.config_id: ["submitted"]}})


@pytest.fixture(scope="module")
def archive_site(tmp_path_factory) -> Path:
    """The site of our archive alone, as a clean clone builds it."""
    out = tmp_path_factory.mktemp("archive") / "site"
    reports.build(None, out, archive=archive.ARCHIVE)
    return out


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def server(site):
    """The site on a plain static web server, as a static host would serve it."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
        httpd.shutdown()


class Visit:
    """A browser page that records every console error, script error and failed or
    outside request; requests outside the site are refused."""

    def __init__(self, browser, base: str) -> None:
        self.base = base
        self.problems: list[str] = []
        self.page = browser.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"script error: {error}"))
        self.page.on("requestfailed", lambda request: self.problems.append(
            f"failed request: {request.url} ({request.failure})"))
        self.page.on("response", self._response)
        self.page.route("**/*", self._inside_only)

    def _console(self, message) -> None:
        if message.type == "error":
            self.problems.append(f"console error on {self.page.url}: {message.text}")

    def _response(self, response) -> None:
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def _inside_only(self, route) -> None:
        url = route.request.url
        if url.startswith((self.base, "data:")):
            route.continue_()
        else:
            self.problems.append(f"request outside the site: {url}")
            route.abort()

    def open(self, relative: str) -> None:
        self.page.goto(self.base + relative)

    def column(self, table: str, column: str) -> list[str]:
        """The sort keys of one column of a table, in the order shown."""
        return self.page.eval_on_selector(table, """(table, column) => {
            const index = [...table.tHead.rows[0].cells].findIndex(
                th => th.dataset.column === column);
            return [...table.tBodies[0].rows].map(row => row.cells[index].dataset.sort);
        }""", column)


@pytest.fixture
def visit(browser, site):
    visit = Visit(browser, site.as_uri() + "/")
    yield visit
    visit.page.close()
    assert visit.problems == []


def _numbers(keys: list[str]) -> list[float]:
    return [float(key) for key in keys if key != ""]


def test_clicking_a_header_sorts_the_table_and_again_reverses_it(visit):
    visit.open("tables.html")
    table = "#table-mnist"
    before = visit.column(table, "ours")
    header = visit.page.locator(f'{table} th[data-column="ours"]')
    header.click()
    ascending = visit.column(table, "ours")
    assert ascending != before and sorted(ascending) == sorted(before)
    values = _numbers(ascending)
    assert len(values) >= 3 and values == sorted(values)
    assert ascending[len(values):] == [""] * (len(ascending) - len(values))  # no value: last
    assert header.get_attribute("aria-sort") == "ascending"
    header.click()
    descending = visit.column(table, "ours")
    assert _numbers(descending) == sorted(values, reverse=True)
    assert header.get_attribute("aria-sort") == "descending"

    visit.page.locator(f'{table} th[data-column="epsilon"]').click()
    epsilons = _numbers(visit.column(table, "epsilon"))
    assert epsilons == sorted(epsilons) and epsilons[-1] == float("inf")


def test_the_notion_filter_hides_the_unticked_notions(visit):
    visit.open("tables.html")
    rows = visit.page.locator('#table-mnist tbody tr[data-scope="label-dp"]')
    others = visit.page.locator('#table-mnist tbody tr:not([data-scope="label-dp"])')
    assert rows.count() > 0 and rows.first.is_visible()
    visit.page.locator('#notion-filter input[value="label-dp"]').uncheck()
    assert all(row.is_hidden() for row in rows.all())
    assert others.first.is_visible()
    shown = f"{others.count()} of {rows.count() + others.count()} rows shown"
    assert visit.page.locator("#table-mnist-count").inner_text() == shown


def test_links_lead_to_a_method_page_and_a_configuration_page(visit):
    visit.open("tables.html")
    visit.page.locator('#table-mnist a[href="methods/lp-1st.html"]').first.click()
    assert visit.page.url.endswith("/methods/lp-1st.html")
    assert visit.page.locator("h1").inner_text() == "lp-1st"
    body = visit.page.locator("body").inner_text()
    for piece in ("Ghazi", "Where the budget goes", "RRWithPrior", "neighbouring datasets differ",
                  "Default hyperparameters", "07a6406b1dab21b7cd93"):
        assert piece in body, piece

    visit.page.go_back()
    ours = visit.page.locator('#table-mnist a.ours[href="cells/07a6406b1dab21b7cd93.html"]').first
    ours.click()
    assert visit.page.url.endswith("/cells/07a6406b1dab21b7cd93.html")
    assert "lp-1st" in visit.page.locator("h1").inner_text()
    body = visit.page.locator("body").inner_text()
    assert "Runs" in body and "0123456789abcdef0123456789abcdef01234567" in body


def _ranked(card) -> list[tuple[int, float]]:
    """(rank, mean) of every configuration of a ranking card: its bests', then the
    others' in its table."""
    found = [(int(top.locator(".top-rank").inner_text().split()[0].lstrip("#")),
              float(top.locator("a.ours").inner_text().split(" ")[0]))
             for top in card.locator(".top:not(.top-none)").all()]
    return found + [(int(row.locator("td.rank").inner_text()),
                     float(row.locator("a.ours").inner_text().split(" ")[0]))
                    for row in card.locator("tbody tr").all()]


def _at_1366(browser, site) -> Visit:
    visit = Visit(browser, site.as_uri() + "/")
    visit.page.set_viewport_size({"width": 1366, "height": 768})
    return visit


def test_the_first_screen_answers_with_the_best_of_both_tracks(browser, site):
    """At 1366 x 768, the first card (MNIST, label-DP, epsilon 1) opens on its best honest
    configuration beside its best test-tuned one, each with its badge, both on the first
    screen; the others follow, ranked."""
    visit = _at_1366(browser, site)
    visit.open("index.html")
    panel = visit.page.locator("section.dataset-ranking:visible")
    assert panel.count() == 1 and panel.get_attribute("data-dataset") == "mnist"
    family = panel.locator("div.family-ranking:visible")
    assert family.count() == 1 and family.get_attribute("data-family") == "label-dp"
    first = family.locator("div.card").first
    honest, tuned = (first.locator(f'.top[data-track="{track}"]') for track in TRACKS)
    assert "lp-1st" in honest.inner_text() and "CPU CNN" in honest.inner_text()
    assert honest.locator(".tag").first.inner_text() == "a priori"
    assert honest.locator(".best-tag").inner_text() == "best · honest"
    assert "Inception" in tuned.inner_text() and "#1 of 2" in tuned.inner_text()
    assert tuned.locator(".tag").first.inner_text() == "not declared"
    assert tuned.locator(".best-tag").inner_text() == "best · test-tuned"
    left, right = honest.bounding_box(), tuned.bounding_box()
    assert abs(left["y"] - right["y"]) < 1 and left["x"] + left["width"] <= right["x"]
    for box in (left, right):  # on the first screen, whole
        assert box["y"] + box["height"] <= 768 and box["x"] + box["width"] <= 1366, box
    for card in family.locator("div.card").all():
        reference = "reference" in card.locator(".card-head").inner_text()
        assert card.locator(".top").count() == (0 if reference else 2)
        ranked = sorted(_ranked(card))  # the bests' ranks and the others', all of them
        assert [rank for rank, _ in ranked] == list(range(1, len(ranked) + 1))
        means = [mean for _, mean in ranked]
        assert means == sorted(means, reverse=True), ranked
    visit.page.close()
    assert visit.problems == []


def test_a_card_without_an_honest_configuration_says_so_in_one_line(browser, site):
    visit = _at_1366(browser, site)
    visit.open("index.html")
    card = visit.page.locator("div.card:visible").nth(1)  # MNIST, label-DP, epsilon 2
    none = card.locator('.top[data-track="honest"]')
    assert none.inner_text() == "best · honest none: all here are test-tuned."
    line = none.locator(".muted").bounding_box()
    assert line["height"] < 20, line  # one line of text
    visit.page.close()
    assert visit.problems == []


def _cut(visit) -> list[str]:
    """The cells of the visible cards that reach past their card's edge, and whether the
    page scrolls sideways."""
    return visit.page.evaluate("""() => {
        const cut = [...document.querySelectorAll("div.card")]
            .filter(card => card.offsetParent !== null)
            .flatMap(card => [...card.querySelectorAll("th, td, .top")]
                .filter(cell => cell.getBoundingClientRect().right
                                > card.getBoundingClientRect().right + 0.5)
                .map(cell => card.id + ": " + cell.innerText.slice(0, 30)));
        const page = document.documentElement;
        return page.scrollWidth > page.clientWidth ? [...cut, "the page scrolls sideways"] : cut;
    }""")


def test_no_column_of_a_card_is_cut_at_1366_px(browser, site, archive_site):
    """In every tab, of the golden site and of the site of our archive."""
    for built in (site, archive_site):
        visit = _at_1366(browser, built)
        visit.open("index.html")
        for dataset in visit.page.locator("#ranking-picker button[data-dataset]").all():
            dataset.click()
            for family in visit.page.locator("#ranking-picker button[data-family]").all():
                if not family.is_disabled():
                    family.click()
                    assert _cut(visit) == [], visit.page.url
        visit.page.close()
        assert visit.problems == []


def test_the_tabs_are_kept_in_the_address_and_a_link_opens_on_them(browser, site):
    visit = _at_1366(browser, site)
    visit.open("index.html#adult/full-dp")
    shown = visit.page.locator("section.dataset-ranking:visible")
    assert shown.count() == 1 and shown.get_attribute("data-dataset") == "adult"
    selected = visit.page.locator('#ranking-picker button[aria-selected="true"]')
    assert selected.all_inner_texts() == ["Adult", "full DP"]
    assert visit.page.locator('#ranking-picker button[data-family="label-dp"]').is_disabled()

    visit.page.locator('#ranking-picker button[data-dataset="mnist"]').click()
    visit.page.locator('#ranking-picker button[data-family="label-dp"]').click()
    assert visit.page.url.endswith("index.html#mnist/label-dp")
    visit.page.reload()
    family = visit.page.locator("div.family-ranking:visible")
    assert family.get_attribute("data-family") == "label-dp"
    assert visit.page.locator("section.dataset-ranking:visible").get_attribute(
        "data-dataset") == "mnist"
    visit.page.goto(visit.base + "index.html#mnist/full-dp")  # a link within the page
    assert visit.page.locator("div.family-ranking:visible").get_attribute(
        "data-family") == "full-dp"
    tabs = visit.page.locator("#ranking-picker button[data-dataset]").all_inner_texts()
    assert tabs[0] == "MNIST" and tabs[-1] == "Adult"
    visit.page.close()
    assert visit.problems == []


def test_a_run_on_shuffled_batches_shows_its_mark_and_is_never_the_best(visit):
    """The highest mean of its card, yet not the best: ranked first among the others,
    under the best; its mark is text on the page, in the ranking and in the full table,
    not a tooltip."""
    visit.open("index.html")
    visit.page.locator('#ranking-picker button[data-family="full-dp"]').click()
    card = visit.page.locator("div.card:visible").filter(has_text=SHUFFLED_METHOD)
    best = card.locator('.top[data-track="test-tuned"]')
    assert "dp-sgd" in best.inner_text() and SHUFFLED_METHOD not in best.inner_text()
    rows = card.locator("tbody tr")
    assert rows.count() == 1 and SHUFFLED_METHOD in rows.first.inner_text()
    assert rows.first.locator("td.rank").inner_text() == "1"
    mark = rows.first.locator(".unproven")
    assert mark.is_visible() and mark.inner_text() == SHUFFLED_BATCHES

    visit.open("tables.html")
    line = visit.page.locator("#table-mnist tbody tr").filter(has_text=SHUFFLED_METHOD)
    assert line.locator(".unproven").is_visible()
    assert line.locator(".third-party .warning").inner_text() == (
        f"{SHUFFLED_BATCHES} (tensorflow-privacy)")


PAGES = ["index.html", "tables.html", "how-to-read.html", "methods/lp-1st.html",
         "datasets/mnist.html", "cells/07a6406b1dab21b7cd93.html"]


def test_no_table_scrolls_sideways_at_1400_px_and_no_page_names_a_path(browser, site):
    visit = Visit(browser, site.as_uri() + "/")
    visit.page.set_viewport_size({"width": 1400, "height": 900})
    for page in PAGES:
        visit.open(page)
        visit.page.evaluate("""() => document.querySelectorAll("details").forEach(
            details => { details.open = true; })""")
        wide = visit.page.evaluate("""() => [...document.querySelectorAll("table")]
            .filter(table => table.offsetParent !== null)
            .filter(table => table.parentElement.scrollWidth > table.parentElement.clientWidth
                    || table.getBoundingClientRect().right > document.documentElement.clientWidth)
            .map(table => table.id || table.className)""")
        assert wide == [], page
        text = visit.page.locator("body").inner_text()
        assert str(site.parent) not in text and str(ROOT) not in text, page
        assert not re.search(r"(^|[\s(])/(home|root|tmp|work|Users)/", text), page
    visit.page.close()
    assert visit.problems == []


# From the file system every page is visited; from the web server one page of each kind
# (the same templates, so the same relative links).
ONE_OF_EACH = ["index.html", "methods/lp-1st.html", "datasets/mnist.html",
               "cells/07a6406b1dab21b7cd93.html"]


@pytest.mark.parametrize("served_by", ["file system", "web server"])
def test_no_page_has_a_console_error_or_a_broken_link(browser, site, server, served_by):
    crawl = served_by == "file system"
    base = site.as_uri() + "/" if crawl else server
    visit = Visit(browser, base)
    pending, seen, broken = ["index.html"] if crawl else list(ONE_OF_EACH), set(), []
    while pending:
        page = pending.pop()
        if page in seen:
            continue
        seen.add(page)
        visit.open(page)
        links = visit.page.eval_on_selector_all("[href], [src]", """nodes => nodes.map(node => {
            const written = node.getAttribute("href") ?? node.getAttribute("src");
            return [written, new URL(written, document.baseURI).href];
        })""")
        for written, url in links:
            if url.startswith("data:"):
                continue
            target = _inside(url, base)
            if target is None or not (site / target).is_file():
                broken.append(f"{page}: {written}")
            elif target.endswith(".html"):
                fragment = urlsplit(url).fragment
                if fragment and f'id="{fragment}"' not in (site / target).read_text():
                    broken.append(f"{page}: {written} (no such anchor)")
                if crawl:
                    pending.append(target)
    visit.page.close()
    assert broken == [] and visit.problems == []
    if crawl:  # every page is reachable from the index
        assert seen == {str(path.relative_to(site)) for path in site.rglob("*.html")}


def _inside(url: str, base: str) -> str | None:
    """The site-relative path a URL points at, or None if it leaves the site."""
    plain = url.split("#")[0].split("?")[0]
    if not plain.startswith(base):
        return None
    return unquote(urlsplit(plain).path)[len(unquote(urlsplit(base).path)):]


@pytest.fixture(scope="module")
def tuned_site(tmp_path_factory) -> Path:
    """label-dp-small's runs beside label-dp-small-tuned's, as the comparison's tests
    build them: ALIBI and DP-SGD at total epsilon 1 in both, 3 seeds each."""
    folder = tmp_path_factory.mktemp("tuned")
    reports.build(comparison_records(folder / "records"), folder / "site")
    return folder / "site"


def test_the_cost_of_honest_tuning_is_shown_beside_the_test_tuned_rows(browser, tuned_site):
    visit = Visit(browser, tuned_site.as_uri() + "/")
    visit.open("index.html")
    tracks = visit.page.locator(".best-tag").all_inner_texts()
    assert "best · honest" in tracks and "best · test-tuned" in tracks, tracks
    visit.page.click("a[href$='datasets/mnist.html#tuning-cost']")
    section = visit.page.locator("#tuning-cost")
    assert section.is_visible()
    rows = [row.split("\t") for row in
            section.locator("tbody tr").evaluate_all("rows => rows.map(r => r.innerText)")]
    assert [(row[1].split(" ")[0], row[4]) for row in rows] == [("alibi", "-3.70"),
                                                                ("dp-sgd", "-3.50")], rows
    assert section.locator("img.plot").evaluate("img => img.complete && img.naturalWidth > 0")
    visit.page.close()
    assert visit.problems == []
