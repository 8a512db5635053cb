// The view "scope": one person's (or group's) memory. #/scope/<s> is its overview (overview.js);
// /memory, /daily/<date> and /dreams/<date> show a file, /…/version/<id> one of its versions
// (versions.js), and ?lines=a-b marks those lines (where a search result points); /conversation
// the latest turns and what each recalled (conversation.js).
"use strict";

(() => {
  const mb = window.membridge;
  const { $, el, api, enc, address } = mb;
  const PANES = ["overview", "memory", "daily", "dreams", "conversation"];

  async function renderScope(route) {
    const scope = route.parts[1] || null;
    const scopes = await api("/api/scopes");
    showScopes(scopes, scope);
    $("scope-tabs").hidden = !scope;
    if (!scope) {
      $("scope-title").textContent = "No memory yet";
      for (const name of PANES) $(`pane-${name}`).hidden = true;
      return;
    }
    const pane = PANES.includes(route.parts[2]) ? route.parts[2] : "overview";
    $("scope-title").textContent = `Scope ${scope}`;
    for (const tab of document.querySelectorAll("#scope-tabs .subtab")) {
      const name = tab.dataset.pane;
      tab.href = address(name === "overview" ? ["scope", scope] : ["scope", scope, name]);
      tab.classList.toggle("active", name === pane);
    }
    for (const name of PANES) $(`pane-${name}`).hidden = name !== pane;
    mb.editor.stop();
    const range = mb.lineRange(route.params);
    const version = route.parts[pane === "memory" ? 3 : 4] === "version" ? Number(route.parts[pane === "memory" ? 4 : 5]) : null;
    if (pane === "overview") await mb.showOverview(scope);
    else if (pane === "memory") await showMemory(scope, version, range);
    else if (pane === "conversation") await mb.showConversation(scope, route.params);
    else await showDated(pane, scope, route.parts[3] || null, version, range);
  }

  // ------------------------------------------------------------- scopes
  function showScopes(scopes, current) {
    $("scope-empty").hidden = scopes.length > 0;
    $("scope-list").replaceChildren(...scopes.map((item) => {
      const link = el("a", { className: "scope", href: address(["scope", item.scope]) }, [
        el("span", { className: "scope-name", text: item.scope }),
        el("span", { className: "scope-meta scope-counts", text: scopeCounts(item) }),
        el("span", { className: "scope-meta scope-when", text: `last activity ${mb.when(item.last_activity)}` }),
      ]);
      link.dataset.scope = item.scope;
      link.classList.toggle("active", item.scope === current);
      return el("li", {}, [link]);
    }));
    // On a phone the list becomes this menu (app.css): it takes one line, not a screen.
    $("scope-pick").replaceChildren(...scopes.map((item) => {
      const option = el("option", { text: `${item.scope} (${mb.plural(item.memory_entries, "entry", "entries")})` });
      option.value = item.scope;
      return option;
    }));
    $("scope-pick").value = current || "";
  }

  function scopeCounts(item) {
    return `${mb.plural(item.memory_entries, "entry", "entries")} · ${mb.plural(item.daily_files, "day")} · `
      + `${mb.plural(item.dream_files, "dream")} · ${mb.plural(item.versions, "version")}`
      + (item.failing_flush_jobs ? ` · ${mb.plural(item.failing_flush_jobs, "flush failing", "flushes failing")}`
        + ` (${item.flush_error}; retried)` : "");
  }

  // ---------------------------------------------------------- MEMORY.md
  async function showMemory(scope, version, range) {
    const data = await api(`/api/scopes/${enc(scope)}/memory`);
    showText("memory", data.content, range, data.content.trim() ? "" : await emptyMemoryText(scope));
    mb.editor.loaded("memory", { scope, file: "MEMORY.md", content: data.content, sha256: data.sha256 });
    await mb.showVersions("memory", { api: `/api/scopes/${enc(scope)}/memory`, page: ["scope", scope, "memory"],
      file: "MEMORY.md", scope }, data.versions, version);
  }

  /** An empty MEMORY.md says who fills it, when, and where the notes waiting for it are. */
  async function emptyMemoryText(scope) {
    const overview = await api(`/api/scopes/${enc(scope)}/overview`);
    const next = overview.next_dream ? `next at ${mb.when(overview.next_dream)}` : "it is off: memory.dream.enabled";
    const waiting = overview.days
      ? ` ${mb.plural(overview.notes, "note")} from ${mb.plural(overview.days, "day")} of daily memory `
        + `${overview.notes === 1 ? "waits" : "wait"} for it.`
      : " There are no daily notes yet either: they come from conversations.";
    return `MEMORY.md is empty. Deep Dream fills it each night from the daily notes (${next}).${waiting}`;
  }

  /** A file's text as numbered lines, or a sentence saying why there is none. */
  function showText(kind, content, range, emptyText) {
    $(`${kind}-empty`).textContent = emptyText;
    $(`${kind}-empty`).hidden = !emptyText;
    $(`${kind}-content`).hidden = Boolean(emptyText);
    if (kind === "dreams") $(`${kind}-content`).textContent = content;
    else mb.showLines($(`${kind}-content`), emptyText ? "" : content, range);
  }

  // ----------------------------------------------------- daily / dreams
  const EMPTY = {
    daily: "No daily memory yet. The bot writes a day's notes here: what a conversation leaves behind when its "
      + "context is trimmed or cleared, what the bot is asked to remember, the nightly summary, and "
      + "`membridge memory add`.",
    dreams: "No dream diaries yet. Deep Dream writes one each night it changes MEMORY.md: what it kept, merged "
      + "and dropped, and why.",
  };

  async function showDated(kind, scope, date, version, range) {
    const files = await api(`/api/scopes/${enc(scope)}/${kind}`);
    const shown = date || files[0]?.date || null;
    $(`${kind}-list`).replaceChildren(...files.map((file) => {
      const link = el("a", { className: "date", text: file.date, title: mb.plural(file.size, "byte"),
        href: address(["scope", scope, kind, file.date]) });
      link.classList.toggle("active", file.date === shown);
      return el("li", {}, [link]);
    }));
    $(`${kind}-list`).hidden = files.length === 0;
    if (kind === "daily") mb.editor.loaded("daily", null);
    if (!shown) {
      $(`${kind}-title`).textContent = kind === "daily" ? "Daily memory" : "Dream diaries";
      showText(kind, "", null, EMPTY[kind]);
      if (kind === "daily") await mb.showVersions("daily", null, [], null);
      return;
    }
    const data = await api(`/api/scopes/${enc(scope)}/${kind}/${enc(shown)}`);
    $(`${kind}-title`).textContent = `${kind === "daily" ? "Daily memory" : "Dream diary"} of ${data.date}`;
    showText(kind, data.content, range, data.content.trim() ? "" : `The file of ${data.date} is empty.`);
    if (kind !== "daily") return;
    const file = `memory/${data.date}.md`;
    mb.editor.loaded("daily", { scope, file, content: data.content, sha256: data.sha256 });
    await mb.showVersions("daily", { api: `/api/scopes/${enc(scope)}/daily/${enc(data.date)}`,
      page: ["scope", scope, "daily", data.date], file, scope }, data.versions, version);
  }

  function wire() {
    $("scope-pick").addEventListener("change", () => {
      location.hash = address(["scope", $("scope-pick").value]);
    });
  }

  wire();
  window.consoleViews.scope = renderScope;
})();
