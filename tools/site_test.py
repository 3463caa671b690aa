"""Test the built book in a real browser: `make test-site` (after `make book`).

    python tools/site_test.py [--site _build/html] [--out _build/site-test] [--chromium /usr/bin/chromium]

Serves the built site from 127.0.0.1 (a server inside this process, on a free port, stopped when the test ends or
after --time-limit seconds), opens every page in headless Chromium (Debian's `chromium`, driven by Playwright
for Python through its `executable_path`; Playwright downloads no browser), blocks and counts every request to
another host, and fails on:

* a console error or an uncaught page error; a failed request or an HTTP error status; any request to another host;
* raw TeX left in the text after MathJax ran (outside code);
* a broken image; an internal link to a missing file or a missing anchor;
* a launch button (Binder, Colab) that does not point at a notebook of this repository at its path;
* horizontal scrolling at 390 px width, on every page.

It also checks that searching for "rotary" lists the RoPE chapter, that an exercise solution and a proof fold
and unfold, and that a page opened straight from disk (file://) renders its math. Screenshots go to --out.
Exit status 0 when everything passed, 1 with a list of problems otherwise, 2 when the browser is missing.
"""

from __future__ import annotations

import argparse
import functools
import html.parser
import http.server
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
INSTALL_HELP = """\
The site test needs Debian's Chromium and Playwright for Python:
    apt-get update && apt-get install -y chromium     (as root; the browser lands in /usr/bin/chromium)
    make install                                     (installs playwright from requirements.txt)
Playwright's own browser download (`playwright install`) is not needed and not used."""

# TeX that MathJax should have replaced. Matched against text outside code, <script>, and MathJax output.
RAW_TEX = re.compile(
    r"\\[()\[\]]"  # \( \) \[ \]
    r"|\$\$"  # display dollars
    r"|\$[^$\n]{0,80}\\[A-Za-z]+[^$\n]{0,80}\$"  # $ ... \command ... $
    r"|\\(?:text|mathrm|mathbf|mathcal|frac|sqrt|sin|cos|omega|theta|alpha|sum|cdot|top|langle|rangle|operatorname|left|right|begin|end|mathbb|ell|qquad|quad|le|ge|in|to)(?![A-Za-z])"
)
SKIP_TEXT_IN = "pre, code, script, style, textarea, mjx-container, mjx-assistive-mml, .MathJax, .highlight, kbd"

LAUNCH_HOSTS = ("mybinder.org", "colab.research.google.com")


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    pages: int = 0

    def fail(self, page: str, message: str) -> None:
        self.problems.append(f"{page}: {message}")


# ----------------------------------------------------------------------------------------------- static checks


class _LinkParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def repository_settings(config_path: Path = ROOT / "_config.yml") -> tuple[str, str, str]:
    """(owner/name, branch, path_to_book) of the published repository, from `repository:` in _config.yml."""
    repo = yaml.safe_load(config_path.read_text())["repository"]
    url = repo["url"].rstrip("/")
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(?:\.git)?", url)
    if not match:
        raise ValueError(f"repository.url in _config.yml must be https://github.com/OWNER/NAME, not {url!r}")
    return match.group(1), repo.get("branch", "main"), (repo.get("path_to_book") or "").strip("/")


def launch_url_problems(html_files: list[Path], repo_root: Path, repository: str, branch: str) -> tuple[list[str], int]:
    """Check every Binder and Colab link in the given pages: right repository and branch, an existing notebook.

    Returns (problems, number of launch links seen).
    """
    problems: list[str] = []
    seen = 0
    binder = re.compile(r"https://mybinder\.org/v2/gh/(?P<repo>[^/]+/[^/]+)/(?P<branch>[^?]+)\?urlpath=(?:lab/)?tree/(?P<path>.+)")
    colab = re.compile(r"https://colab\.research\.google\.com/github/(?P<repo>[^/]+/[^/]+)/blob/(?P<branch>[^/]+)/(?P<path>.+)")
    for page in html_files:
        parser = _LinkParser()
        parser.feed(page.read_text(encoding="utf-8"))
        for href in parser.hrefs:
            host = urllib.parse.urlsplit(href).hostname or ""
            if host not in LAUNCH_HOSTS:
                continue
            seen += 1
            match = binder.fullmatch(href) or colab.fullmatch(href)
            if match is None:
                problems.append(f"{page.name}: launch link of an unknown form: {href}")
                continue
            path = urllib.parse.unquote(match["path"])
            if match["repo"] != repository:
                problems.append(f"{page.name}: launch link names repository {match['repo']}, not {repository}: {href}")
            if urllib.parse.unquote(match["branch"]) != branch:
                problems.append(f"{page.name}: launch link names branch {match['branch']}, not {branch}: {href}")
            target = repo_root / path
            if not (path.endswith(".ipynb") and target.is_file()):
                problems.append(f"{page.name}: launch link points at {path}, which is not a notebook in the repository")
    return problems, seen


