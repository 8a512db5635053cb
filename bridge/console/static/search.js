// The view "search" (#/scope/<s>/search?q=…&limit=…&weak=1): results as cards, the text first.
// Each card marks the lines that matched (the result's `matches` when the server sends them, else
// the lines holding the question's words, else a one-entry passage whole), links to its file at
// those lines, and folds open "Why this result": the parts of its score with the configured
// weights, leaving out the factors that did nothing.
"use strict";

(() => {
  const mb = window.membridge;
  const { $, el, api, address } = mb;
  const DEFAULT_LIMIT = "20";
  const FOLDED_LINES = 8; // a longer passage shows this many lines around its match, and "show all"
  const STOP_WORDS = new Set(["the", "and", "for", "was", "are", "you", "what", "when", "where", "who", "how",
    "with", "that", "this", "did", "does", "have", "has", "from", "about", "my", "our"]);
  const ENTRY_RE = /^\s*(?:[-*+]|\d+[.)])\s+\S/;

  async function renderSearch(route) {
    const scope = route.parts[1];
    const query = route.params.get("q") || "";
    const limit = route.params.get("limit") || DEFAULT_LIMIT;
    const weak = route.params.get("weak") === "1";
    await fillScopes(scope);
    Object.assign($("search-q"), { value: query });
    $("search-limit").value = limit;
    $("search-weak").checked = weak;
    if (!query) {
      $("search-results").replaceChildren();
      $("search-q").focus();
      return;
    }
    const params = new URLSearchParams({ q: query, scope, limit, weak: weak ? "1" : "0" });
    const data = await api(`/api/search?${params}`);
    const cards = data.results.map((result, index) => card(result, index + 1, data));
    $("search-results").replaceChildren(...cards);
    const hidden = weak ? "" : " Weak matches are hidden, as in the CLI: tick “show weak matches” to see them.";
    $("search-status").textContent = (cards.length
      ? `${mb.plural(cards.length, "result")} for “${data.query}” in ${data.scope} and the shared knowledge.`
      : `Nothing matches “${data.query}” in ${data.scope} or the shared knowledge.`) + hidden;
  }

  async function fillScopes(scope) {
    const scopes = await api("/api/scopes");
    $("search-scope").replaceChildren(...scopes.map((item) => {
      const option = el("option", { text: item.scope });
      option.value = item.scope;
      return option;
    }));
    $("search-scope").value = scope;
  }

  // -------------------------------------------------------------- a card
  function card(result, rank, data) {
    const weak = result.weak ?? result.relevance < data.weights.min_score;
    const lines = result.text.endsWith("\n") ? result.text.slice(0, -1).split("\n") : result.text.split("\n");
    const hits = hitLines(result, lines, data.query);
    const item = el("li", { className: `result${weak ? " weak" : ""}` }, [
      passage(lines, result.start_line, hits),
      el("div", { className: "result-meta" }, [
        el("span", { className: "rank", text: `#${rank}` }),
        el("a", { className: "where", text: where(result), href: mb.fileAddress(result.scope, result.path,
          result.start_line, result.end_line), title: `${result.path}:${result.start_line}-${result.end_line}` }),
        ...(weak ? [el("span", { className: "badge weak", text: "weak match" })] : []),
        el("span", { className: "score", text: `score ${result.score.toFixed(3)}` }),
      ]),
      why(result, data.weights),
    ]);
    item.dataset.path = result.path;
    return item;
  }

  /** "MEMORY.md, lines 2-3", "Daily memory of 2026-01-31, line 4", "Knowledge tech/deploy, lines 1-5". */
  function where(result) {
    const lines = result.start_line === result.end_line ? `line ${result.start_line}`
      : `lines ${result.start_line}–${result.end_line}`;
    const date = result.date || /^memory\/(\d{4}-\d{2}-\d{2})\.md$/.exec(result.path)?.[1];
    if (date) return `Daily memory of ${date}, ${lines}`;
    if (result.path.startsWith("knowledge/")) return `Knowledge ${result.path.slice(10, -3)}, ${lines}`;
    return `${result.path}, ${lines}`;
  }

  /** The file's line numbers to mark, best first. */
  function hitLines(result, lines, query) {
    const first = result.start_line;
    if (Array.isArray(result.matches) && result.matches.length) {
      return result.matches.flatMap((match) => range(match.start_line, match.end_line));
    }
    const words = queryWords(query);
    const holding = lines.map((line, index) => [line.toLowerCase(), first + index])
      .filter(([line]) => words.some((word) => line.includes(word))).map(([, number]) => number);
    if (holding.length) return holding;
    return lines.filter((line) => ENTRY_RE.test(line)).length <= 1 ? range(first, first + lines.length - 1) : [];
  }

  function range(first, last) {
    return Array.from({ length: last - first + 1 }, (_, index) => first + index);
  }

  /** The question's words worth marking: 3+ letters, not a stop word; a CJK run also as its pairs. */
  function queryWords(query) {
    const words = [];
    for (const word of query.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
      if (/\p{Script=Han}/u.test(word)) {
        words.push(word);
        for (let index = 0; index + 2 <= word.length; index += 1) words.push(word.slice(index, index + 2));
      } else if (word.length >= 3 && !STOP_WORDS.has(word)) {
        words.push(word);
      }
    }
    return words;
  }

  /** The passage's lines, the hits marked; a long one folded to the lines around its best hit. */
  function passage(lines, first, hits) {
    const marked = new Set(hits);
    const box = el("div", { className: "passage" });
    const around = hits.length ? hits[0] - first : 0;
    const from = Math.max(0, Math.min(around - 2, lines.length - FOLDED_LINES));
    lines.forEach((line, index) => {
      const number = first + index;
      const node = el(marked.has(number) ? "mark" : "span", { className: "ln", text: line });
      node.dataset.line = number;
      if (index < from || index >= from + FOLDED_LINES) node.classList.add("folded");
      box.append(node);
    });
    if (lines.length > FOLDED_LINES) {
      const toggle = el("button", { className: "link more", text: `Show all ${lines.length} lines` });
      toggle.addEventListener("click", () => {
        const open = box.classList.toggle("open");
        toggle.textContent = open ? "Show fewer lines" : `Show all ${lines.length} lines`;
      });
      box.append(toggle);
    }
    return box;
  }

  // ------------------------------------------------------ why this result
  const fixed = (value) => Number(value).toFixed(3);

  function why(result, weights) {
    const hybrid = weights.hybrid && result.vector_score !== null;
    const rows = [];
    const part = (label, value, weight, note) => {
      if (value === null || value === undefined || Number(value) === 0) return;
      rows.push([label, weight === null ? fixed(value) : `${fixed(value)} × ${weight}`, note]);
    };
    if (hybrid) {
      part("Meaning", result.vector_score, weights.vector, "how close the note's meaning is to the question (0–1)");
      part("Keywords", result.keyword_score, weights.keyword, "the question's words in the note (BM25, 0–1)");
      part("Words held", result.coverage, weights.coverage, "share of the question's words the note holds, rare ones counting more");
    } else {
      part("Keywords", result.keyword_score, null, "the question's words in the note; no embeddings, so this alone");
    }
    rows.push(["= relevance", fixed(result.relevance), ""]);
    const factor = (label, value, note) => {
      if (Math.abs(Number(value) - 1) >= 0.0005) rows.push([label, `× ${fixed(value)}`, note]);
    };
    factor("Age", result.recency, `a dated note's age takes at most ${Math.round(weights.recency * 100)}% off`);
    factor("Named time", result.time_boost, "the question names a time this note is from");
    factor("Newer fact", result.update_boost, "a newer note about the same thing as an older one");
    rows.push(["= score", fixed(result.score), ""]);
    return el("details", { className: "why" }, [
      el("summary", { text: "Why this result" }),
      el("table", {}, [el("tbody", {}, rows.map(([label, value, note]) => el("tr", {}, [
        el("th", { text: label }), el("td", { className: "num", text: value }), el("td", { className: "muted", text: note }),
      ])))]),
    ]);
  }

  function wire() {
    $("search-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const params = { q: $("search-q").value.trim() };
      if ($("search-limit").value && $("search-limit").value !== DEFAULT_LIMIT) params.limit = $("search-limit").value;
      if ($("search-weak").checked) params.weak = "1";
      const target = address(["scope", $("search-scope").value, "search"], params);
      if (location.hash === target) mb.rerender();
      else location.hash = target;
    });
  }

  wire();
  window.consoleViews.search = renderSearch;
})();
