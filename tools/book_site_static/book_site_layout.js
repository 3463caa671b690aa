/* Nothing cut off at the column's edge (tools/book_site.py adds this file to every page).
 *
 * A code block, an output, a display equation or a table wider than the text column scrolls inside itself. This
 * script marks each such box .pe-scroll (a visible scrollbar, book_site.css) and keeps .pe-more-left and
 * .pe-more-right current, which draw a shadow on the side where more content is. A display equation at most 25 %
 * too wide is scaled down to fit instead; an inline formula wider than its line scrolls like a block
 * (.pe-wide-inline). A wide table gets a one-line note above it. Everything is re-measured when a box changes
 * size (a fold opened, the window resized, a web font loaded).
 *
 * For print (make pdf, or the browser's own print), peFitForPrint() scales wide tables, equations and inline
 * formulas to the column instead, since paper does not scroll.
 *
 * When the first pass after MathJax is done, <html> gets data-pe-layout="ready" (tools/site_test.py waits for it).
 */
(function () {
  "use strict";
  var BOXES = [
    ".bd-article div.highlight > pre", ".bd-article div.cell_output pre", ".bd-article div.output pre",
    ".bd-article div.math", ".bd-article .pst-scrollable-table-container", ".bd-article div.output.text_html"
  ].join(", ");
  var FIT_MATH = 0.8;  // smallest scale at which a display equation is shrunk instead of scrolled
  var TABLE_NOTE = "This table is wider than the column: scroll it sideways to see every column.";
  var observer = window.ResizeObserver ? new ResizeObserver(function (entries) {
    entries.forEach(function (entry) { update(entry.target); });
  }) : null;
  var watched = new WeakSet();

  function blockWidth(element) {
    var parent = element.parentElement;
    while (parent && getComputedStyle(parent).display.indexOf("inline") === 0) { parent = parent.parentElement; }
    if (!parent) { return Infinity; }
    var style = getComputedStyle(parent);
    return parent.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  }

  function fitMath(box) {
    var math = box.querySelector(":scope > mjx-container");
    if (!math || box.dataset.peFitting) { return; }
    box.dataset.peFitting = "1";
    math.style.fontSize = "";
    var ratio = box.clientWidth / box.scrollWidth;
    if (ratio < 1 && ratio >= FIT_MATH) {
      math.style.fontSize = (Math.floor(ratio * 1000) / 10 - 0.5) + "%";
    }
    delete box.dataset.peFitting;
  }

  function note(box, more) {
    var previous = box.previousElementSibling;
    var has = previous !== null && previous.classList.contains("pe-scroll-note");
    if (more && !has) {
      var p = document.createElement("p");
      p.className = "pe-scroll-note";
      p.textContent = window.BOOK_SITE_TABLE_NOTE || TABLE_NOTE;  // a translated edition sets its own
      box.parentNode.insertBefore(p, box);
    } else if (!more && has) {
      previous.remove();
    }
  }

  function shadows(box) {
    var more = box.classList.contains("pe-scroll");
    box.classList.toggle("pe-more-left", more && box.scrollLeft > 1);
    box.classList.toggle("pe-more-right", more && box.scrollLeft + box.clientWidth < box.scrollWidth - 1);
  }

  function update(box) {
    if (box.matches("div.math")) { fitMath(box); }
    var more = box.scrollWidth - box.clientWidth > 1;
    box.classList.toggle("pe-scroll", more);
    shadows(box);
    if (box.classList.contains("pst-scrollable-table-container")) { note(box, more); }
  }

  function watch(box) {
    update(box);
    if (watched.has(box)) { return; }
    watched.add(box);
    box.addEventListener("scroll", function () { shadows(box); }, {passive: true});
    if (observer) { observer.observe(box); }
  }

  function markWideInline() {
    document.querySelectorAll(".bd-article mjx-container:not([display='true'])").forEach(function (math) {
      if (math.closest("div.math")) { return; }
      math.classList.remove("pe-wide-inline");
      if (math.getBoundingClientRect().width > blockWidth(math) + 1) {
        math.classList.add("pe-wide-inline");
        watch(math);
      }
    });
  }

  function layout() {
    document.querySelectorAll(BOXES).forEach(watch);
    markWideInline();
  }

  window.peLayout = layout;

  // Scale a box's content down until it fits the box. Text does not scale exactly (glyphs are hinted at each size:
  // a table zoomed to 0.374 came out 7 px too wide), so the zoom is measured again and tightened.
  function zoomToFit(box) {
    box.style.zoom = "";
    if (box.scrollWidth <= box.clientWidth + 1) { return false; }
    var zoom = 1;
    for (var i = 0; i < 6 && box.scrollWidth > box.clientWidth + 1; i++) {
      zoom = Math.floor(zoom * box.clientWidth / box.scrollWidth * 1000) / 1000 - (i ? 0.002 : 0);
      box.style.zoom = String(zoom);
    }
    return true;
  }

  // Printed text output (a table printed by the code, a long line) keeps its lines when it is at most
  // PRINT_PRE_MIN too wide: scaled down, its columns stay aligned. Wider output wraps (book_site.css, @media print).
  var PRINT_PRE_MIN = 0.62;

  function fitPreForPrint(pre) {
    pre.style.zoom = "";
    pre.style.whiteSpace = "pre";
    var ratio = pre.clientWidth / pre.scrollWidth;
    if (ratio >= 1) { pre.style.whiteSpace = ""; return false; }
    if (ratio < PRINT_PRE_MIN) { pre.style.whiteSpace = ""; return false; }
    pre.style.overflowX = "hidden";  // measured with its own width: a zoomed pre keeps the column's width
    if (zoomToFit(pre) && pre.scrollWidth <= pre.clientWidth + 1) { return true; }
    pre.style.zoom = pre.style.whiteSpace = pre.style.overflowX = "";  // did not fit after all: wrap
    return false;
  }

  window.peFitForPrint = function () {
    var scaled = 0;
    document.querySelectorAll(".bd-article div.cell_output pre, .bd-article div.output pre").forEach(function (pre) {
      if (fitPreForPrint(pre)) { scaled += 1; }
    });
    document.querySelectorAll(".bd-article .pst-scrollable-table-container, .bd-article div.math, " +
                              ".bd-article div.output.text_html, .bd-article mjx-container.pe-wide-inline")
      .forEach(function (box) {
        if (zoomToFit(box)) { scaled += 1; }
      });
    return scaled;
  };
  window.addEventListener("beforeprint", function () { window.peFitForPrint(); });

  function whenMathJaxDone(callback) {
    var tries = 0;
    (function poll() {
      if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
        MathJax.startup.promise.then(callback, callback);
      } else if (!window.MathJax && tries > 40) {
        callback();  // a page without MathJax
      } else {
        tries += 1;
        window.setTimeout(poll, 25);
      }
    })();
  }

  // The language switch opens the same page of the other edition. After `make book` alone that edition is not
  // built and the link was a 404: check first (served pages only; a page opened from disk cannot ask) and say what
  // to run instead of leaving.
  var SWITCH_MISSING = {
    en: "The Chinese edition is not built here. Run `make book-zh`, then `make serve`, to read both editions.",
    zh: "此处尚未构建英文版。请先运行 `make book`，再运行 `make serve`。"
  };

  function switchMissing(link) {
    var note = document.getElementById("pe-switch-missing") || document.createElement("p");
    note.id = "pe-switch-missing";
    note.setAttribute("role", "status");
    note.textContent = SWITCH_MISSING[(document.documentElement.lang || "en").slice(0, 2)] || SWITCH_MISSING.en;
    note.style.cssText = "position: fixed; top: 0.5rem; right: 0.5rem; z-index: 2000; max-width: 24rem; margin: 0; " +
      "padding: 0.6rem 0.8rem; border-radius: 0.3rem; background: var(--pst-color-surface, #f3f4f5); " +
      "color: var(--pst-color-text-base, #222); box-shadow: 0 2px 8px rgba(0, 0, 0, 0.3); font-size: 0.9rem;";
    document.body.appendChild(note);
    window.setTimeout(function () { note.remove(); }, 9000);
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a.edition-switch") : null;
    if (!link || !/^https?:$/.test(window.location.protocol) || !window.fetch) { return; }
    event.preventDefault();
    fetch(link.href, {method: "HEAD"}).then(function (response) {
      if (response.ok) { window.location.href = link.href; } else { switchMissing(link); }
    }, function () { window.location.href = link.href; });
  });

  // Every figure of a chapter opens at full size when tapped or clicked (its labels are tiny on a phone).
  function linkFigures() {
    document.querySelectorAll(".bd-article figure img, .bd-article div.cell_output img").forEach(function (img) {
      if (img.closest("a") || !img.getAttribute("src") || /^data:/.test(img.getAttribute("src"))) { return; }
      var link = document.createElement("a");
      link.className = "pe-figure-link";
      link.href = img.getAttribute("src");
      img.parentNode.insertBefore(link, img);
      link.appendChild(img);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    linkFigures();
    layout();
    whenMathJaxDone(function () {
      var fonts = document.fonts ? document.fonts.ready : Promise.resolve();
      fonts.then(function () {
        layout();
        document.documentElement.dataset.peLayout = "ready";
      });
    });
    window.addEventListener("resize", markWideInline);
    document.addEventListener("toggle", markWideInline, true);  // a <details> opened or closed
  });
})();