# ----------------------------------------------------------------------------------------------- server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass


class LocalServer:
    """Serve a folder on 127.0.0.1 (a free port) from a thread of this process; stops on exit or after a limit."""

    def __init__(self, folder: Path, time_limit: float) -> None:
        handler = functools.partial(_QuietHandler, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(time_limit, self.stop)
        self._timer.daemon = True

    def __enter__(self) -> "LocalServer":
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        self.stop()
        self.httpd.server_close()


# ----------------------------------------------------------------------------------------------- browser checks

_PAGE_STATE_JS = """
(args) => {
  const [skipSelector, rawTex] = args;
  const re = new RegExp(rawTex);
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skipSelector)) continue;
    const m = node.textContent.match(re);
    if (m) raw.push(node.textContent.trim().slice(0, 120));
  }
  const ids = Array.from(document.querySelectorAll("[id]")).map((e) => e.id)
    .concat(Array.from(document.querySelectorAll("a[name]")).map((e) => e.getAttribute("name")));
  const links = Array.from(document.querySelectorAll("a[href]")).map((a) => a.href);
  const images = Array.from(document.images).map((img) => ({src: img.currentSrc || img.src,
    ok: img.complete && img.naturalWidth > 0}));
  const mathSource = document.querySelectorAll("span.math, div.math").length;
  const mathRendered = document.querySelectorAll("mjx-container").length;
  return {raw, ids, links, images, mathSource, mathRendered};
}
"""

_WAIT_FOR_MATHJAX_JS = """
async () => {
  if (!window.MathJax) return "no MathJax";
  for (let i = 0; i < 200 && !(MathJax.startup && MathJax.startup.promise); i++) {
    await new Promise((r) => setTimeout(r, 25));
  }
  if (!(MathJax.startup && MathJax.startup.promise)) return "MathJax did not start";
  await MathJax.startup.promise;
  return "ok";
}
"""


def _is_local(url: str, origin: str, site: Path | None = None) -> bool:
    """A request to the test server, to the built site on disk, or with no host at all."""
    if url.startswith(("data:", "blob:", "about:")):
        return True
    if site is not None and url.startswith(site.resolve().as_uri() + "/"):
        return True
    return url.startswith(origin + "/") or url == origin


def run_browser_checks(site: Path, out: Path, chromium: str, time_limit: float, report: Report) -> None:
    from playwright.sync_api import sync_playwright

    pages = sorted(p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith(("_", "."))
                   and 'http-equiv="Refresh"' not in p.read_text(encoding="utf-8")[:2000])  # skip redirect stubs
    ids_by_path: dict[str, set[str]] = {}
    links_by_page: dict[str, list[str]] = {}
    out.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="site-test-profile-")
    try:
        with LocalServer(site, time_limit) as server, sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=chromium,
                headless=True,
                args=CHROMIUM_ARGS + ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
                viewport={"width": 1280, "height": 900},
                service_workers="block",
            )
            context.set_default_timeout(30_000)
            current = {"page": "(start)"}

            def route(route_, request) -> None:
                if _is_local(request.url, server.origin, site):
                    route_.continue_()
                else:
                    report.blocked.append(request.url)
                    report.fail(current["page"], f"request to another host (blocked): {request.url}")
                    route_.abort()

            context.route("**/*", route)
            page = context.pages[0] if context.pages else context.new_page()
            page.on("console", lambda msg: msg.type == "error" and report.fail(current["page"], f"console error: {msg.text}"))
            page.on("pageerror", lambda err: report.fail(current["page"], f"page error: {err}"))
            # net::ERR_ABORTED is the browser cancelling a request because the test moved on (a font still loading
            # when the next page opens), not a failure of the site; every other failure counts.
            page.on("requestfailed", lambda req: _is_local(req.url, server.origin, site)
                    and "ERR_ABORTED" not in str(req.failure)
                    and report.fail(current["page"], f"failed request: {req.url} ({req.failure})"))
            page.on("response", lambda resp: resp.status >= 400
                    and report.fail(current["page"], f"HTTP {resp.status}: {resp.url}"))

            for path in pages:
                rel = path.relative_to(site).as_posix()
                current["page"] = rel
                page.goto(f"{server.origin}/{rel}", wait_until="load")
                status = page.evaluate(_WAIT_FOR_MATHJAX_JS)
                if status != "ok":
                    report.fail(rel, status)
                state = page.evaluate(_PAGE_STATE_JS, [SKIP_TEXT_IN, RAW_TEX.pattern])
                for text in state["raw"]:
                    report.fail(rel, f"raw TeX in the text: {text!r}")
                if state["mathSource"] and not state["mathRendered"]:
                    report.fail(rel, "the page has math but MathJax rendered none")
                for image in state["images"]:
                    if not image["ok"]:
                        report.fail(rel, f"broken image: {image['src']}")
                ids_by_path[rel] = set(state["ids"])
                links_by_page[rel] = state["links"]
                report.pages += 1

            # Links and anchors, checked against the files and the ids seen above.
            for rel, links in links_by_page.items():
                for link in links:
                    if not _is_local(link, server.origin):
                        continue
                    parts = urllib.parse.urlsplit(link)
                    target = urllib.parse.unquote(parts.path).lstrip("/") or "index.html"
                    if target.endswith("/"):
                        target += "index.html"
                    if not (site / target).is_file():
                        report.fail(rel, f"broken link: {link}")
                        continue
                    if parts.fragment and target.endswith(".html"):
                        anchor = urllib.parse.unquote(parts.fragment)
                        if target not in ids_by_path:
                            continue  # a page under _static or _sources: not crawled
                        if anchor not in ids_by_path[target]:
                            report.fail(rel, f"broken anchor: {link}")

            current["page"] = "search.html?q=rotary"
            check_search(page, server.origin, out, report)
            current["page"] = "fold/unfold"
            check_folding(page, server.origin, site, out, report)
            current["page"] = "390px"
            page.set_viewport_size({"width": 390, "height": 844})
            for path in pages:
                rel = path.relative_to(site).as_posix()
                current["page"] = f"{rel} at 390px"
                page.goto(f"{server.origin}/{rel}", wait_until="load")
                page.evaluate(_WAIT_FOR_MATHJAX_JS)
                overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
                if overflow > 0:
                    report.fail(rel, f"scrolls horizontally by {overflow} px at 390 px width")
                if rel == "book/part1/sinusoidal.html":
                    page.screenshot(path=str(out / "mobile-390px-sinusoidal.png"))
            page.set_viewport_size({"width": 1280, "height": 900})
            current["page"] = "file://"
            check_file_url(page, site, out, report)
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def check_search(page, origin: str, out: Path, report: Report) -> None:
    page.goto(f"{origin}/search.html?q=rotary", wait_until="load")
    try:
        page.wait_for_selector("#search-results ul.search li a", timeout=30_000)
        # Sphinx adds the summary paragraph empty when the search starts and fills it in when every result is listed
        page.wait_for_function("() => { const p = document.querySelector('#search-results p.search-summary');"
                               " return p !== null && p.innerText.trim().length > 0; }", timeout=30_000)
    except Exception as err:  # noqa: BLE001 - reported as a failure below
        report.fail("search", f"no results for 'rotary' ({err.__class__.__name__})")
        return
    hrefs = page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(e => e.href)")
    if not any("rope_first_principles.html" in h for h in hrefs):
        report.fail("search", f"'rotary' does not list the RoPE chapter; results: {hrefs[:8]}")
    page.evaluate(_WAIT_FOR_MATHJAX_JS)
    page.wait_for_timeout(300)  # results are typeset by tools/offline_math.py's observer
    titles = page.eval_on_selector_all("#search-results ul.search li > a", "els => els.map(e => e.innerText)")
    for title in titles:
        if RAW_TEX.search(title):
            report.fail("search", f"raw TeX in a result title: {title!r}")
    page.screenshot(path=str(out / "search-rotary.png"))


