// A scope's conversation (#/scope/<s>/conversation, a pane of the view "scope"): the latest turns,
// newest first, each with what auto-recall put before the model for it and why, so a person can
// see why the bot answered as it did. ?before=<mark> is an older page (the API's "next").
// The notes are read back from the memory files: a note edited or deleted since says so instead.
"use strict";

(() => {
  const mb = window.membridge;
  const { $, el, api, enc, address } = mb;

  const WHY = {
    meaning: "found by meaning",
    words: "found by its words",
    "meaning and words": "found by meaning and by its words",
  };
  const NO_NOTES = {
    nothing: "Nothing recalled: no note was relevant enough (memory.auto_recall.min_relevance).",
    off: "Recall was off for this turn (memory.auto_recall.enabled).",
    failed: "Recall failed for this turn; the bot answered without notes, and its log says why.",
    unknown: "Not known: the recall log keeps a chat's last 50 turns, and a forget in this scope clears it.",
  };
  const GONE = {
    changed: "changed since: these lines read differently now, so they are not shown as what was recalled",
    forgotten: "forgotten: these lines are no longer in memory",
  };

  async function showConversation(scope, params) {
    const before = params.get("before") || "";
    const data = await api(`/api/scopes/${enc(scope)}/conversation${before ? `?before=${enc(before)}` : ""}`);
    const list = $("conversation-turns");
    list.replaceChildren(...data.turns.map((turn) => turnCard(scope, turn)));
    $("conversation-empty").hidden = data.turns.length > 0;
    $("conversation-empty").textContent = before
      ? "No older turns."
      : "No conversation yet: turns appear here once someone talks to the bot in this scope.";
    $("conversation-newer").hidden = !before;
    $("conversation-newer").href = address(["scope", scope, "conversation"]);
    $("conversation-older").hidden = !data.next;
    if (data.next) $("conversation-older").href = address(["scope", scope, "conversation"], { before: data.next });
  }

  function turnCard(scope, turn) {
    const card = el("li", { className: "turn" }, [
      el("p", { className: "turn-when muted", text: `${mb.when(turn.at)} · chat ${turn.chat}` }),
      said("person", "Message", turn.message),
      said("bot", "Answer", turn.answer ?? "(no answer: the turn failed, or it is still running)"),
      recallPart(scope, turn),
    ]);
    card.dataset.seq = turn.seq;
    return card;
  }

  function said(who, label, text) {
    return el("div", { className: `said ${who}` }, [el("span", { className: "who", text: label }),
      el("p", { className: "words", text })]);
  }

  function recallPart(scope, turn) {
    if (turn.recall !== "recalled") {
      return el("p", { className: `recall-none recall-${turn.recall}`, text: NO_NOTES[turn.recall] });
    }
    return el("div", { className: "recall" }, [
      el("h4", { text: `Recalled for this turn (${mb.plural(turn.recalled.length, "note")})` }),
      el("ol", { className: "recalled" }, turn.recalled.map((note) => noteItem(scope, note))),
    ]);
  }

  function noteItem(scope, note) {
    const where = `${note.date ? `${note.date} · ` : ""}${note.path}:${note.start_line}`
      + (note.end_line > note.start_line ? `-${note.end_line}` : "");
    return el("li", { className: `note note-${note.state}` }, [
      note.state === "same"
        ? el("p", { className: "note-text", text: note.text })
        : el("p", { className: "note-text gone", text: GONE[note.state] }),
      el("p", { className: "note-meta" }, [
        el("a", { className: "where", text: where, href: mb.fileAddress(scope, note.path, note.start_line, note.end_line) }),
        el("span", { text: `relevance ${note.relevance.toFixed(2)}` }),
        el("span", { className: "why", text: WHY[note.why] || note.why }),
      ]),
    ]);
  }

  mb.showConversation = showConversation;
})();
