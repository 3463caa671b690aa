/* Search excerpts without raw TeX or button labels (tools/book_site.py adds this file to every page).
 *
 * Sphinx's search page builds each result's excerpt from the text of the page's main element
 * (Search.htmlToText). On our pages that text holds the TeX source of every formula (MathJax typesets it only in
 * the browser, and an excerpt cut in the middle of a formula stays raw) and the labels of the launch, download and
 * repository buttons. This wrapper removes the page furniture and writes every formula as plain text first:
 * \mathrm{PE}(p) becomes PE(p), \omega_i becomes ω_i.
 */
(function () {
  "use strict";
  var FURNITURE = [".bd-header-article", ".header-article-items", ".dropdown-launch-buttons", ".article-header-buttons",
                   ".prev-next-area", ".bd-sidebar-secondary", ".bd-footer-article", ".copybtn", ".toggle-button",
                   "button", "nav", ".headerlink", "script", "style", "mjx-assistive-mml"];
  var SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", zeta: "ζ", eta: "η", theta: "θ",
    iota: "ι", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν", xi: "ξ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ",
    phi: "φ", varphi: "φ", chi: "χ", psi: "ψ", omega: "ω", Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ",
    Pi: "Π", Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω", sum: "Σ", prod: "Π", cdot: "·", times: "×", le: "≤",
    leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠", approx: "≈", in: "∈", to: "→", mapsto: "↦", infty: "∞",
    top: "ᵀ", ldots: "…", cdots: "…", dots: "…", langle: "⟨", rangle: "⟩", sqrt: "√", pm: "±", partial: "∂",
    nabla: "∇", mid: "|", lVert: "‖", rVert: "‖", Vert: "‖", odot: "⊙", otimes: "⊗", circ: "∘", ell: "ℓ",
    log: "log", exp: "exp", sin: "sin", cos: "cos", max: "max", min: "min", arg: "arg", lim: "lim",
    quad: " ", qquad: " "
  };

  function texToText(tex) {
    return tex
      .replace(/^\s*\\[(\[]|\\[)\]]\s*$/g, "")
      .replace(/\\[()[\]]/g, "")
      .replace(/\\(?:begin|end)\{[^{}]*\}/g, " ")
      .replace(/\\(?:text|textrm|mathrm|mathbf|mathit|mathcal|mathbb|operatorname|boldsymbol|bm)\s*\{([^{}]*)\}/g, "$1")
      .replace(/\\([_{}%#&$])/g, "$1")  // escaped characters: head\_dim is head_dim
      .replace(/\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big|displaystyle|tag\{[^}]*\}|label\{[^}]*\}|nonumber)/g, "")
      .replace(/\\([A-Za-z]+)/g, function (match, name) { return SYMBOLS.hasOwnProperty(name) ? SYMBOLS[name] : ""; })
      .replace(/\\[,;:!> ]/g, " ")
      .replace(/\\\\|&/g, " ")
      .replace(/[{}]/g, "")
      .replace(/\s+/g, " ")
      .trim();
  }

  function install() {
    if (typeof Search === "undefined" || !Search.htmlToText) { return false; }
    if (Search.htmlToText.peWrapped) { return true; }
    var original = Search.htmlToText;
    var wrapped = function (htmlString, anchor) {
      var doc = new DOMParser().parseFromString(htmlString, "text/html");
      FURNITURE.forEach(function (selector) {
        doc.querySelectorAll(selector).forEach(function (element) { element.remove(); });
      });
      doc.querySelectorAll(".math").forEach(function (element) {
        var text = texToText(element.textContent);
        element.replaceWith(doc.createTextNode(element.tagName === "DIV" ? " " + text + " " : text));
      });
      // An anchor that is an empty marker (a second label of a callout: <span id="erratum-e001-10"></span>) has no
      // text; Sphinx then shows no excerpt and throws. Use the element that holds the marker.
      var target = anchor ? doc.querySelector('[role="main"] ' + anchor) : null;
      if (target && !target.textContent.trim() && target.parentElement) {
        target.parentElement.setAttribute("data-pe-anchor", "");
        anchor = "[data-pe-anchor]";
      }
      return original("<!DOCTYPE html>" + doc.documentElement.outerHTML, anchor);
    };
    wrapped.peWrapped = true;
    Search.htmlToText = wrapped;
    return true;
  }

  window.peTexToText = texToText;
  if (!install()) { document.addEventListener("DOMContentLoaded", install); }
})();