def _visible(page, selector: str) -> bool:
    return page.eval_on_selector(selector, "e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length)")


def check_folding(page, origin: str, site: Path, out: Path, report: Report) -> None:
    """Click the title of a solution and of a proof: body hidden, shown, hidden again."""
    cases = [
        # name, marker of the box in the built HTML, the box once the page's scripts made it foldable, its title
        ("exercise solution", 'class="solution dropdown', "div.solution.toggle", ".admonition-title"),
        ("proof", 'class="proof admonition"', "div.proof.admonition > details.proof-fold", "summary"),
    ]
    for name, marker, box, title_selector in cases:
        page_path = next((p for p in sorted(site.glob("book/**/*.html")) if marker in p.read_text()), None)
        if page_path is None:
            report.fail("fold/unfold", f"no page has a {name}")
            continue
        rel = page_path.relative_to(site).as_posix()
        page.goto(f"{origin}/{rel}", wait_until="load")
        page.evaluate(_WAIT_FOR_MATHJAX_JS)
        if page.locator(box).count() == 0:
            report.fail(rel, f"the {name} is not foldable")
            continue
        first = page.locator(box).first
        first.scroll_into_view_if_needed()
        body = first.locator(f":scope > :not({title_selector})").first
        title = first.locator(f":scope > {title_selector}")
        hidden_before = not body.is_visible()
        title.click()
        page.wait_for_timeout(400)
        shown = body.is_visible()
        page.screenshot(path=str(out / f"{name.split()[-1]}-unfolded.png"))
        title.click()
        page.wait_for_timeout(400)
        hidden_after = not body.is_visible()
        if not (hidden_before and shown and hidden_after):
            report.fail(rel, f"{name} does not fold and unfold (hidden {hidden_before}, shown {shown}, hidden {hidden_after})")


