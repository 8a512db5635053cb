// membridge memory console: sign-in and the router. Every view has an address (#/…), so a reload,
// the back button, a bookmark and a shared link all land where they pointed. The views live in
// their own scripts (core.js explains how they register); this one runs last.
"use strict";

(() => {
  const mb = window.membridge;
  const { $, api, run } = mb;
  const state = { admin: false, signedIn: false, scope: null };
  mb.state = state;

  /** An address as {name, parts, params}: "#/scope/alice/search?q=tea" → name "search". */
  function parseRoute(hash) {
    const raw = hash.replace(/^#\/?/, "");
    const cut = raw.indexOf("?");
    const path = cut < 0 ? raw : raw.slice(0, cut);
    const params = new URLSearchParams(cut < 0 ? "" : raw.slice(cut + 1));
    const parts = path.split("/").filter(Boolean).map((part) => {
      try {
        return decodeURIComponent(part);
      } catch {
        return part;
      }
    });
    let name = parts[0] || "";
    if (name === "scope") name = parts[2] === "search" ? "search" : "scope";
    return { name, parts, params };
  }

  /**
   * A link with the token (#token=… alone, or &token=… on any address) signs in once: the
   * fragment never reaches the server, and it leaves the address bar at once.
   */
  function takeTokenFromAddress() {
    const raw = location.hash.replace(/^#\/?/, "");
    if (raw.startsWith("token=")) {
      mb.setToken(new URLSearchParams(raw).get("token") || "");
      history.replaceState(null, "", location.pathname + location.search);
      return;
    }
    const route = parseRoute(location.hash);
    const value = route.params.get("token");
    if (value === null) return;
    mb.setToken(value);
    route.params.delete("token");
    const rest = route.params.toString();
    history.replaceState(null, "", `${location.hash.split("?")[0]}${rest ? `?${rest}` : ""}`);
  }

  // ------------------------------------------------------------ sign-in
  function showLogin(message = "") {
    state.signedIn = false;
    for (const id of ["tabs", "session"]) $(id).hidden = true;
    for (const view of document.querySelectorAll(".view")) view.hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message;
    $("token-input").value = "";
    $("token-input").focus();
  }

  function signOut(message = "") {
    mb.dropToken();
    mb.closePending();
    state.admin = false;
    window.dispatchEvent(new CustomEvent("console:signed-out"));
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
    Object.assign(state, { admin: who.admin, signedIn: true });
    $("login").hidden = true;
    $("tabs").hidden = false;
    $("session").hidden = false;
    $("role").textContent = who.admin ? "admin" : "read-only";
    $("role").classList.toggle("admin", who.admin);
    await route();
  }

  // ------------------------------------------------------------- router
  /** The scope a bare address means: the last one shown, else the one with the newest activity. */
  async function defaultScope() {
    const scopes = await api("/api/scopes");
    if (state.scope && scopes.some((item) => item.scope === state.scope)) return state.scope;
    const newest = scopes.reduce((best, item) => ((item.last_activity || "") > (best?.last_activity || "") ? item : best),
      null);
    return newest ? newest.scope : null;
  }

  /** An address that needs a scope but names none gets the default one, in place (no history entry). */
  async function withScope(route) {
    if (route.name === "search" && route.parts[0] !== "scope") {
      const scope = await defaultScope();
      return scope ? mb.address(["scope", scope, "search"], route.params) : null;
    }
    if (route.name === "" || (route.name === "scope" && !route.parts[1])) {
      const scope = await defaultScope();
      return scope ? mb.address(["scope", scope]) : null;
    }
    return undefined;
  }

  function viewSection(name) {
    let section = $(`view-${name}`);
    if (!section) {
      section = mb.el("section", { className: "view" });
      section.id = `view-${name}`;
      document.querySelector("main").append(section);
    }
    return section;
  }

  /**
   * Draw the view of the current address. Calls run one after the other, each reading the address
   * when its turn comes, so a slow view can never finish over the one the person went to next.
   */
  let drawing = Promise.resolve();

  function route() {
    drawing = drawing.then(draw, draw);
    return drawing;
  }

  async function draw() {
    if (!state.signedIn) return;
    mb.closePending();
    mb.notice("");
    let current = parseRoute(location.hash);
    const redirect = await withScope(current).catch(() => undefined);
    if (redirect) {
      history.replaceState(null, "", redirect);
      current = parseRoute(redirect);
    } else if (redirect === null) {
      current = { name: "scope", parts: ["scope"], params: new URLSearchParams() }; // no scope yet
    }
    const render = window.consoleViews[current.name];
    if (!render) {
      mb.notice(`There is no page at ${location.hash}; the tabs above lead to every view.`, true);
      return;
    }
    if (current.parts[0] === "scope" && current.parts[1]) state.scope = current.parts[1];
    const section = viewSection(current.name);
    for (const view of document.querySelectorAll(".view")) view.hidden = view !== section;
    updateTabs(current.name);
    await run(() => render(current, section));
  }

  /** The tabs lead to the current scope's pages; the open view's tab is marked. */
  function updateTabs(name) {
    for (const tab of document.querySelectorAll("#tabs .tab")) {
      const scoped = tab.dataset.scoped;
      if (scoped !== undefined && state.scope) {
        tab.href = mb.address(scoped ? ["scope", state.scope, scoped] : ["scope", state.scope]);
      }
      tab.classList.toggle("active", tab.dataset.view === name);
      if (tab.dataset.view === name) tab.setAttribute("aria-current", "page");
      else tab.removeAttribute("aria-current");
    }
  }

  /** Draw the current address again (after a change the view must show). */
  mb.rerender = route;

  // --------------------------------------------------------------- wiring
  function start() {
    $("login-form").addEventListener("submit", (event) => {
      event.preventDefault();
      mb.setToken($("token-input").value.trim());
      run(enter);
    });
    $("logout").addEventListener("click", () => signOut());
    window.addEventListener("console:unauthorized", () => signOut("That token was not accepted; paste it again."));
    window.addEventListener("hashchange", () => {
      takeTokenFromAddress();
      if (state.signedIn) route();
      else if (mb.token()) run(enter);
    });
    takeTokenFromAddress();
    if (mb.token()) run(enter);
    else showLogin();
  }

  start();
})();
