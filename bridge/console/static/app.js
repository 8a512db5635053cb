// membridge memory console: see and fix what the bot remembers.
//
// Plain browser JavaScript with no build step. Every piece of memory is put on the page with
// textContent (never as HTML), because memory holds whatever people wrote in chats; the one
// exception is a knowledge page, whose HTML the server renders from markdown with every raw tag
// escaped and unsafe links left as text (bridge/console/markdown.py). The token is kept in
// sessionStorage (this tab only) and sent in the Authorization header, never in a URL.
"use strict";

(() => {
  const TOKEN_KEY = "membridge.console.token";
  const PALETTE = ["#2f6fdf", "#e0662f", "#2f9e6b", "#a447c2", "#c9a227", "#d6456f", "#3aa3b8", "#6b7a8f"];
  const state = {
    admin: false, view: null, scope: null, pane: "memory", page: null, pages: new Map(), graph: null,
    versions: { memory: null, daily: null }, // {base: the file's API path, id: the version shown}
    files: { memory: null, daily: null }, // {file, content, sha256} as last loaded: what an edit is based on
  };

  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // ------------------------------------------------------------ helpers
  function el(tag, { text, className, title, onClick } = {}, children = []) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    if (title) node.title = title;
    if (onClick) node.addEventListener("click", onClick);
    node.append(...children);
    return node;
  }

  /** A time as YYYY-MM-DD HH:MM in the browser's time zone: the same in every locale, like the dates. */
  function when(iso) {
    if (!iso) return "never";
    const date = new Date(iso);
    const pad = (number) => String(number).padStart(2, "0");
    return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} `
      + `${pad(date.getHours())}:${pad(date.getMinutes())}`;
  }

  function plural(count, one, many = `${one}s`) {
    return `${count} ${count === 1 ? one : many}`;
  }

  function score(value) {
    return value === null || value === undefined ? "—" : Number(value).toFixed(3);
  }

  function notice(message, isError = false) {
    const box = $("notice");
    box.textContent = message;
    box.classList.toggle("error", isError);
    box.hidden = !message;
  }

  /** Run a user action; show its failure on the page (a 401 has already sent the user to sign in). */
  async function run(task) {
    notice("");
    try {
      await task();
    } catch (error) {
      if (error.status !== 401) notice(error.message || String(error), true);
    }
  }

  function markActive(container, selector, predicate) {
    for (const node of container.querySelectorAll(selector)) node.classList.toggle("active", predicate(node));
  }

  // ---------------------------------------------------------------- API
  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  /** A link like /#token=... signs in once; the fragment never reaches the server, and we drop it. */
  function takeTokenFromFragment() {
    const value = new URLSearchParams(location.hash.slice(1)).get("token");
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    history.replaceState(null, "", location.pathname + location.search);
  }

  async function api(path, { method = "GET", body } = {}) {
    const headers = { Authorization: `Bearer ${token()}`, Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    const data = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
    if (response.status === 401) signOut("That token was not accepted; paste it again.");
    if (!response.ok) throw new ApiError(response.status, data.error || response.statusText);
    return data;
  }

  // ------------------------------------------------------------ sign-in
  function showLogin(message = "") {
    for (const id of ["tabs", "session"]) $(id).hidden = true;
    for (const view of document.querySelectorAll(".view")) view.hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message;
    $("token-input").value = "";
    $("token-input").focus();
  }

  function signOut(message = "") {
    sessionStorage.removeItem(TOKEN_KEY);
    if (state.graph) state.graph.destroy();
    Object.assign(state, { admin: false, view: null, scope: null, versions: { memory: null, daily: null }, graph: null });
    showLogin(message);
  }

  async function enter() {
    let who;
    try {
      who = await api("/api/whoami");
    } catch (error) {
      if (error.status !== 401) showLogin(error.message);
      return;
    }
    state.admin = who.admin;
    $("login").hidden = true;
    $("tabs").hidden = false;
    $("session").hidden = false;
    $("role").textContent = who.admin ? "admin" : "read-only";
    $("role").classList.toggle("admin", who.admin);
    await showView("scopes");
  }

  // -------------------------------------------------------------- views
  const loaders = {
    scopes: () => loadScopes(),
    search: () => fillScopeSelect(),
    knowledge: (path) => loadPages(path),
    graph: () => loadGraph(),
  };

  async function showView(name, argument) {
    state.view = name;
    for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== `view-${name}`;
    markActive($("tabs"), ".tab", (tab) => tab.dataset.view === name);
    await run(() => loaders[name](argument));
  }

  // ------------------------------------------------------------- scopes
  async function loadScopes() {
    const scopes = await api("/api/scopes");
    const list = $("scope-list");
    list.replaceChildren();
    $("scope-empty").hidden = scopes.length > 0;
    for (const item of scopes) {
      const button = el("button", { className: "scope", onClick: () => run(() => openScope(item.scope)) }, [
        el("span", { className: "scope-name", text: item.scope }),
        el("span", { className: "scope-meta scope-counts", text: scopeCounts(item) }),
        el("span", { className: "scope-meta scope-when", text: `last activity ${when(item.last_activity)}` }),
      ]);
      button.dataset.scope = item.scope;
      list.append(el("li", {}, [button]));
    }
    const current = scopes.find((item) => item.scope === state.scope) || mostRecent(scopes);
    if (current) await openScope(current.scope);
  }

  /** The scope with the newest activity: where an operator most likely wants to look first. */
  function mostRecent(scopes) {
    return scopes.reduce((best, item) => ((item.last_activity || "") > (best.last_activity || "") ? item : best),
      scopes[0]);
  }

  function scopeCounts(item) {
    return `${plural(item.memory_entries, "entry", "entries")} · ${plural(item.daily_files, "day")} · `
      + `${plural(item.dream_files, "dream")} · ${plural(item.versions, "version")}`
      + (item.failing_flush_jobs ? ` · ${plural(item.failing_flush_jobs, "flush failing", "flushes failing")}`
        + ` (${item.flush_error}; retried)` : "");
  }

  async function openScope(scope) {
    state.scope = scope;
    $("scope-title").textContent = `Scope ${scope}`;
    $("scope-tabs").hidden = false;
    markActive($("scope-list"), ".scope", (node) => node.dataset.scope === scope);
    await showPane(state.pane);
  }

  async function showPane(pane) {
    state.pane = pane;
    stopEditing();
    for (const name of ["memory", "daily", "dreams"]) $(`pane-${name}`).hidden = name !== pane;
    markActive($("scope-tabs"), ".subtab", (tab) => tab.dataset.pane === pane);
    await (pane === "memory" ? loadMemory() : loadDated(pane));
  }

  // ---------------------------------------------------------- MEMORY.md
  async function loadMemory() {
    const data = await api(`/api/scopes/${enc(state.scope)}/memory`);
    $("memory-content").textContent = data.content || "(MEMORY.md is empty)";
    loaded("memory", "MEMORY.md", data);
    showVersions("memory", `/api/scopes/${enc(state.scope)}/memory`, data.versions);
  }

  // ------------------------------------------------------------ versions
  // MEMORY.md and each daily file keep a version per change (a dream, a console edit, a revert);
  // both panes list them, show one as a diff against the one before, and let an admin revert.

  /** An element of a pane's versions block: MEMORY.md's ids are bare, the daily pane's prefixed. */
  function part(kind, name) {
    return $(kind === "memory" ? name : `${kind}-${name}`);
  }

  /** One copy of the versions block (index.html's template) in the pane's slot, its parts named. */
  function placeVersions(kind) {
    const block = $("versions-template").content.cloneNode(true);
    for (const node of block.querySelectorAll("[data-part]")) {
      node.id = kind === "memory" ? node.dataset.part : `${kind}-${node.dataset.part}`;
    }
    document.querySelector(`[data-versions="${kind}"]`).replaceChildren(block);
  }

  function fileName(kind) {
    return kind === "memory" ? "MEMORY.md" : state.files[kind].file;
  }

  function showVersions(kind, base, versions) {
    state.versions[kind] = { base, id: null };
    const rows = versions.map((version) => {
      const row = el("tr", { className: "clickable", onClick: () => run(() => openVersion(kind, version.id)) }, [
        el("td", {}, [el("button", { className: "link", text: `v${version.id}` })]),
        el("td", { text: when(version.created_at) }),
        el("td", { text: version.cause }),
        el("td", { className: "num", text: version.entries }),
      ]);
      row.dataset.version = version.id;
      return row;
    });
    part(kind, "versions").tBodies[0].replaceChildren(...rows);
    part(kind, "versions").hidden = rows.length === 0;
    part(kind, "versions-empty").hidden = rows.length > 0;
    part(kind, "version-box").hidden = true;
  }

  async function openVersion(kind, id) {
    const shown = state.versions[kind];
    const version = await api(`${shown.base}/versions/${enc(id)}`);
    shown.id = version.id;
    markActive(part(kind, "versions"), "tr", (row) => row.dataset.version === String(version.id));
    part(kind, "version-title").textContent = version.previous === null
      ? `Version ${version.id} (${version.cause}): the first recorded version, shown against an empty file`
      : `Version ${version.id} (${version.cause}): changes since version ${version.previous}`;
    renderDiff(part(kind, "version-diff"), version.diff || "(no change from the version before)\n");
    part(kind, "revert-box").hidden = !state.admin;
    part(kind, "read-only-note").hidden = state.admin;
    confirmRevert(kind, false);
    part(kind, "version-box").hidden = false;
  }

  function renderDiff(pre, text) {
    const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n");
    pre.replaceChildren(...lines.map((line) => el("span", { className: `line ${diffClass(line)}`, text: line })));
  }

  function diffClass(line) {
    if (line.startsWith("+++") || line.startsWith("---")) return "meta";
    if (line.startsWith("@@")) return "hunk";
    if (line.startsWith("+")) return "add";
    if (line.startsWith("-")) return "del";
    return "same";
  }

  function confirmRevert(kind, asking) {
    part(kind, "revert-start").hidden = asking;
    part(kind, "revert-confirm").hidden = !asking;
  }

  async function revert(kind) {
    const { scope } = state;
    const { base, id } = state.versions[kind];
    const file = fileName(kind);
    part(kind, "revert-yes").disabled = true;
    try {
      const result = await api(`${base}/revert`, { method: "POST", body: { version: id } });
      await (kind === "memory" ? loadMemory() : openDated(kind, file.slice("memory/".length, -".md".length)));
      await openVersion(kind, result.version);
      await refreshScopeList();
      notice(result.changed
        ? `${file} of ${scope} now has the exact content of version ${id} (saved as version ${result.version}).`
        : `${file} of ${scope} already has the exact content of version ${id}: nothing changed, no version saved.`);
    } finally {
      part(kind, "revert-yes").disabled = false;
    }
  }

  /** A revert changes the sidebar's counts; redraw them without reloading the open pane. */
  async function refreshScopeList() {
    for (const item of await api("/api/scopes")) {
      const button = $("scope-list").querySelector(`[data-scope="${CSS.escape(item.scope)}"]`);
      if (!button) continue;
      button.querySelector(".scope-counts").textContent = scopeCounts(item);
      button.querySelector(".scope-when").textContent = `last activity ${when(item.last_activity)}`;
    }
  }

  // ----------------------------------------------------- daily / dreams
  async function loadDated(kind) {
    const files = await api(`/api/scopes/${enc(state.scope)}/${kind}`);
    const empty = kind === "daily" ? "No daily memory yet." : "No dream diaries yet.";
    $(`${kind}-title`).textContent = files.length ? "Choose a date" : empty;
    $(`${kind}-content`).textContent = "";
    if (kind === "daily") {
      loaded("daily", null, null);
      showVersions("daily", null, []);
      $("daily-versions-empty").hidden = true;
    }
    $(`${kind}-list`).replaceChildren(...files.map((file) => {
      const button = el("button", {
        className: "date", text: file.date, title: plural(file.size, "byte"),
        onClick: () => run(() => openDated(kind, file.date)),
      });
      button.dataset.date = file.date;
      return el("li", {}, [button]);
    }));
    if (files.length) await openDated(kind, files[0].date);
  }

  async function openDated(kind, date) {
    const data = await api(`/api/scopes/${enc(state.scope)}/${kind}/${enc(date)}`);
    $(`${kind}-title`).textContent = `${kind === "daily" ? "Daily memory" : "Dream diary"} of ${data.date}`;
    $(`${kind}-content`).textContent = data.content;
    markActive($(`${kind}-list`), ".date", (node) => node.dataset.date === data.date);
    if (kind !== "daily") return;
    loaded("daily", `memory/${data.date}.md`, data);
    showVersions("daily", `/api/scopes/${enc(state.scope)}/daily/${enc(data.date)}`, data.versions);
  }

  // -------------------------------------------------------- line editor
  // An admin edits MEMORY.md entries and daily lines one at a time: each change is first shown as
  // the diff the server computes (a preview writes nothing), then saved over the exact bytes that
  // were shown; if someone else changed the file meanwhile the server refuses (409) and says so.

  /** Remember what a pane shows (the base of an edit) and offer editing to an admin. */
  function loaded(kind, file, data) {
    state.files[kind] = data ? { file, content: data.content, sha256: data.sha256 } : null;
    $(`${kind}-edit-start`).hidden = !(state.admin && data);
    stopEditing(kind);
  }

  function stopEditing(kind) {
    for (const name of kind ? [kind] : ["memory", "daily"]) {
      $(`${name}-editor`).hidden = true;
      $(`${name}-editor`).replaceChildren();
      $(`${name}-content`).hidden = false;
      $(`${name}-edit-start`).hidden = !(state.admin && state.files[name]);
    }
  }

  function startEditing(kind) {
    const { file, content } = state.files[kind];
    const lines = content === "" ? [] : content.replace(/\n$/, "").split("\n");
    const change = el("div", { className: "change" });
    change.hidden = true;
    const input = el("input");
    Object.assign(input, { type: "text", placeholder: kind === "memory" ? "a new entry" : "a new line" });
    const add = el("form", { className: "add-line" }, [input, el("button", { text: "Add…" })]);
    add.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = /^(- |#)/.test(input.value.trim()) ? input.value.trim() : `- ${input.value.trim()}`;
      if (input.value.trim()) run(() => propose(kind, change, { op: "add", line: null, text }));
    });
    const list = el("ol", { className: "lines" },
      lines.map((line, index) => lineItem(kind, change, line, index + 1)));
    const done = el("button", { className: "quiet", text: "Done", onClick: () => stopEditing(kind) });
    $(`${kind}-content`).hidden = true;
    $(`${kind}-edit-start`).hidden = true;
    $(`${kind}-editor`).replaceChildren(el("p", { className: "muted", text: `Editing ${file}: each change is `
      + "shown as a diff before it is saved." }), list, add, change, el("div", { className: "buttons" }, [done]));
    $(`${kind}-editor`).hidden = false;
  }

  function lineItem(kind, change, text, number) {
    const item = el("li");
    item.dataset.line = number;
    const show = () => item.replaceChildren(el("div", { className: "line-row" }, [
      el("span", { className: "line-text", text }),
      el("button", { className: "quiet", text: "Edit", onClick: edit }),
      el("button", { className: "quiet", text: "Delete…",
        onClick: () => run(() => propose(kind, change, { op: "delete", line: number })) }),
    ]));
    const edit = () => {
      const input = el("input");
      Object.assign(input, { type: "text", value: text });
      item.replaceChildren(el("div", { className: "line-row" }, [
        input,
        el("button", { text: "Preview", onClick: () => run(() => propose(kind, change, {
          op: "edit", line: number, text: input.value })) }),
        el("button", { className: "quiet", text: "Cancel", onClick: show }),
      ]));
      input.focus();
    };
    show();
    return item;
  }

  async function propose(kind, change, edit) {
    const { file, sha256 } = state.files[kind];
    const body = { ...edit, file, base: sha256 };
    const preview = await api(`/api/scopes/${enc(state.scope)}/lines`, { method: "POST", body: { ...body, preview: true } });
    const diff = el("pre", { className: "diff" });
    renderDiff(diff, preview.diff || "(no change)\n");
    const save = el("button", { className: "danger", text: "Save this change", onClick: () => run(async () => {
      save.disabled = true;
      const result = await api(`/api/scopes/${enc(state.scope)}/lines`, { method: "POST", body });
      await (kind === "memory" ? loadMemory() : openDated("daily", file.slice("memory/".length, -".md".length)));
      await refreshScopeList();
      startEditing(kind);
      notice(`Saved: ${file} is now version ${result.version}.`);
    }) });
    change.replaceChildren(el("h3", { text: "Change to save" }), diff, el("div", { className: "buttons" }, [
      save, el("button", { className: "quiet", text: "Cancel", onClick: () => { change.hidden = true; } }),
    ]));
    change.hidden = false;
    save.focus();
  }

  // ------------------------------------------------------------- search
  async function fillScopeSelect() {
    const scopes = await api("/api/scopes");
    const select = $("search-scope");
    const chosen = select.value || state.scope;
    select.replaceChildren(...scopes.map((item) => {
      const option = el("option", { text: item.scope });
      option.value = item.scope;
      return option;
    }));
    if (scopes.some((item) => item.scope === chosen)) select.value = chosen;
    $("search-q").focus();
  }

  async function search() {
    const query = $("search-q").value.trim();
    const scope = $("search-scope").value;
    const weak = $("search-weak").checked;
    const params = new URLSearchParams({ q: query, scope, limit: $("search-limit").value || "20", weak: weak ? "1" : "0" });
    const data = await api(`/api/search?${params}`);
    const rows = data.results.map((result, index) => el("tr", {}, [
      el("td", { className: "num", text: index + 1 }),
      el("td", { className: "num strong", text: score(result.score) }),
      el("td", { className: "num", text: score(result.vector_score), title: "cosine similarity (— : not scored)" }),
      el("td", { className: "num", text: score(result.keyword_score), title: "keyword (BM25) score, normalised" }),
      el("td", { className: "num", text: score(result.coverage), title: "share of the question's words this note holds, rare words counting more" }),
      el("td", { className: "num", text: score(result.relevance), title: "relevance: vector × weight + keyword × weight + words × weight" }),
      el("td", { className: "num", text: score(result.recency), title: "recency of dated daily files (at most a bounded share off)" }),
      el("td", { className: "num", text: score(result.time_boost), title: "time-window boost (the question named a time this note is from)" }),
      el("td", { className: "num", text: score(result.update_boost), title: "update boost (a question about now: this newer note replaces an older one about the same thing)" }),
      el("td", { text: result.source }),
      el("td", { className: "where", text: `${result.path}:${result.start_line}-${result.end_line}` }),
      el("td", {}, [el("div", { className: "snippet", text: result.text })]),
    ]));
    $("search-results").tBodies[0].replaceChildren(...rows);
    $("search-results").hidden = rows.length === 0;
    const hidden = weak ? "" : " Weak matches are hidden, as in the CLI.";
    $("search-status").textContent = (rows.length
      ? `${plural(rows.length, "result")} for “${data.query}” in ${data.scope} and the shared knowledge.`
      : `Nothing matches “${data.query}” in ${data.scope} or the shared knowledge.`) + hidden;
  }

  // ---------------------------------------------------------- knowledge
  async function loadPages(path) {
    const pages = await api("/api/knowledge");
    state.pages = new Map(pages.map((page) => [page.path, page]));
    $("pages-empty").hidden = pages.length > 0;
    const byCategory = new Map();
    for (const page of pages) {
      if (!byCategory.has(page.category)) byCategory.set(page.category, []);
      byCategory.get(page.category).push(page);
    }
    $("page-list").replaceChildren(...[...byCategory].map(([category, group]) => el("div", { className: "category" }, [
      el("h3", { text: category }),
      el("ul", { className: "page-list" }, group.map((page) => {
        const button = el("button", { className: "page", text: page.title, title: page.path,
          onClick: () => run(() => openPage(page.path)) });
        button.dataset.path = page.path;
        return el("li", {}, [button]);
      })),
    ])));
    const target = path || (state.pages.has(state.page) ? state.page : pages[0]?.path);
    if (target) await openPage(target);
  }

  async function openPage(path) {
    const data = await api(`/api/knowledge/page?${new URLSearchParams({ path })}`);
    state.page = path;
    $("page-title").textContent = state.pages.get(path)?.title || path;
    $("page-path").textContent = data.path;
    $("page-content").innerHTML = data.html; // inert by construction: see the note at the top of this file
    $("page-source").textContent = data.content;
    markActive($("page-list"), ".page", (node) => node.dataset.path === path);
  }

  // -------------------------------------------------------------- graph
  // Labels stay smaller than their node is wide apart and are cut at 110 px; the zoom is capped so a
  // graph of two pages is not blown up until its labels dwarf everything, and tiny labels are hidden.
  const GRAPH_STYLE = [
    {
      selector: "node",
      style: {
        "background-color": "data(colour)", label: "data(label)", color: "#1f2933", "font-size": 11,
        "text-valign": "bottom", "text-margin-y": 4, width: 30, height: 30, "min-zoomed-font-size": 7,
        "text-wrap": "ellipsis", "text-max-width": 110, "text-background-color": "#fbfcfd",
        "text-background-opacity": 0.85, "text-background-padding": 1,
      },
    },
    { selector: "edge", style: { width: 1.5, "line-color": "#a9b4c2", "curve-style": "straight" } },
    { selector: "node:selected", style: { "border-width": 3, "border-color": "#1f2933" } },
  ];

  async function loadGraph() {
    const graph = await api("/api/knowledge/graph");
    if (state.graph) state.graph.destroy();
    state.graph = null;
    if (typeof window.cytoscape !== "function") {
      throw new Error("the graph library (static/vendor/cytoscape.min.js) did not load");
    }
    const categories = [...new Set(graph.nodes.map((node) => node.category))].sort();
    const colour = (category) => PALETTE[categories.indexOf(category) % PALETTE.length];
    $("graph-status").textContent = graph.nodes.length
      ? `${plural(graph.nodes.length, "page")}, ${plural(graph.edges.length, "link")}. Click a page to read it; drag to move.`
      : "No knowledge pages yet.";
    state.graph = window.cytoscape({
      container: $("graph"),
      elements: [
        ...graph.nodes.map((node) => ({ data: { id: node.id, label: node.title, colour: colour(node.category) } })),
        ...graph.edges.map((edge) => ({ data: { id: `${edge.source} ${edge.target}`, source: edge.source, target: edge.target } })),
      ],
      style: GRAPH_STYLE,
      minZoom: 0.3,
      maxZoom: 1.6,
      layout: { name: graph.nodes.length > 1 ? "cose" : "grid", animate: false, padding: 40 },
    });
    state.graph.on("tap", "node", (event) => showView("knowledge", event.target.id()));
    window.consoleGraph = state.graph; // for a look from the browser's devtools (and the browser test)
    $("graph-legend").replaceChildren(...categories.map((category) => {
      const swatch = el("span", { className: "swatch" });
      swatch.style.backgroundColor = colour(category);
      return el("li", {}, [swatch, el("span", { text: category })]);
    }));
  }

  // --------------------------------------------------------------- wiring
  function wire() {
    $("login-form").addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
      run(enter);
    });
    $("logout").addEventListener("click", () => signOut());
    for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showView(tab.dataset.view));
    for (const tab of document.querySelectorAll(".subtab")) {
      tab.addEventListener("click", () => run(() => showPane(tab.dataset.pane)));
    }
    for (const kind of ["memory", "daily"]) {
      placeVersions(kind);
      part(kind, "revert-start").addEventListener("click", () => confirmRevert(kind, true));
      part(kind, "revert-no").addEventListener("click", () => confirmRevert(kind, false));
      part(kind, "revert-yes").addEventListener("click", () => run(() => revert(kind)));
      $(`${kind}-edit-start`).addEventListener("click", () => startEditing(kind));
    }
    $("page-content").addEventListener("click", (event) => {
      const link = event.target.closest("a[data-page]");
      if (!link) return;
      event.preventDefault();
      run(() => openPage(link.dataset.page));
    });
    $("search-form").addEventListener("submit", (event) => {
      event.preventDefault();
      run(search);
    });
  }

  function start() {
    wire();
    takeTokenFromFragment();
    if (token()) run(enter);
    else showLogin();
  }

  start();
})();