def check_file_url(page, site: Path, out: Path, report: Report) -> None:
    """The book opened from disk renders its math with the local MathJax."""
    target = site / "book" / "part1" / "shift_theorem.html"
    page.goto(target.resolve().as_uri(), wait_until="load")  # --site may be relative (make test-site passes _build/html)
    status = page.evaluate(_WAIT_FOR_MATHJAX_JS)
    count = page.evaluate("() => document.querySelectorAll('mjx-container').length")
    if status != "ok" or count == 0:
        report.fail("file://", f"math not rendered from disk ({status}, {count} formulas)")
    page.screenshot(path=str(out / "math-shift-theorem.png"))


# ----------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "site-test")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", CHROMIUM))
    parser.add_argument("--time-limit", type=float, default=1500.0, help="seconds before the server stops itself")
    args = parser.parse_args(argv)

    if not (args.site / "index.html").is_file():
        print(f"no built site at {args.site}: run `make book` first")
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print(f"Playwright for Python is not installed.\n{INSTALL_HELP}")
        return 2
    if not (Path(args.chromium).is_file() and os.access(args.chromium, os.X_OK)):
        print(f"Chromium is not installed at {args.chromium}.\n{INSTALL_HELP}")
        return 2

    start = time.perf_counter()
    report = Report()
    repository, branch, _ = repository_settings()
    html_files = sorted(args.site.rglob("*.html"))
    problems, launch_links = launch_url_problems(html_files, ROOT, repository, branch)
    report.problems.extend(problems)
    if launch_links == 0:
        report.problems.append("no launch button found in the built site")
    run_browser_checks(args.site, args.out, args.chromium, args.time_limit, report)

    elapsed = time.perf_counter() - start
    print(f"site test: {report.pages} pages, {launch_links} launch links, {len(report.blocked)} blocked "
          f"requests to other hosts, {len(report.problems)} problems, {elapsed:.0f} s; screenshots in {args.out}")
    for problem in report.problems:
        print(f"  FAIL {problem}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
