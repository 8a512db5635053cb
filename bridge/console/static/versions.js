// A file's versions (MEMORY.md, a daily file): each Deep Dream, console edit and revert is one.
// The list links each to its own address; an open version shows its changes in plain words
// ("changed entry 3: … → …"), the raw diff one click away, and an admin can revert to it.
"use strict";

(() => {
  const mb = window.membridge;
  const { $, el, api } = mb;
  const shown = { memory: null, daily: null }; // {api, page, file, scope, id}: the file and version shown

  /** An element of a versions block: MEMORY.md's ids are bare, the daily pane's prefixed. */
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

  const NO_VERSIONS = {
    memory: "No recorded versions yet: each Deep Dream, console edit and revert of MEMORY.md is kept as one.",
    daily: "No recorded versions yet: each console edit and revert of this day is kept as one (with the file as "
      + "it was before the first); the bot's own notes are not.",
  };

  /** What made a version, as a person would say it. */
  function describeCause(cause, createdAt) {
    const edit = /^console: (add|edit|delete) (?:line (\d+)|at the end)$/.exec(cause);
    if (edit) {
      const what = { add: "added", edit: "changed", delete: "removed" }[edit[1]];
      return `edited in the console by an admin (${what} ${edit[2] ? `line ${edit[2]}` : "a line at the end"})`;
    }
    const revert = /^revert to version (\d+)$/.exec(cause);
    if (revert) return `reverted to version ${revert[1]}`;
    return {
      "deep dream": `Deep Dream of ${mb.day(createdAt)}`,
      "as found on disk": "found changed on disk (written by the bot or by hand since the last version)",
      forget: "a forgotten text removed (memory forget)",
    }[cause] || cause;
  }

  async function showVersions(kind, file, versions, openId) {
    shown[kind] = file && { ...file, id: null };
    const items = versions.map((version) => {
      const link = el("a", { className: "version", href: mb.address([...file.page, "version", String(version.id)]) }, [
        el("span", { className: "version-id", text: `v${version.id}` }),
        el("span", { className: "version-when", text: mb.when(version.created_at) }),
        el("span", { className: "version-cause", text: describeCause(version.cause, version.created_at) }),
        el("span", { className: "version-entries", text: mb.plural(version.entries, "entry", "entries") }),
      ]);
      link.dataset.version = version.id;
      return el("li", {}, [link]);
    });
    part(kind, "versions").replaceChildren(...items);
    part(kind, "versions").hidden = items.length === 0;
    part(kind, "versions-empty").textContent = NO_VERSIONS[kind];
    part(kind, "versions-empty").hidden = items.length > 0 || !file;
    part(kind, "version-box").hidden = true;
    if (openId) await openVersion(kind, openId);
  }

  async function openVersion(kind, id) {
    const file = shown[kind];
    const version = await api(`${file.api}/versions/${encodeURIComponent(id)}`);
    file.id = version.id;
    mb.markActive(part(kind, "versions"), ".version", (node) => node.dataset.version === String(version.id));
    const cause = describeCause(version.cause, version.created_at);
    part(kind, "version-title").textContent = version.previous === null
      ? `Version ${version.id}, ${cause}: the first recorded version`
      : `Version ${version.id}, ${cause}: what changed since version ${version.previous}`;
    renderChanges(part(kind, "version-changes"), version.changes);
    renderDiff(part(kind, "version-diff"), version.diff || "(no change from the version before)\n");
    part(kind, "revert-box").hidden = !mb.state.admin;
    part(kind, "read-only-note").hidden = mb.state.admin;
    askRevert(kind, false);
    part(kind, "version-box").hidden = false;
    part(kind, "version-box").scrollIntoView({ block: "nearest" });
  }

  /** The changes of a diff in plain words, one item each: changed (before → after), added, removed. */
  function renderChanges(list, changes) {
    if (!changes.length) {
      list.replaceChildren(el("li", { className: "muted", text: "No change." }));
      return;
    }
    list.replaceChildren(...changes.map((change) => {
      const where = change.entry ? `entry ${change.entry}` : `line ${change.line}`;
      const body = change.kind === "changed"
        ? [el("del", { text: change.before }), el("span", { className: "arrow", text: " → " }), el("ins", { text: change.after })]
        : [el(change.kind === "added" ? "ins" : "del", { text: change.kind === "added" ? change.after : change.before })];
      return el("li", { className: `change-${change.kind}` }, [
        el("span", { className: "change-what", text: `${change.kind} ${where}: ` }), ...body]);
    }));
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

  // ------------------------------------------------------------- revert
  const closers = { memory: () => askRevert("memory", false), daily: () => askRevert("daily", false) };

  function askRevert(kind, asking) {
    part(kind, "revert-start").hidden = asking;
    part(kind, "revert-confirm").hidden = !asking;
    if (asking) mb.confirming(closers[kind]);
    else mb.settled(closers[kind]);
  }

  async function revert(kind) {
    const file = shown[kind];
    const target = file.id;
    part(kind, "revert-yes").disabled = true;
    try {
      const result = await api(`${file.api}/revert`, { method: "POST", body: { version: target } });
      mb.settled(closers[kind]);
      history.pushState(null, "", mb.address([...file.page, "version", String(result.version)]));
      await mb.rerender();
      mb.notice(result.changed
        ? `${file.file} of ${file.scope} now has the exact content of version ${target} (saved as version ${result.version}).`
        : `${file.file} of ${file.scope} already has the exact content of version ${target}: nothing changed, no version saved.`);
    } finally {
      part(kind, "revert-yes").disabled = false;
    }
  }

  function wire() {
    for (const kind of ["memory", "daily"]) {
      placeVersions(kind);
      part(kind, "revert-start").addEventListener("click", () => askRevert(kind, true));
      part(kind, "revert-no").addEventListener("click", () => askRevert(kind, false));
      part(kind, "revert-yes").addEventListener("click", () => mb.run(() => revert(kind)));
    }
  }

  wire();
  Object.assign(mb, { showVersions, renderChanges, renderDiff });
})();
