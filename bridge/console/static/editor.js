// The line editor: an admin adds, changes or removes one MEMORY.md entry or daily line at a time.
// Each change is first shown as the server computes it (a preview writes nothing), in plain words
// with the raw diff one click away, then saved over the exact bytes that were shown; if someone
// else changed the file meanwhile the server refuses (409) and the page says so.
"use strict";

(() => {
  const mb = window.membridge;
  const { $, el, api, enc } = mb;
  const files = { memory: null, daily: null }; // {scope, file, content, sha256}: what an edit is based on

  /** Remember what a pane shows (the base of an edit) and offer editing to an admin. */
  function loaded(kind, file) {
    files[kind] = file;
    stop(kind);
  }

  function stop(kind) {
    for (const name of kind ? [kind] : ["memory", "daily"]) {
      $(`${name}-editor`).hidden = true;
      $(`${name}-editor`).replaceChildren();
      $(`${name}-content`).hidden = !$(`${name}-empty`).hidden;
      $(`${name}-edit-start`).hidden = !(mb.state.admin && files[name]);
    }
  }

  function start(kind) {
    mb.closePending(); // a revert waiting for its confirmation is not what the person is doing now
    const { file, content } = files[kind];
    const lines = content === "" ? [] : content.replace(/\n$/, "").split("\n");
    const change = el("div", { className: "change" });
    change.hidden = true;
    const input = el("input");
    Object.assign(input, { type: "text", placeholder: kind === "memory" ? "a new entry" : "a new line" });
    const add = el("form", { className: "add-line" }, [input, el("button", { className: "primary", text: "Add…" })]);
    add.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = /^(- |#)/.test(input.value.trim()) ? input.value.trim() : `- ${input.value.trim()}`;
      if (input.value.trim()) mb.run(() => propose(kind, change, { op: "add", line: null, text }));
    });
    const list = el("ol", { className: "lines" }, lines.map((line, index) => lineItem(kind, change, line, index + 1)));
    const done = el("button", { className: "quiet", text: "Done", onClick: () => stop(kind) });
    $(`${kind}-content`).hidden = true;
    $(`${kind}-empty`).hidden = true;
    $(`${kind}-edit-start`).hidden = true;
    $(`${kind}-editor`).replaceChildren(el("p", { className: "muted", text: `Editing ${file}: each change is `
      + "shown before it is saved." }), list, add, change, el("div", { className: "buttons" }, [done]));
    $(`${kind}-editor`).hidden = false;
  }

  function lineItem(kind, change, text, number) {
    const item = el("li");
    item.dataset.line = number;
    const show = () => item.replaceChildren(el("div", { className: "line-row" }, [
      el("span", { className: "line-text", text }),
      el("span", { className: "buttons" }, [
        el("button", { className: "quiet", text: "Edit", onClick: edit }),
        el("button", { className: "quiet danger-text", text: "Delete…",
          onClick: () => mb.run(() => propose(kind, change, { op: "delete", line: number })) }),
      ]),
    ]));
    const edit = () => {
      const input = el("input");
      Object.assign(input, { type: "text", value: text });
      item.replaceChildren(el("div", { className: "line-row editing" }, [
        input,
        el("span", { className: "buttons" }, [
          el("button", { className: "primary", text: "Preview", onClick: () => mb.run(() => propose(kind, change, {
            op: "edit", line: number, text: input.value })) }),
          el("button", { className: "quiet", text: "Cancel", onClick: show }),
        ]),
      ]));
      input.focus();
    };
    show();
    return item;
  }

  async function propose(kind, change, edit) {
    const { scope, file, sha256 } = files[kind];
    const body = { ...edit, file, base: sha256 };
    const path = `/api/scopes/${enc(scope)}/lines`;
    const preview = await api(path, { method: "POST", body: { ...body, preview: true } });
    const close = () => {
      change.hidden = true;
      mb.settled(close);
    };
    const changes = el("ul", { className: "changes" });
    mb.renderChanges(changes, preview.changes);
    const diff = el("pre", { className: "diff" });
    mb.renderDiff(diff, preview.diff || "(no change)\n");
    const removing = edit.op === "delete";
    const save = el("button", { className: removing ? "danger" : "save", text: removing ? "Remove this line" : "Save this change",
      onClick: () => mb.run(async () => {
        save.disabled = true;
        const result = await api(path, { method: "POST", body });
        mb.settled(close);
        await mb.rerender();
        start(kind);
        mb.notice(`Saved: ${file} is now version ${result.version}.`);
      }) });
    change.replaceChildren(el("h3", { text: "Change to save" }), changes,
      el("details", { className: "raw" }, [el("summary", { text: "Raw diff" }), diff]),
      el("div", { className: "buttons" }, [save, el("button", { className: "quiet", text: "Cancel", onClick: close })]));
    change.hidden = false;
    mb.confirming(close);
    save.focus();
  }

  function wire() {
    for (const kind of ["memory", "daily"]) $(`${kind}-edit-start`).addEventListener("click", () => start(kind));
  }

  wire();
  mb.editor = { loaded, stop, start };
})();
