// membridge memory console: what every view shares (window.membridge) and the view registry.
//
// Plain browser JavaScript with no build step and no framework: the console is a handful of views
// over a JSON API, and the DOM does that well enough. Every piece of memory is put on the page with
// textContent (never as HTML), because memory holds whatever people wrote in chats; the one
// exception is a knowledge page, whose HTML the server renders from markdown with every raw tag
// escaped and unsafe links left as text (bridge/console/markdown.py). The token is kept in
// sessionStorage (this tab only) and sent in the Authorization header, never in a URL.
//
// Views: each script registers `window.consoleViews[name] = async (route, section) => {...}`; the
// router (app.js) shows `<section id="view-<name>">` (made if the page has none) and calls it for
// every address `#/<name>/…` (`#/scope/<s>/…` is the view "scope", `#/scope/<s>/search` "search").
"use strict";

window.consoleViews = window.consoleViews || {};

window.membridge = (() => {
  const TOKEN_KEY = "membridge.console.token";
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function el(tag, { text, className, title, href, onClick } = {}, children = []) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    if (title) node.title = title;
    if (href) node.href = href;
    if (onClick) node.addEventListener("click", onClick);
    node.append(...children);
    return node;
  }

  const pad = (number) => String(number).padStart(2, "0");

  /** The browser's own name for its time zone at that moment ("UTC", "CET", "GMT+8"). */
  function zone(date) {
    const parts = new Intl.DateTimeFormat("en-GB", { timeZoneName: "short" }).formatToParts(date);
    return parts.find((part) => part.type === "timeZoneName")?.value || "";
  }

  /** A time as "YYYY-MM-DD HH:MM <zone>" in the browser's time zone, the same in every locale. */
  function when(iso) {
    if (!iso) return "never";
    const date = new Date(iso);
    return `${day(date)} ${pad(date.getHours())}:${pad(date.getMinutes())} ${zone(date)}`.trim();
  }

  /** A date (or ISO time) as YYYY-MM-DD in the browser's time zone. */
  function day(value) {
    const date = value instanceof Date ? value : new Date(value);
    return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
  }

  function plural(count, one, many = `${one}s`) {
    return `${count} ${count === 1 ? one : many}`;
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
  const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
  const setToken = (value) => sessionStorage.setItem(TOKEN_KEY, value);
  const dropToken = () => sessionStorage.removeItem(TOKEN_KEY);

  async function api(path, { method = "GET", body } = {}) {
    const headers = { Authorization: `Bearer ${token()}`, Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    const data = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
    if (response.status === 401) window.dispatchEvent(new CustomEvent("console:unauthorized"));
    if (!response.ok) throw new ApiError(response.status, data.error || response.statusText);
    return data;
  }

  // ---------------------------------------------------------- addresses
  /** "#/scope/alice/daily/2026-01-31?lines=2-3": each part encoded, the query left out when empty. */
  function address(parts, params) {
    const query = params ? new URLSearchParams(params).toString() : "";
    return `#/${parts.map(enc).join("/")}${query ? `?${query}` : ""}`;
  }

  /** Where a search result's lines are: its file in the console, opened at those lines. */
  function fileAddress(scope, path, first, last) {
    const lines = { lines: `${first}-${last}` };
    const daily = /^memory\/(\d{4}-\d{2}-\d{2})\.md$/.exec(path);
    if (daily) return address(["scope", scope, "daily", daily[1]], lines);
    if (path.startsWith("knowledge/")) return address(path.replace(/\.md$/, "").split("/"), lines);
    return address(["scope", scope, "memory"], lines);
  }

  /** "a-b" of an address's ?lines= as [a, b], or null. */
  function lineRange(params) {
    const match = /^(\d+)-(\d+)$/.exec(params.get("lines") || "");
    return match ? [Number(match[1]), Number(match[2])] : null;
  }

  /**
   * Text as numbered lines (<span class="ln" data-line>) so an address can point at some of them:
   * the lines in `range` are marked and the first one scrolled into view.
   */
  function showLines(container, text, range = null, firstLine = 1) {
    const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n");
    container.replaceChildren(...lines.map((line, index) => {
      const number = firstLine + index;
      const span = el("span", { className: "ln", text: line });
      span.dataset.line = number;
      if (range && number >= range[0] && number <= range[1]) span.classList.add("marked");
      return span;
    }));
    container.querySelector(".marked")?.scrollIntoView({ block: "center" });
  }

  // ------------------------------------------------- one confirmation
  // A revert waiting for its "Confirm", a change waiting for "Save": only one at a time is open,
  // so a click never confirms something the person has stopped looking at.
  let pending = null;

  function confirming(close) {
    if (pending && pending !== close) pending();
    pending = close;
  }

  function settled(close) {
    if (pending === close) pending = null;
  }

  function closePending() {
    if (pending) pending();
    pending = null;
  }

  return {
    $, el, enc, when, day, plural, notice, run, markActive, api, ApiError, token, setToken, dropToken,
    address, fileAddress, lineRange, showLines, confirming, settled, closePending,
  };
})();
